package nvml

import (
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// futureSlack is how far past the sample time a utilization sample's
// timestamp (the host's clock, µs) may be. The driver stamps its samples
// with the clock the exporter reads, so a sample is at most as far past
// the sample time as the sample has run when it is read (the GPUs read
// before it). A later one is a glitch, or the host clock stepped back:
// averaged in and taken as lastSeen, it would leave the driver nothing
// newer to answer, and no figure, until the clock caught up. A true
// sample stamped later than this is only skipped this time: newer than
// lastSeen, it is answered again by the next call.
const futureSlack = 3 * time.Second

// driverPeriodMax is the longest of the driver's utilization sample
// periods, in µs: "between 1 second and 1/6 second, depending on the
// product" (NVML's nvmlDeviceGetUtilizationRates).
const driverPeriodMax = uint64(1_000_000)

// usNow is a sample time in NVML's timestamp unit (µs since the epoch).
func usNow(now time.Time) uint64 { return uint64(max(now.UnixMicro(), 0)) }

// lastSeen is the state of one utilization call that takes a last-seen
// timestamp: the newest sample's timestamp (µs), and whether a first answer
// was taken. The first answer holds whatever the driver kept, over a window
// that is not a sample interval: it only sets the timestamp.
type lastSeen struct {
	ts     uint64
	primed bool
}

// latest is the newest timestamp a sample taken at now (µs) may carry.
func latest(now uint64) uint64 { return now + uint64(futureSlack.Microseconds()) }

// since is the lastSeen to ask NVML with at now (µs). One beyond now and
// its slack is dropped: the call asks for everything and its answer only
// primes again.
func (l *lastSeen) since(now uint64) uint64 {
	if l.ts > latest(now) {
		*l = lastSeen{}
	}
	return l.ts
}

// noSample records an answer without samples (ERROR_NOT_FOUND): whatever
// comes next is newer than this call.
func (l *lastSeen) noSample() { l.primed = true }

// utilMeans averages the utilization samples (percentages) NVML returns
// for a last-seen timestamp, per key (a PID, a vGPU instance), in the order
// the keys first appear.
type utilMeans[K comparable] struct {
	since uint64    // samples not newer than this are skipped (0: none)
	limit uint64    // samples newer than this are glitches, skipped
	first bool      // the first answer: only the timestamp is taken
	last  *lastSeen // advanced to the newest sample added
	keys  []K
	acc   map[K]*utilMean
	// odd counts the samples skipped for a figure over 100 %
	odd int
}

// utilMean is the running sum of up to four utilization figures of a key.
type utilMean struct {
	sum  [4]float64
	n    float64
	name string // free for the caller (a process name)
}

// newUtilMeans averages the samples of one answer to a call made with
// last.since(now); last is advanced to the newest sample not beyond now
// and its slack.
func newUtilMeans[K comparable](last *lastSeen, now uint64) *utilMeans[K] {
	m := &utilMeans[K]{since: last.ts, limit: latest(now), first: !last.primed, last: last, acc: map[K]*utilMean{}}
	last.primed = true
	return m
}

// add adds one sample; it returns the key's entry and whether it is new,
// or nil for a sample not newer than since, stamped beyond limit, or of
// the first answer. A sample with a figure that is no percentage (over 100
// or not a number) is counted in odd and not averaged: an integer cannot
// overshoot by rounding, and one such sample would pull the mean up to 1;
// its key is still listed (a vGPU host's processes are listed from these
// samples), without figures where it has no other sample.
func (m *utilMeans[K]) add(k K, ts uint64, pct ...float64) (*utilMean, bool) {
	if m.since != 0 && ts <= m.since {
		return nil, false // covered by the previous interval
	}
	if ts > m.limit {
		return nil, false // from the future: not of this interval
	}
	if ts > m.last.ts {
		m.last.ts = ts
	}
	if m.first {
		return nil, false
	}
	a, ok := m.acc[k]
	if !ok {
		a = &utilMean{}
		m.acc[k] = a
		m.keys = append(m.keys, k)
	}
	for _, v := range pct {
		if !(v >= 0 && v <= 100) {
			m.odd++
			return a, !ok
		}
	}
	for i, v := range pct {
		a.sum[i] += v
	}
	a.n++
	return a, !ok
}

// ratio is the mean of figure i as a 0-1 ratio; nil where the key's every
// sample was odd.
func (a *utilMean) ratio(i int) *float64 {
	if a.n == 0 {
		return nil
	}
	return gpu.Float(clamp01(a.sum[i] / a.n / 100))
}

// oddSamples logs once per GPU and call that n of a utilization call's
// samples had a figure over 100 % (none when n is 0).
func (rd *devReader) oddSamples(call string, n int) {
	if n > 0 {
		rd.outOfRange(call, "samples_skipped", n)
	}
}
