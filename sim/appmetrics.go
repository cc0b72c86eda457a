package sim

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// e2eBaseBounds are the end-to-end latency bucket bounds (seconds): vLLM's
// bounds for vllm:e2e_request_latency_seconds, extended below 0.3 s so that
// sub-second SLOs of classic inference can be judged.
var e2eBaseBounds = []float64{
	0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25,
	0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
	120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
}

// ttftBounds are vLLM's vllm:time_to_first_token_seconds bucket bounds.
var ttftBounds = []float64{
	0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
	2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
}

// itlBounds are vLLM's vllm:inter_token_latency_seconds bucket bounds.
var itlBounds = []float64{
	0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
	2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
}

// e2eBounds adds the tenant's SLO target as a bucket bound, as an operator
// configures a server whose SLO is judged from its histogram.
func e2eBounds(slo *SLOSpec) []float64 {
	b := slices.Clone(e2eBaseBounds)
	if slo != nil {
		v := slo.Target.Seconds()
		if _, found := slices.BinarySearch(b, v); !found {
			b = append(b, v)
			slices.Sort(b)
		}
	}
	return b
}

// AppMetrics writes what tenant app's inference server would serve on its
// /metrics, in the Prometheus text format: vLLM-style cumulative latency
// histograms (vllm:e2e_request_latency_seconds for every workload;
// vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds and
// token counters for LLM workloads) and the running and waiting request
// gauges, labelled model_name.
func (s *Simulator) AppMetrics(app string, w io.Writer) error {
	s.mu.Lock()
	s.syncClock()
	var t *tenant
	for _, x := range s.tenants {
		if x.spec.Name == app {
			t = x
		}
	}
	if t == nil {
		s.mu.Unlock()
		return fmt.Errorf("sim: no tenant named %q in scenario %s", app, s.sc.Name)
	}
	var sb strings.Builder
	model := t.w.Model
	running := 0
	if t.job.active {
		running = t.job.n
	}
	if t.w.Type == "llm" {
		running = len(t.seqs)
	}
	waiting := t.queued()
	if t.w.Type == "dnn" && t.job.active {
		waiting -= t.job.n
	}
	writeGauge(&sb, "vllm:num_requests_running", "Number of requests currently running on the GPU.", model, float64(running))
	writeGauge(&sb, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", model, float64(waiting))
	writeHist(&sb, "vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", model, &t.e2e)
	if t.w.Type == "llm" {
		writeHist(&sb, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", model, &t.ttft)
		writeHist(&sb, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", model, &t.itl)
		writeCounter(&sb, "vllm:prompt_tokens_total", "Number of prefill tokens processed.", model, t.promptTokens)
		writeCounter(&sb, "vllm:generation_tokens_total", "Number of generation tokens processed.", model, t.genTokens)
	}
	s.mu.Unlock()
	bw := bufio.NewWriter(w)
	if _, err := bw.WriteString(sb.String()); err != nil {
		return err
	}
	return bw.Flush()
}

func escLabel(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func writeGauge(sb *strings.Builder, name, help, model string, v float64) {
	fmt.Fprintf(sb, "# HELP %s %s\n# TYPE %s gauge\n%s{model_name=\"%s\"} %s\n", name, help, name, name, escLabel(model), fmtFloat(v))
}

func writeCounter(sb *strings.Builder, name, help, model string, v uint64) {
	fmt.Fprintf(sb, "# HELP %s %s\n# TYPE %s counter\n%s{model_name=\"%s\"} %d\n", name, help, name, name, escLabel(model), v)
}

func writeHist(sb *strings.Builder, name, help, model string, h *hist) {
	lbl := escLabel(model)
	fmt.Fprintf(sb, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		fmt.Fprintf(sb, "%s_bucket{model_name=\"%s\",le=\"%s\"} %d\n", name, lbl, fmtFloat(b), cum)
	}
	fmt.Fprintf(sb, "%s_bucket{model_name=\"%s\",le=\"+Inf\"} %d\n", name, lbl, h.n)
	fmt.Fprintf(sb, "%s_sum{model_name=\"%s\"} %s\n", name, lbl, fmtFloat(h.sum))
	fmt.Fprintf(sb, "%s_count{model_name=\"%s\"} %d\n", name, lbl, h.n)
}
