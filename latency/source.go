// Package latency reads request latency from serving frameworks' /metrics
// (vLLM, SGLang, TGI, Triton, or any classic histogram), keeps each source's
// sliding SLO window, and scrapes the sources on their own goroutines.
// It knows nothing of tenants: its callers name each source and convert
// their configuration into Specs.
package latency

import (
	"strings"
	"time"
)

// Source presets.
const (
	PresetVLLME2E    = "vllm-e2e"
	PresetVLLMTTFT   = "vllm-ttft"
	PresetVLLMITL    = "vllm-itl"
	PresetSGLangE2E  = "sglang-e2e"
	PresetSGLangTTFT = "sglang-ttft"
	PresetSGLangITL  = "sglang-itl"
	PresetTriton     = "triton"
	PresetTGI        = "tgi"
)

// Presets are the preset names, in the order docs and errors list them.
var Presets = []string{PresetVLLME2E, PresetVLLMTTFT, PresetVLLMITL,
	PresetSGLangE2E, PresetSGLangTTFT, PresetSGLangITL, PresetTriton, PresetTGI}

// Histogram names of the presets.
var presetMetrics = map[string][]string{
	PresetVLLME2E:  {"vllm:e2e_request_latency_seconds"},
	PresetVLLMTTFT: {"vllm:time_to_first_token_seconds"},
	// newer vLLM names it inter_token_latency, older time_per_output_token
	PresetVLLMITL: {"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"},
	// SGLang's tokenizer-side histograms (python/sglang/srt/metrics/collector.py);
	// older SGLang names the inter-token one time_per_output_token
	PresetSGLangE2E:  {"sglang:e2e_request_latency_seconds"},
	PresetSGLangTTFT: {"sglang:time_to_first_token_seconds"},
	PresetSGLangITL:  {"sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"},
	PresetTGI:        {"tgi_request_duration"},
}

// ReportedQuantiles are the quantiles every Status carries (plus the
// objective's own quantile).
var ReportedQuantiles = []float64{0.5, 0.9, 0.99}

// Source is where request latency is read.
type Source struct {
	URL      string // http(s)://... or sim://<app>
	Preset   string // one of the Preset* names, or ""
	Metric   string // histogram name when no preset (overrides the preset's)
	Matchers map[string]string
	Timeout  time.Duration
	MaxBytes int64
	// FollowRedirects is one of the Redirects* policies; "" is
	// RedirectsSameHost.
	FollowRedirects string
}

// Objective is a latency objective: Quantile of requests complete within
// Target.
type Objective struct {
	Quantile float64
	Target   time.Duration
}

// Spec is one source to track.
type Spec struct {
	// Name identifies the source in the Pool and names it in logs (as
	// tenant=NAME: the tenant whose requests it measures).
	Name string
	// Key identifies the configuration: a Pool.Set that keeps a name with
	// the same Key keeps its counters and window; another Key restarts them.
	Key       string
	Source    *Source
	Objective *Objective // nil: quantiles only
	Window    time.Duration
}

// Status is a source's request latency against its objective over the
// sliding window.
type Status struct {
	// Quantile and TargetSeconds are the objective: Quantile of requests
	// complete within TargetSeconds.
	Quantile      float64
	TargetSeconds float64
	Window        time.Duration
	// Quantiles maps 0.5, 0.9, 0.99 to window latency in seconds; a quantile
	// is missing when the window holds no request.
	Quantiles map[float64]float64
	// RequestsTotal and GoodRequestsTotal are counters (monotonic from the
	// tracker's start) of requests seen and of requests at or under the
	// target.
	RequestsTotal     float64
	GoodRequestsTotal float64
	// Epoch names the tracker that counts them: a Pool numbers the
	// trackers it starts 1, 2, ... (a Pool.Set that restarts a name's
	// counters gives it the next number). Counters of one name differ by
	// requests only between statuses of the same Epoch; across two, they
	// belong to different trackers, however they compare.
	Epoch uint64
	// Attainment is good/total over the window; nil with no requests.
	Attainment *float64
	// SourceUp says the last read of the source succeeded.
	SourceUp bool
	// SourceRead says the source has been read at least once, the read
	// succeeding or failing. Before the first read (the tracking just
	// began: a Pool.Set added the source or restarted its counters)
	// SourceUp is false, and the source is not down but not read yet.
	SourceRead bool
	// Measured says a change of the source's counters has been counted.
	// The first successful read of a tracker is only its baseline: until
	// the next, the window and counters hold nothing, which is not a
	// window without requests (a busy tenant is not idle).
	Measured          bool
	ScrapeErrorsTotal uint64
	// GoodKnown is false when good requests cannot be counted: no
	// objective, or a source without latency buckets (Triton without its
	// histograms). Then GoodRequestsTotal is 0 and Attainment nil.
	GoodKnown bool
	// MeanSeconds is the mean latency over the window, of the requests
	// whose latency the source gives (Triton: the successful ones); nil
	// with none.
	MeanSeconds *float64
	// WindowRequests is the number of requests in the window.
	WindowRequests float64
	// LastError is the last scrape error, "" after a success.
	LastError string
}

// SimApp returns the application of a sim://app URL, "" for another URL.
func SimApp(u string) string {
	if !strings.HasPrefix(u, "sim://") {
		return ""
	}
	return strings.Trim(strings.TrimPrefix(u, "sim://"), "/")
}
