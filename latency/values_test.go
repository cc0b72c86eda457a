package latency

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

// A bucket bounded by -Inf is refused, naming the series: interpolating
// up from it gave NaN quantiles and attainment, and a NaN good-requests
// counter that stayed NaN after the source was well again.
func TestNegativeInfBucketRefused(t *testing.T) {
	negInf := func(count string) string {
		return strings.Replace(vllmText(count), "vllm:e2e_request_latency_seconds_bucket{le=\"0.1\"}",
			"vllm:e2e_request_latency_seconds_bucket{le=\"-Inf\"} 0\nvllm:e2e_request_latency_seconds_bucket{le=\"0.1\"}", 1)
	}
	src := &Source{URL: "sim://x", Preset: PresetVLLME2E}
	tr := newSLOTracker(Spec{Name: "x", Source: src, Objective: &Objective{Quantile: 0.9, Target: 80 * time.Millisecond}, Window: time.Hour})
	t0 := time.Unix(0, 0)
	for i, tc := range []struct {
		body string
		fail bool
	}{
		{vllmText("5"), false}, {negInf("10"), true}, {negInf("15"), true}, {vllmText("20"), false}, {vllmText("25"), false},
	} {
		now := t0.Add(time.Duration(i+1) * 15 * time.Second)
		for _, format := range []expfmt.Format{expfmt.NewFormat(expfmt.TypeTextPlain), protoFormat} {
			body := []byte(tc.body)
			if format == protoFormat {
				body = protoBody(t, body)
			}
			fams, err := parseExposition(body, format, families(src))
			if err != nil {
				t.Fatal(err)
			}
			h, err := extract(src, fams)
			if tc.fail {
				if err == nil || !strings.Contains(err.Error(), "vllm:e2e_request_latency_seconds: bad bucket le=-Inf") {
					t.Fatalf("scrape %d (%s): err %v, want the -Inf bucket refused", i, format, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("scrape %d (%s): %v", i, format, err)
			}
			if format == protoFormat {
				continue // one observation per scrape
			}
			if err := tr.observe(now, h); err != nil {
				t.Fatal(err)
			}
		}
		if tc.fail {
			tr.fail(now, errors.New("refused"))
		}
	}
	st := tr.Status()
	if st.RequestsTotal != 20 || !near(st.GoodRequestsTotal, 16) || st.Attainment == nil || !near(*st.Attainment, 0.8) {
		t.Errorf("requests %v, good %v, attainment %v; want 20, 16, 0.8", st.RequestsTotal, st.GoodRequestsTotal, ptrString(st.Attainment))
	}
	for q, v := range st.Quantiles {
		if v != v {
			t.Errorf("p%v is NaN", q*100)
		}
	}
}

func ptrString(v *float64) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprint(*v)
}
