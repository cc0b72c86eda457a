package sim

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
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
func e2eBounds(slo *SLOSpec) []float64 { return withTarget(e2eBaseBounds, slo) }

// ttftBoundsOf are the TTFT histogram's bounds: vLLM's, with the target of
// a TTFT SLO added as e2eBounds adds an end-to-end one.
func ttftBoundsOf(slo *SLOSpec) []float64 {
	if slo == nil || slo.Metric != SLOMetricTTFT {
		return ttftBounds
	}
	return withTarget(ttftBounds, slo)
}

// itlBoundsOf are the inter-token latency histogram's bounds: vLLM's, with
// the target of an ITL SLO added.
func itlBoundsOf(slo *SLOSpec) []float64 {
	if slo == nil || slo.Metric != SLOMetricITL {
		return itlBounds
	}
	return withTarget(itlBounds, slo)
}

// withTarget returns base with the SLO's target added as a bound.
func withTarget(base []float64, slo *SLOSpec) []float64 {
	b := slices.Clone(base)
	if slo != nil {
		v := slo.Target.Seconds()
		if _, found := slices.BinarySearch(b, v); !found {
			b = append(b, v)
			slices.Sort(b)
		}
	}
	return b
}

// appSnapshot is what a tenant's inference server serves at one moment.
type appSnapshot struct {
	model            string
	running, waiting int
	llm              bool
	e2e, ttft, itl   hist // copies: the counts are the tenant's own slices
	prompt, gen      uint64
}

// appSnapshot reads tenant app's server metrics, syncing the clock first.
func (s *Simulator) appSnapshot(app string) (appSnapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncClock()
	var t *tenant
	for _, x := range s.tenants {
		if x.spec.Name == app {
			t = x
		}
	}
	if t == nil {
		return appSnapshot{}, fmt.Errorf("sim: no tenant named %q in scenario %s", app, s.sc.Name)
	}
	a := appSnapshot{model: t.w.Model, llm: t.w.Type == "llm", e2e: t.e2e.clone(), waiting: t.queued()}
	if t.job.active {
		a.running = t.job.n
	}
	if a.llm {
		a.running = len(t.seqs)
		a.ttft, a.itl = t.ttft.clone(), t.itl.clone()
		a.prompt, a.gen = t.promptTokens, t.genTokens
	}
	if t.w.Type == "dnn" && t.job.active {
		a.waiting -= t.job.n
	}
	return a, nil
}

// The metric names and help texts of AppMetrics.
const (
	appRunning = "vllm:num_requests_running"
	appWaiting = "vllm:num_requests_waiting"
	appE2E     = "vllm:e2e_request_latency_seconds"
	appTTFT    = "vllm:time_to_first_token_seconds"
	appITL     = "vllm:inter_token_latency_seconds"
	appPrompt  = "vllm:prompt_tokens_total"
	appGen     = "vllm:generation_tokens_total"

	helpRunning = "Number of requests currently running on the GPU."
	helpWaiting = "Number of requests waiting to be processed."
	helpE2E     = "Histogram of end to end request latency in seconds."
	helpTTFT    = "Histogram of time to first token in seconds."
	helpITL     = "Histogram of inter-token latency in seconds."
	helpPrompt  = "Number of prefill tokens processed."
	helpGen     = "Number of generation tokens processed."
)

// AppMetrics writes what tenant app's inference server would serve on its
// /metrics, in the Prometheus text format: vLLM-style cumulative latency
// histograms (vllm:e2e_request_latency_seconds for every workload;
// vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds and
// token counters for LLM workloads) and the running and waiting request
// gauges, labelled model_name.
func (s *Simulator) AppMetrics(app string, w io.Writer) error {
	a, err := s.appSnapshot(app)
	if err != nil {
		return err
	}
	var sb strings.Builder
	writeGauge(&sb, appRunning, helpRunning, a.model, float64(a.running))
	writeGauge(&sb, appWaiting, helpWaiting, a.model, float64(a.waiting))
	writeHist(&sb, appE2E, helpE2E, a.model, &a.e2e)
	if a.llm {
		writeHist(&sb, appTTFT, helpTTFT, a.model, &a.ttft)
		writeHist(&sb, appITL, helpITL, a.model, &a.itl)
		writeCounter(&sb, appPrompt, helpPrompt, a.model, a.prompt)
		writeCounter(&sb, appGen, helpGen, a.model, a.gen)
	}
	bw := bufio.NewWriter(w)
	if _, err := bw.WriteString(sb.String()); err != nil {
		return err
	}
	return bw.Flush()
}

// AppMetricFamilies returns, by name, the metric families AppMetrics
// writes, as the text parser would read them back, for a reader in the
// same process that would otherwise write and parse the text.
func (s *Simulator) AppMetricFamilies(app string) (map[string]*dto.MetricFamily, error) {
	a, err := s.appSnapshot(app)
	if err != nil {
		return nil, err
	}
	lbl := []*dto.LabelPair{{Name: new("model_name"), Value: new(a.model)}}
	fams := map[string]*dto.MetricFamily{}
	add := func(name, help string, typ dto.MetricType, m *dto.Metric) {
		m.Label = lbl
		fams[name] = &dto.MetricFamily{Name: new(name), Help: new(help), Type: typ.Enum(), Metric: []*dto.Metric{m}}
	}
	gauge := func(v int) *dto.Metric { return &dto.Metric{Gauge: &dto.Gauge{Value: new(float64(v))}} }
	counter := func(v uint64) *dto.Metric { return &dto.Metric{Counter: &dto.Counter{Value: new(float64(v))}} }
	add(appRunning, helpRunning, dto.MetricType_GAUGE, gauge(a.running))
	add(appWaiting, helpWaiting, dto.MetricType_GAUGE, gauge(a.waiting))
	add(appE2E, helpE2E, dto.MetricType_HISTOGRAM, a.e2e.metric())
	if a.llm {
		add(appTTFT, helpTTFT, dto.MetricType_HISTOGRAM, a.ttft.metric())
		add(appITL, helpITL, dto.MetricType_HISTOGRAM, a.itl.metric())
		add(appPrompt, helpPrompt, dto.MetricType_COUNTER, counter(a.prompt))
		add(appGen, helpGen, dto.MetricType_COUNTER, counter(a.gen))
	}
	return fams, nil
}

// clone copies h (its counts are the simulator's, guarded by its lock).
func (h *hist) clone() hist {
	c := *h
	c.counts = slices.Clone(h.counts)
	return c
}

// metric is h as a histogram metric, its buckets cumulative and ending
// with +Inf as in the text format.
// The buckets and their figures are allocated together, a few slices for
// the lot (a latency source reads every tenant's histograms each scrape).
func (h *hist) metric() *dto.Metric {
	n := len(h.bounds) + 1
	bs := make([]*dto.Bucket, n)
	buckets := make([]dto.Bucket, n)
	counts := make([]uint64, n)
	bounds := make([]float64, n)
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		counts[i], bounds[i] = cum, b
	}
	counts[n-1], bounds[n-1] = h.n, math.Inf(1)
	for i := range bs {
		buckets[i].CumulativeCount, buckets[i].UpperBound = &counts[i], &bounds[i]
		bs[i] = &buckets[i]
	}
	return &dto.Metric{Histogram: &dto.Histogram{SampleCount: new(h.n), SampleSum: new(h.sum), Bucket: bs}}
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
