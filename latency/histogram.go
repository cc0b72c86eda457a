package latency

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
)

// histo is a classic cumulative histogram: counts of observations at or
// under each finite upper bound, plus the total count (the +Inf bucket) and
// the sum. For Triton's counters alone only count, timed and sum are set
// (mean == true).
type histo struct {
	bounds []float64 // finite upper bounds, ascending
	cum    []float64 // cumulative counts at bounds
	count  float64
	sum    float64
	// timed is, for Triton's counters alone (mean), how many of the count
	// requests have their duration in sum: the successes (see
	// requestCounts). Read only where mean; every observation of a
	// histogram is in its sum.
	timed float64
	mean  bool
	// req is the source's own request counters when they are not the
	// histogram's observations (Triton: requests and their duration from
	// counters, latency buckets from the first-response histogram).
	req requestCounts
	// serverQuantiles are quantiles the source computed itself over its
	// own window (a summary), in seconds; not windowed here, never
	// subtracted or summed.
	serverQuantiles map[float64]float64
	// series are the summed series one by one, by label set, so that a
	// delta is taken series by series (see seriesDelta): a series that
	// restarts or goes away must not make the others' history look new.
	// reqSeries are Triton's request counters the same way. nil in a
	// delta or a window.
	series    map[string]histo
	reqSeries map[string]requestCounts
	// start is the answering process's process_start_time_seconds, 0
	// when the answer has none (see processStart).
	start float64
}

// requestCounts are cumulative request counters: how many, how many of
// them are timed (their duration is in sum), the total duration in
// seconds, and how many succeeded. Triton counts success and failure, but
// adds a request's duration to nv_inference_request_duration_us only when
// it succeeds (core's InferenceStatsAggregator: UpdateFailure counts the
// failure alone): timed is the successes. Its first-response histogram
// observes error responses as well (core's InferenceResponse::Send), so
// no more than succ requests can be good.
type requestCounts struct {
	count, timed, sum, succ float64
	set                     bool
}

// plus is r and o added, field by field (set).
func (r requestCounts) plus(o requestCounts) requestCounts {
	return requestCounts{count: r.count + o.count, timed: r.timed + o.timed, sum: r.sum + o.sum, succ: r.succ + o.succ, set: true}
}

// minus is o taken from r, field by field (set).
func (r requestCounts) minus(o requestCounts) requestCounts {
	return requestCounts{count: r.count - o.count, timed: r.timed - o.timed, sum: r.sum - o.sum, succ: r.succ - o.succ, set: true}
}

// failures is how many of r's requests failed: those that did not
// succeed. Triton's failure counter is a counter as its success counter
// is, so a fall of it is a reset even while the successes rise.
func (r requestCounts) failures() float64 { return r.count - r.succ }

// times is r with every field times f (set).
func (r requestCounts) times(f float64) requestCounts {
	return requestCounts{count: r.count * f, timed: r.timed * f, sum: r.sum * f, succ: r.succ * f, set: true}
}

// requests is the number of requests h counts, how many of them are timed
// (their duration is in sum), and that total duration: the request
// counters where the source has them, else the observations (all timed).
// The mean latency is sum over timed.
func (h *histo) requests() (count, timed, sum float64) {
	switch {
	case h.req.set:
		return h.req.count, h.req.timed, h.req.sum
	case h.mean:
		return h.count, h.timed, h.sum
	}
	return h.count, h.count, h.sum
}

// goodMax is the most requests h's buckets can count good: the successes
// where the source counts requests apart from its buckets (Triton, whose
// histogram holds failures too), else every observation.
func (h *histo) goodMax() float64 {
	if h.req.set {
		return h.req.succ
	}
	return h.count
}

type bucket struct{ le, cum float64 }

// seriesBuckets validates one series' buckets: sorted by bound, +Inf
// dropped (the count stands for it), no NaN or -Inf bound (interpolating
// up from -Inf gives NaN, which a good-requests counter would keep for
// good), cumulative counts that never decrease.
func seriesBuckets(bs []bucket, count float64) ([]bucket, error) {
	if math.IsNaN(count) || count < 0 || math.IsInf(count, 0) {
		return nil, fmt.Errorf("bad sample count %v", count)
	}
	out := make([]bucket, 0, len(bs))
	for _, b := range bs {
		if math.IsNaN(b.le) || math.IsInf(b.le, -1) || math.IsNaN(b.cum) || b.cum < 0 || math.IsInf(b.cum, 0) {
			return nil, fmt.Errorf("bad bucket le=%v count=%v", b.le, b.cum)
		}
		if math.IsInf(b.le, +1) {
			continue
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].le < out[j].le })
	for i := range out {
		if i > 0 && out[i].le == out[i-1].le {
			return nil, fmt.Errorf("bucket le=%v given twice", out[i].le)
		}
		if i > 0 && out[i].cum < out[i-1].cum {
			return nil, fmt.Errorf("bucket counts decrease at le=%v", out[i].le)
		}
	}
	if len(out) > 0 && out[len(out)-1].cum > count {
		return nil, fmt.Errorf("bucket le=%v count %v exceeds the total %v", out[len(out)-1].le, out[len(out)-1].cum, count)
	}
	return out, nil
}

// maxBounds bounds the distinct bucket bounds of a source's series
// together: merging costs series x bounds, and real latency histograms
// have a few dozen.
const maxBounds = 1024

// mergeSeries sums several series' histograms on the union of their
// bounds; a series without a given bound contributes its count at its
// nearest lower bound.
func mergeSeries(keys []string, series [][]bucket, counts, sums []float64) (histo, error) {
	set := map[float64]bool{}
	for _, s := range series {
		for _, b := range s {
			set[b.le] = true
		}
	}
	if len(set) > maxBounds {
		return histo{}, fmt.Errorf("%d distinct bucket bounds over %d series; at most %d are supported", len(set), len(series), maxBounds)
	}
	h := histo{}
	for le := range set {
		h.bounds = append(h.bounds, le)
	}
	sort.Float64s(h.bounds)
	h.cum = make([]float64, len(h.bounds))
	repeats := make(map[string]int, len(series))
	for si, s := range series {
		j := 0
		cur := 0.0
		for i, le := range h.bounds {
			for j < len(s) && s[j].le <= le {
				cur = s[j].cum
				j++
			}
			h.cum[i] += cur
		}
		h.count += counts[si]
		sum := sums[si]
		if !(sum >= 0) || math.IsInf(sum, +1) { // NaN fails the first
			// one series' bad sum would reach the mean (a reset
			// series' delta is its values as they are): refused,
			// as a bad total is
			return histo{}, fmt.Errorf("series {%s}: bad sum %v", clip.Text(strings.TrimSuffix(keys[si], ","), maxQuoted), sum)
		}
		h.sum += sum
		one := histo{count: counts[si], sum: sum, bounds: make([]float64, len(s)), cum: make([]float64, len(s))}
		for i, b := range s {
			one.bounds[i], one.cum[i] = b.le, b.cum
		}
		if h.series == nil {
			h.series = make(map[string]histo, len(series))
		}
		h.series[uniqueKey(repeats, keys[si])] = one
	}
	return h, nil
}

// extractHistogram finds the first of names present and sums its series
// that match the matchers. It accepts a typed histogram, or the untyped
// name_bucket/name_count/name_sum series of an exposition without TYPE lines.
func extractHistogram(fams map[string]*dto.MetricFamily, names []string, matchers map[string]string) (histo, string, error) {
	for _, name := range names {
		if mf, ok := fams[name]; ok {
			h, err := histogramFromFamily(mf, matchers)
			return h, name, err
		}
		if mf, ok := fams[name+"_bucket"]; ok {
			h, err := histogramFromUntyped(mf, fams[name+"_count"], fams[name+"_sum"], matchers)
			return h, name, err
		}
	}
	return histo{}, "", fmt.Errorf("no histogram %v in the exposition", names)
}

func histogramFromFamily(mf *dto.MetricFamily, matchers map[string]string) (histo, error) {
	if t := mf.GetType(); t != dto.MetricType_HISTOGRAM && t != dto.MetricType_GAUGE_HISTOGRAM {
		return histo{}, fmt.Errorf("%s is a %s, not a histogram", mf.GetName(), t)
	}
	var keys []string
	var series [][]bucket
	var counts, sums []float64
	for _, m := range mf.GetMetric() {
		if !labelsMatch(m, matchers) {
			continue
		}
		hg := m.GetHistogram()
		if hg == nil {
			continue
		}
		count := float64(hg.GetSampleCount())
		if hg.SampleCountFloat != nil {
			count = hg.GetSampleCountFloat()
		}
		var bs []bucket
		for _, b := range hg.GetBucket() {
			c := float64(b.GetCumulativeCount())
			if b.CumulativeCountFloat != nil {
				c = b.GetCumulativeCountFloat()
			}
			bs = append(bs, bucket{le: b.GetUpperBound(), cum: c})
		}
		if len(bs) == 0 && (len(hg.GetPositiveSpan()) > 0 || len(hg.GetNegativeSpan()) > 0 || hg.GetZeroCount() > 0) {
			return histo{}, fmt.Errorf("%s is a native histogram without classic buckets; not supported", mf.GetName())
		}
		sb, err := seriesBuckets(bs, count)
		if err != nil {
			return histo{}, fmt.Errorf("%s%s: %w", mf.GetName(), labelString(m), err)
		}
		keys = append(keys, seriesKey(m))
		series = append(series, sb)
		counts = append(counts, count)
		sums = append(sums, hg.GetSampleSum())
	}
	return finishHistogram(mf.GetName(), matchers, keys, series, counts, sums)
}

func finishHistogram(name string, matchers map[string]string, keys []string, series [][]bucket, counts, sums []float64) (histo, error) {
	if len(series) == 0 {
		return histo{}, fmt.Errorf("%s has no series matching %v", name, matchers)
	}
	h, err := mergeSeries(keys, series, counts, sums)
	if err != nil {
		return histo{}, fmt.Errorf("%s: %w", name, err)
	}
	if len(h.bounds) == 0 {
		return histo{}, fmt.Errorf("%s has only a +Inf bucket: no latency can be derived", name)
	}
	return h, nil
}

// histogramFromUntyped rebuilds a histogram from untyped _bucket series
// (label "le"), grouped by their other labels.
func histogramFromUntyped(buckets, counts, sums *dto.MetricFamily, matchers map[string]string) (histo, error) {
	type grp struct {
		bs         []bucket
		count, sum float64
		hasCount   bool
	}
	groups := map[string]*grp{}
	var order []string
	key := seriesKey
	get := func(k string) *grp {
		g, ok := groups[k]
		if !ok {
			g = &grp{}
			groups[k] = g
			order = append(order, k)
		}
		return g
	}
	value := func(m *dto.Metric) float64 {
		switch {
		case m.GetUntyped() != nil:
			return m.GetUntyped().GetValue()
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		}
		return math.NaN()
	}
	for _, m := range buckets.GetMetric() {
		if !labelsMatch(m, matchers) {
			continue
		}
		le := math.NaN()
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "le" {
				if v, err := strconv.ParseFloat(lp.GetValue(), 64); err == nil {
					le = v
				}
			}
		}
		g := get(key(m))
		g.bs = append(g.bs, bucket{le: le, cum: value(m)})
		if math.IsInf(le, +1) && !g.hasCount {
			g.count = value(m)
		}
	}
	for _, m := range counts.GetMetric() {
		if g, ok := groups[key(m)]; ok {
			g.count, g.hasCount = value(m), true
		}
	}
	for _, m := range sums.GetMetric() {
		if g, ok := groups[key(m)]; ok {
			g.sum = value(m)
		}
	}
	var series [][]bucket
	var cs, ss []float64
	var keys []string
	for _, k := range order {
		g := groups[k]
		if !g.hasCount {
			// no _count and no +Inf bucket: take the largest bucket
			for _, b := range g.bs {
				if b.cum > g.count {
					g.count = b.cum
				}
			}
		}
		sb, err := seriesBuckets(g.bs, g.count)
		if err != nil {
			return histo{}, fmt.Errorf("%s{%s}: %w", buckets.GetName(), clip.Text(k, maxQuoted), err)
		}
		keys = append(keys, k)
		series = append(series, sb)
		cs = append(cs, g.count)
		ss = append(ss, g.sum)
	}
	return finishHistogram(buckets.GetName(), matchers, keys, series, cs, ss)
}

// seriesKey identifies a series by its labels other than "le", in full
// (labelString clips, and two long label sets must not share a key), in
// the order of their names: a page may write them in any.
func seriesKey(m *dto.Metric) string { return seriesKeyLess(m, "le") }

// seriesKeyLess is m's series' key less the labels less.
func seriesKeyLess(m *dto.Metric, less ...string) string {
	lps := m.GetLabel()
	byName := func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) }
	if !slices.IsSortedFunc(lps, byName) {
		lps = slices.SortedStableFunc(slices.Values(lps), byName)
	}
	var b bytes.Buffer
	for _, lp := range lps {
		if slices.Contains(less, lp.GetName()) {
			continue
		}
		fmt.Fprintf(&b, "%s=%q,", lp.GetName(), lp.GetValue())
	}
	return b.String()
}

// uniqueKey is k, or k with a suffix when an exposition repeats a label
// set: each repeat stays a series of its own, in the order given (the
// n-th repeat is k#n). repeats counts the keys given so far. A suffixed
// key never equals a label set's own (empty, or ending in a comma), so
// none is looked for: trying suffixes from 1 up for each repeat cost the
// square of their number.
func uniqueKey(repeats map[string]int, k string) string {
	n := repeats[k]
	repeats[k] = n + 1
	if n == 0 {
		return k
	}
	return k + "#" + strconv.Itoa(n)
}

// cumAt is the cumulative count at bound le of h (whose bounds include le).
func (h *histo) cumAt(le float64) (float64, bool) {
	i := sort.SearchFloat64s(h.bounds, le)
	if i < len(h.bounds) && h.bounds[i] == le {
		return h.cum[i], true
	}
	return 0, false
}

func sameBounds(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// quantile is the q-quantile of h by linear interpolation inside the
// bucket that holds rank q*count, taking the bucket's lower bound as the
// previous upper bound (0 for the first bucket when its bound is positive).
// A rank in the +Inf bucket gives the largest finite bound. ok is false for
// an empty histogram.
func (h *histo) quantile(q float64) (float64, bool) {
	if h.count <= 0 || len(h.bounds) == 0 || math.IsNaN(q) {
		return 0, false
	}
	rank := q * h.count
	for i, le := range h.bounds {
		if h.cum[i] >= rank && h.cum[i] > 0 {
			lower, clower := 0.0, 0.0
			if i > 0 {
				lower, clower = h.bounds[i-1], h.cum[i-1]
			} else if le <= 0 {
				return le, true
			}
			if h.cum[i] == clower {
				return le, true
			}
			return lower + (le-lower)*(rank-clower)/(h.cum[i]-clower), true
		}
	}
	return h.bounds[len(h.bounds)-1], true
}

// good is the number of observations at or under target, interpolating
// linearly inside the bucket that holds target; observations above the
// largest finite bound count as over the target.
func (h *histo) good(target float64) float64 {
	if len(h.bounds) == 0 {
		return 0
	}
	for i, le := range h.bounds {
		if le >= target {
			lower, clower := 0.0, 0.0
			if i > 0 {
				lower, clower = h.bounds[i-1], h.cum[i-1]
			} else if le <= 0 {
				return h.cum[i]
			}
			if le == target || le == lower {
				return h.cum[i]
			}
			if target <= lower {
				return clower
			}
			return clower + (h.cum[i]-clower)*(target-lower)/(le-lower)
		}
	}
	return h.cum[len(h.cum)-1]
}

// add sums two deltas with the same bounds.
func (h *histo) add(o histo) {
	h.count += o.count
	h.sum += o.sum
	h.timed += o.timed
	if o.req.set {
		h.req = h.req.plus(o.req)
	}
	if o.serverQuantiles != nil {
		h.serverQuantiles = o.serverQuantiles // the latest
	}
	if h.bounds == nil {
		h.bounds = append([]float64(nil), o.bounds...)
		h.cum = make([]float64, len(o.cum))
	}
	for i := range h.cum {
		if i < len(o.cum) {
			h.cum[i] += o.cum[i]
		}
	}
}
