package nvml

import "github.com/vgpu-exporter/vgpu_exporter/gpu"

// lastSeen is the state of one utilization call that takes a last-seen
// timestamp: the newest sample's timestamp (µs), and whether a first answer
// was taken. The first answer holds whatever the driver kept, over a window
// that is not a sample interval: it only sets the timestamp.
type lastSeen struct {
	ts     uint64
	primed bool
}

// noSample records an answer without samples (ERROR_NOT_FOUND): whatever
// comes next is newer than this call.
func (l *lastSeen) noSample() { l.primed = true }

// utilMeans averages the utilization samples (percentages) NVML returns
// for a last-seen timestamp, per key (a PID, a vGPU instance), in the order
// the keys first appear.
type utilMeans[K comparable] struct {
	since uint64    // samples not newer than this are skipped (0: none)
	first bool      // the first answer: only the timestamp is taken
	last  *lastSeen // advanced to the newest sample added
	keys  []K
	acc   map[K]*utilMean
}

// utilMean is the running sum of up to four utilization figures of a key.
type utilMean struct {
	sum  [4]float64
	n    float64
	name string // free for the caller (a process name)
}

// newUtilMeans averages the samples of one answer to a call made with
// last.ts; last is advanced to the newest sample.
func newUtilMeans[K comparable](last *lastSeen) *utilMeans[K] {
	m := &utilMeans[K]{since: last.ts, first: !last.primed, last: last, acc: map[K]*utilMean{}}
	last.primed = true
	return m
}

// add adds one sample; it returns the key's entry and whether it is new,
// or nil for a sample not newer than since or of the first answer.
func (m *utilMeans[K]) add(k K, ts uint64, pct ...float64) (*utilMean, bool) {
	if m.since != 0 && ts <= m.since {
		return nil, false // covered by the previous interval
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
	for i, v := range pct {
		a.sum[i] += v
	}
	a.n++
	return a, !ok
}

// ratio is the mean of figure i as a 0-1 ratio.
func (a *utilMean) ratio(i int) *float64 {
	return gpu.Float(clamp01(a.sum[i] / a.n / 100))
}
