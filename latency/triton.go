package latency

import (
	"fmt"
	"math"

	dto "github.com/prometheus/client_model/go"
)

// Triton's cumulative request duration (microseconds) and request count:
// they give a mean, no quantiles.
const (
	tritonDurationMetric = "nv_inference_request_duration_us"
	tritonCountMetric    = "nv_inference_count"
)

// extractTriton sums Triton's request duration and count counters.
func extractTriton(fams map[string]*dto.MetricFamily, matchers map[string]string) (histo, error) {
	sumOf := func(name string) (float64, error) {
		mf, ok := fams[name]
		if !ok {
			return 0, fmt.Errorf("no %s in the exposition", name)
		}
		total, n := 0.0, 0
		for _, m := range mf.GetMetric() {
			if !labelsMatch(m, matchers) {
				continue
			}
			var v float64
			switch {
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetUntyped() != nil:
				v = m.GetUntyped().GetValue()
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			default:
				return 0, fmt.Errorf("%s is a %s, not a counter", name, mf.GetType())
			}
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return 0, fmt.Errorf("%s%s: bad value %v", name, labelString(m), v)
			}
			total += v
			n++
		}
		if n == 0 {
			return 0, fmt.Errorf("%s has no series matching %v", name, matchers)
		}
		return total, nil
	}
	dur, err := sumOf(tritonDurationMetric)
	if err != nil {
		return histo{}, err
	}
	cnt, err := sumOf(tritonCountMetric)
	if err != nil {
		return histo{}, err
	}
	return histo{count: cnt, sum: dur / 1e6, mean: true}, nil
}
