package latency

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

// tritonFlat is one model's cumulative counters in a Triton exposition
// whose failures carry the model's labels alone (as before Triton
// labelled them by reason): successes (5 ms each), failures, and first
// responses, all in 5 ms, whose count need not be the requests'.
type tritonFlat struct {
	model                   string
	succ, fail, firstAnswer int
}

const tritonFlatTypes = `# TYPE nv_inference_request_success counter
# TYPE nv_inference_request_failure counter
# TYPE nv_inference_request_duration_us counter
# TYPE nv_inference_first_response_histogram_ms histogram
`

const tritonFlatModel = `nv_inference_request_success{model=%[1]q} %[2]d
nv_inference_request_failure{model=%[1]q} %[3]d
nv_inference_request_duration_us{model=%[1]q} %[4]d
nv_inference_first_response_histogram_ms_bucket{model=%[1]q,le="10"} %[5]d
nv_inference_first_response_histogram_ms_bucket{model=%[1]q,le="+Inf"} %[5]d
nv_inference_first_response_histogram_ms_count{model=%[1]q} %[5]d
nv_inference_first_response_histogram_ms_sum{model=%[1]q} %[6]d
`

func tritonFlatText(models ...tritonFlat) []byte {
	body := tritonFlatTypes
	for _, m := range models {
		body += fmt.Sprintf(tritonFlatModel, m.model, m.succ, m.fail, m.succ*5000, m.firstAnswer, m.firstAnswer*5)
	}
	return []byte(body)
}

// TestTritonFailuresFallRebases: a model's failure counter that falls
// while its successes rise is neither a rise of the successes beyond the
// requests nor a restart (which would count the model's whole history at
// once): that model counts nothing that once, and counts on from its new
// values. Good requests never exceed the requests, in total and in the
// window (an attainment above 1 read as slack by the tuner, a negative
// burn by the alerts).
func TestTritonFailuresFallRebases(t *testing.T) {
	tests := []struct {
		name           string
		scrapes        [][]tritonFlat // 15 s apart, the first a baseline
		good, requests float64
	}{
		// 20 requests, then 21 with the failures down 10 -> 6 and
		// the successes up 10 -> 15: nothing counted (not 1 request
		// with 5 good, nor 21 with 15); then 5 successes and 2
		// failures, all answered fast
		{"one model", [][]tritonFlat{
			{{"bert", 10, 10, 20}},
			{{"bert", 15, 6, 40}},
			{{"bert", 20, 8, 47}},
		}, 5, 7},
		// series by series: bert falls as above, counting nothing,
		// while resnet serves 10 more, all fast
		{"two models", [][]tritonFlat{
			{{"bert", 10, 10, 20}, {"resnet", 100, 0, 100}},
			{{"bert", 15, 6, 40}, {"resnet", 110, 0, 110}},
		}, 10, 10},
		// failures that do not fall: the deltas as they are
		{"failures rise", [][]tritonFlat{
			{{"bert", 10, 10, 20}},
			{{"bert", 15, 12, 27}},
		}, 5, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &Source{URL: "sim://x", Preset: PresetTriton, Timeout: time.Second, MaxBytes: 1 << 20}
			tr := newSLOTracker(Spec{Name: "search", Source: src, Objective: &Objective{Quantile: 0.99, Target: 100 * time.Millisecond}, Window: time.Minute})
			tr.setInterval(15 * time.Second)
			t0 := time.Unix(1000, 0)
			for i, models := range tc.scrapes {
				observeText(t, tr, t0.Add(time.Duration(15*i)*time.Second), tritonFlatText(models...))
			}
			st := tr.Status()
			if !near(st.RequestsTotal, tc.requests) || !near(st.GoodRequestsTotal, tc.good) {
				t.Errorf("requests %v, good %v; want %v, %v", st.RequestsTotal, st.GoodRequestsTotal, tc.requests, tc.good)
			}
			if want := tc.good / tc.requests; st.Attainment == nil || !near(*st.Attainment, want) {
				t.Errorf("attainment %s, want %v", ptrString(st.Attainment), want)
			}
		})
	}
}

// tritonByReason is tritonFlatText's page with the failures by reason,
// as Triton 23.x+ serves them: m.fail of them BACKEND, 7 REJECTED.
func tritonByReason(m tritonFlat) []byte {
	return []byte(fmt.Sprintf(`# TYPE nv_inference_request_success counter
nv_inference_request_success{model=%[1]q,version="1"} %[2]d
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model=%[1]q,reason="BACKEND",version="1"} %[3]d
nv_inference_request_failure{model=%[1]q,reason="REJECTED",version="1"} 7
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model=%[1]q,version="1"} %[4]d
`, m.model, m.succ, m.fail, m.succ*5000))
}

// TestTritonFailuresFallLongHistory: a model of a long history whose
// failures fall while its successes rise is not taken for a restart: its
// hundred million requests, counted at once, would trip the rate check
// and fail the scrape. It counts nothing that once, the source stays up,
// and the next answer counts from it; failures by reason the same (a
// reason's counter is not a series of its own, restarted alone).
func TestTritonFailuresFallLongHistory(t *testing.T) {
	for name, page := range map[string]func(tritonFlat) []byte{
		"failures by model":  func(m tritonFlat) []byte { return tritonFlatText(m) },
		"failures by reason": tritonByReason,
	} {
		t.Run(name, func(t *testing.T) {
			src := &Source{URL: "sim://x", Preset: PresetTriton, Timeout: time.Second, MaxBytes: 1 << 20}
			tr := newSLOTracker(Spec{Name: "search", Source: src, Objective: &Objective{Quantile: 0.99, Target: 100 * time.Millisecond}, Window: time.Minute})
			tr.setInterval(15 * time.Second)
			t0 := time.Unix(1000, 0)
			const base = 100_000_000
			for i, m := range []tritonFlat{
				{"bert", base, 100, base},
				{"bert", base + 150, 50, base + 150}, // failures fell
				{"bert", base + 300, 60, base + 300},
			} {
				observeText(t, tr, t0.Add(time.Duration(15*i)*time.Second), page(m))
				if st := tr.Status(); !st.SourceUp || st.ScrapeErrorsTotal != 0 {
					t.Fatalf("answer %d: source up %v, %d errors (%s)", i, st.SourceUp, st.ScrapeErrorsTotal, st.LastError)
				}
			}
			if st := tr.Status(); !near(st.RequestsTotal, 160) {
				t.Errorf("requests %v; want 160 (the last answer's)", st.RequestsTotal)
			}
		})
	}
}

// TestRequestDeltaSuccessesAtMostRequests: the successes a delta counts
// never exceed its requests, in a whole delta and series by series; a fall
// of the failures alone counts nothing, and rounding (counters that are
// not whole numbers) cannot lift the successes over the requests either.
func TestRequestDeltaSuccessesAtMostRequests(t *testing.T) {
	rc := func(count, succ float64) requestCounts {
		return requestCounts{count: count, timed: succ, sum: succ, succ: succ, set: true}
	}
	tests := []struct {
		name                string
		prev, cur           requestCounts
		wantCount, wantSucc float64
	}{
		{"failures fell", rc(20, 10), rc(21, 15), 0, 0},
		{"failures rose", rc(20, 10), rc(27, 15), 7, 5},
		// failures 6.9 -> 6.9 (11.3-4.4 is not below 8.8-1.9), yet
		// 4.4-1.9 is 2.5000000000000004 and 11.3-8.8 is 2.5
		{"rounding", rc(8.8, 1.9), rc(11.3, 4.4), 2.5, 2.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			whole, _ := wholeDelta(histo{bounds: []float64{1}, cum: []float64{0}, req: tc.prev}, histo{bounds: []float64{1}, cum: []float64{0}, req: tc.cur})
			bySeries, _ := reqSeriesDelta(map[string]requestCounts{"a": tc.prev}, map[string]requestCounts{"a": tc.cur}, nil)
			for _, d := range []struct {
				how string
				req requestCounts
			}{{"whole", whole.req}, {"series by series", bySeries}} {
				if d.req.count != tc.wantCount || d.req.succ != tc.wantSucc || d.req.succ > d.req.count {
					t.Errorf("%s: requests %v, successes %v; want %v, %v", d.how, d.req.count, d.req.succ, tc.wantCount, tc.wantSucc)
				}
			}
		})
	}
}

// TestTritonRequestCountersJump: Triton's request counters are checked
// against the rate a server can serve as its histogram is: a success
// counter that jumps by 10^9 in 15 s while the first responses rise by
// 10 fails the scrape and is not counted, as a jump of the histogram's
// count is.
func TestTritonRequestCountersJump(t *testing.T) {
	src := &Source{URL: "sim://x", Preset: PresetTriton, Timeout: time.Second, MaxBytes: 1 << 20}
	tr := newSLOTracker(Spec{Name: "search", Source: src, Objective: &Objective{Quantile: 0.99, Target: 100 * time.Millisecond}, Window: time.Minute})
	var errs []error
	for i, m := range []tritonFlat{{"bert", 100, 0, 100}, {"bert", 1_000_000_000, 0, 110}} {
		fams, err := parseExposition(tritonFlatText(m), expfmt.FmtText, families(src))
		if err != nil {
			t.Fatal(err)
		}
		h, err := extract(src, fams)
		if err != nil {
			t.Fatal(err)
		}
		errs = append(errs, tr.observe(time.Unix(int64(15*i), 0), h))
	}
	if errs[0] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "request counters rose by") {
		t.Errorf("errors %v; want the jump refused", errs)
	}
	if st := tr.Status(); st.RequestsTotal != 0 {
		t.Errorf("%v requests counted, want none", st.RequestsTotal)
	}
}
