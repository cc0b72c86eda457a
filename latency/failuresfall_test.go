package latency

import (
	"fmt"
	"testing"
	"time"
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

// TestTritonFailuresFallIsReset: a model's failure counter that falls
// while its successes rise is a reset of that model's counters, not a
// rise of the successes beyond the requests. Good requests never exceed
// the requests, in total and in the window (an attainment above 1 read as
// slack by the tuner, a negative burn by the alerts).
func TestTritonFailuresFallIsReset(t *testing.T) {
	tests := []struct {
		name           string
		scrapes        [][]tritonFlat // 15 s apart, the first a baseline
		good, requests float64
	}{
		// 20 requests, then 21 with the failures down 10 -> 6 and
		// the successes up 10 -> 15: a reset (21 requests, 15 good of
		// 20 more fast answers), not 1 request with 5 good; then 22
		// (22, 20)
		{"one model", [][]tritonFlat{
			{{"bert", 10, 10, 20}},
			{{"bert", 15, 6, 40}},
			{{"bert", 20, 2, 60}},
		}, 35, 43},
		// series by series: bert restarts as above (21 requests, 15
		// successes) while resnet serves 10 more; the histograms add
		// 20 + 10 fast answers, at most the 25 successes good
		{"two models", [][]tritonFlat{
			{{"bert", 10, 10, 20}, {"resnet", 100, 0, 100}},
			{{"bert", 15, 6, 40}, {"resnet", 110, 0, 110}},
		}, 25, 31},
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

// TestRequestDeltaSuccessesAtMostRequests: the successes a delta counts
// never exceed its requests, in a whole delta and series by series; a fall
// of the failures alone is a reset, and rounding (counters that are not
// whole numbers) cannot lift the successes over the requests either.
func TestRequestDeltaSuccessesAtMostRequests(t *testing.T) {
	rc := func(count, succ float64) requestCounts {
		return requestCounts{count: count, timed: succ, sum: succ, succ: succ, set: true}
	}
	tests := []struct {
		name                string
		prev, cur           requestCounts
		wantCount, wantSucc float64
	}{
		{"failures fell", rc(20, 10), rc(21, 15), 21, 15},
		{"failures rose", rc(20, 10), rc(27, 15), 7, 5},
		// failures 6.9 -> 6.9 (11.3-4.4 is not below 8.8-1.9), yet
		// 4.4-1.9 is 2.5000000000000004 and 11.3-8.8 is 2.5
		{"rounding", rc(8.8, 1.9), rc(11.3, 4.4), 2.5, 2.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			whole := delta(histo{bounds: []float64{1}, cum: []float64{0}, req: tc.prev}, histo{bounds: []float64{1}, cum: []float64{0}, req: tc.cur})
			bySeries, _ := reqSeriesDelta(map[string]requestCounts{"a": tc.prev}, map[string]requestCounts{"a": tc.cur})
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
