package latency

import (
	"fmt"
	"math"

	dto "github.com/prometheus/client_model/go"
)

// Triton Inference Server's metrics. Requests are counted by
// nv_inference_request_success and nv_inference_request_failure, which
// every server serves; nv_inference_count counts inferences (batch items),
// not requests, so it is not used. nv_inference_request_duration_us is the
// cumulative duration of the successful requests: Triton's core adds a
// request's duration only when it succeeds (InferenceStatsAggregator::
// UpdateFailure counts the failure alone), so the mean is over the
// successes. --metrics-config counter_latencies=false drops that counter;
// summary_latencies=true adds the request summary, observed with each
// success as the counter is (none for a model with the response cache),
// and histogram_latencies=true the first-response histogram, observed
// with each request's first response, an error response too
// (InferenceResponse::Send): good requests are capped by the successes.
const (
	tritonSuccessMetric   = "nv_inference_request_success"
	tritonFailureMetric   = "nv_inference_request_failure"
	tritonDurationMetric  = "nv_inference_request_duration_us"
	tritonHistogramMetric = "nv_inference_first_response_histogram_ms"
	tritonSummaryMetric   = "nv_inference_request_summary_us"
)

// tritonCounterSum sums the matching series of a Triton counter, and adds
// each series' value to bySeries under its label set, less its reason
// (Triton restarts a model's counters when it reloads the model: deltas
// are taken model by model, and a model's failures, by reason since
// Triton 23.x, are its one counter of failures, judged with its
// successes: reset.go). A missing family is an error unless optional,
// when it counts as 0.
func tritonCounterSum(fams map[string]*dto.MetricFamily, name string, matchers map[string]string, optional bool, bySeries map[string]float64) (float64, error) {
	mf, ok := fams[name]
	if !ok {
		if optional {
			return 0, nil
		}
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
		bySeries[seriesKeyLess(m, "le", "reason")] += v
		n++
	}
	if n == 0 && !optional {
		return 0, fmt.Errorf("%s has no series matching %v", name, matchers)
	}
	return total, nil
}

// extractTriton reads a Triton exposition in any of its shapes:
//   - counters only: requests and the mean latency (of the successes);
//   - counters and the first-response histogram: also window quantiles and
//     good requests against the objective;
//   - counters and the request summary: also the server's own quantiles.
//
// Requests always come from the request counters, the mean from the
// duration counter; without it (counter_latencies=false) from the request
// summary's count and sum, and with neither there is no mean. The
// histogram, when present, wins over the summary. A server that serves
// nothing that times the requests is an error saying what to turn on.
func extractTriton(fams map[string]*dto.MetricFamily, matchers map[string]string) (histo, error) {
	count, succ, durs := map[string]float64{}, map[string]float64{}, map[string]float64{}
	ok, err := tritonCounterSum(fams, tritonSuccessMetric, matchers, false, succ)
	if err != nil {
		return histo{}, err
	}
	for k, c := range succ {
		count[k] += c
	}
	failed, err := tritonCounterSum(fams, tritonFailureMetric, matchers, true, count)
	if err != nil {
		return histo{}, err
	}
	_, hasHist := fams[tritonHistogramMetric]
	hasHist = hasHist || fams[tritonHistogramMetric+"_bucket"] != nil
	// timedBy is, by series, how many requests durs times: the
	// successes, whose duration the counter or the summary holds.
	timedBy, timed, dur := succ, ok, 0.0
	if _, has := fams[tritonDurationMetric]; has {
		if dur, err = tritonCounterSum(fams, tritonDurationMetric, matchers, false, durs); err != nil {
			return histo{}, err
		}
	} else {
		// nothing timed but what a summary serves: without one, no
		// mean (not a mean of 0 s over the successes)
		timedBy, timed = map[string]float64{}, 0
		n := 0
		if mf, has := fams[tritonSummaryMetric]; has {
			if timed, dur, n, err = summaryTimes(mf, matchers, timedBy, durs); err != nil {
				return histo{}, err
			}
		}
		if n == 0 && !hasHist {
			return histo{}, errNoTritonLatency
		}
	}
	// Requests are successes and failures; the duration is the
	// successes' alone.
	reqs, reqSum := ok+failed, dur/1e6
	// a model's counters by its labels (model, version)
	reqSeries := make(map[string]requestCounts, len(count))
	for k, c := range count {
		reqSeries[k] = requestCounts{count: c, timed: timedBy[k], sum: durs[k] / 1e6, succ: succ[k], set: true}
	}
	for k, d := range durs {
		if _, seen := count[k]; !seen {
			reqSeries[k] = requestCounts{sum: d / 1e6, set: true}
		}
	}
	if hasHist {
		h, _, err := extractHistogram(fams, []string{tritonHistogramMetric}, matchers)
		if err != nil {
			return histo{}, err
		}
		// milliseconds to seconds
		for i := range h.bounds {
			h.bounds[i] /= 1e3
		}
		h.sum /= 1e3
		for k, s := range h.series {
			// the per-series bounds are copies, not h.bounds
			for i := range s.bounds {
				s.bounds[i] /= 1e3
			}
			s.sum /= 1e3
			h.series[k] = s
		}
		h.req = requestCounts{count: reqs, timed: timed, sum: reqSum, succ: ok, set: true}
		h.reqSeries = reqSeries
		return h, nil
	}
	h := histo{count: reqs, timed: timed, sum: reqSum, mean: true, reqSeries: reqSeries}
	if mf, has := fams[tritonSummaryMetric]; has {
		q, err := summaryQuantiles(mf, matchers, 1e-6)
		if err != nil {
			return histo{}, err
		}
		h.serverQuantiles = q
	}
	return h, nil
}

// errNoTritonLatency is a Triton exposition with request counters but
// nothing that times the requests.
var errNoTritonLatency = fmt.Errorf("no %s in the exposition, nor a matching %s or %s to time the requests instead: "+
	"Triton serves the counter unless started with --metrics-config counter_latencies=false; "+
	"start it with --metrics-config counter_latencies=true (or histogram_latencies=true, "+
	"whose histogram also judges the SLO)",
	tritonDurationMetric, tritonHistogramMetric, tritonSummaryMetric)

// summaryTimes adds the count and sum (µs) of a summary's matching series
// to timed and durs under their label sets, and returns their totals and
// how many series matched. Unlike its quantiles, a summary's count and
// sum are cumulative, as counters are.
func summaryTimes(mf *dto.MetricFamily, matchers map[string]string, timed, durs map[string]float64) (count, sum float64, n int, err error) {
	if mf.GetType() != dto.MetricType_SUMMARY {
		return 0, 0, 0, fmt.Errorf("%s is a %s, not a summary", mf.GetName(), mf.GetType())
	}
	for _, m := range mf.GetMetric() {
		if !labelsMatch(m, matchers) || m.GetSummary() == nil {
			continue
		}
		c, s := float64(m.GetSummary().GetSampleCount()), m.GetSummary().GetSampleSum()
		if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
			return 0, 0, 0, fmt.Errorf("%s%s: bad sum %v", mf.GetName(), labelString(m), s)
		}
		k := seriesKey(m)
		timed[k] += c
		durs[k] += s
		count += c
		sum += s
		n++
	}
	return count, sum, n, nil
}

// summaryQuantiles reads the quantiles of a summary's matching series,
// scaled to seconds. Quantiles of different series cannot be merged: with
// several series the largest value of each quantile is taken, a bound for
// the pooled requests. A NaN quantile (a summary with no observation in
// its window) is left out.
func summaryQuantiles(mf *dto.MetricFamily, matchers map[string]string, scale float64) (map[float64]float64, error) {
	if mf.GetType() != dto.MetricType_SUMMARY {
		return nil, fmt.Errorf("%s is a %s, not a summary", mf.GetName(), mf.GetType())
	}
	out := map[float64]float64{}
	for _, m := range mf.GetMetric() {
		if !labelsMatch(m, matchers) || m.GetSummary() == nil {
			continue
		}
		for _, q := range m.GetSummary().GetQuantile() {
			v := q.GetValue()
			if math.IsNaN(v) {
				continue
			}
			if math.IsInf(v, 0) || v < 0 || !(q.GetQuantile() >= 0 && q.GetQuantile() <= 1) {
				return nil, fmt.Errorf("%s%s: bad quantile %v=%v", mf.GetName(), labelString(m), q.GetQuantile(), v)
			}
			if prev, seen := out[q.GetQuantile()]; !seen || v*scale > prev {
				out[q.GetQuantile()] = v * scale
			}
		}
	}
	return out, nil
}
