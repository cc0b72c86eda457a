package nvml

import "github.com/vgpu-exporter/vgpu_exporter/gpu"

// utilMeans averages the utilization samples (percentages) NVML returns
// for a last-seen timestamp, per key (a PID, a vGPU instance), in the order
// the keys first appear.
type utilMeans[K comparable] struct {
	since uint64  // samples not newer than this are skipped (0: none)
	last  *uint64 // advanced to the newest sample added
	keys  []K
	acc   map[K]*utilMean
}

// utilMean is the running sum of up to four utilization figures of a key.
type utilMean struct {
	sum  [4]float64
	n    float64
	name string // free for the caller (a process name)
}

// newUtilMeans averages samples newer than since; *last is advanced to the
// newest sample's timestamp.
func newUtilMeans[K comparable](since uint64, last *uint64) *utilMeans[K] {
	return &utilMeans[K]{since: since, last: last, acc: map[K]*utilMean{}}
}

// add adds one sample; it returns the key's entry and whether it is new,
// or nil for a sample not newer than since.
func (m *utilMeans[K]) add(k K, ts uint64, pct ...float64) (*utilMean, bool) {
	if m.since != 0 && ts <= m.since {
		return nil, false // covered by the previous interval
	}
	if ts > *m.last {
		*m.last = ts
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
