package main

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/vgpu-exporter/vgpu_exporter/collector"
	"github.com/vgpu-exporter/vgpu_exporter/exposition"
	"github.com/vgpu-exporter/vgpu_exporter/httplimit"
	"github.com/vgpu-exporter/vgpu_exporter/pipeline"
	"github.com/vgpu-exporter/vgpu_exporter/procmetrics"
	"github.com/vgpu-exporter/vgpu_exporter/webui"
)

// handlerOptions is what the HTTP handler needs from the rest of the
// exporter; tests fill it with fakes.
type handlerOptions struct {
	TelemetryPath string
	// Self holds the exporter's own metrics (build info, Go, process)
	// and the web configuration's; with --web.disable-exporter-metrics
	// the web configuration's alone, nil without one.
	Self *exposition.Self
	// NoRequestMetrics leaves promhttp_* out of Self
	// (--web.disable-exporter-metrics).
	NoRequestMetrics bool
	// NewCollector returns the GPU/tenant collector restricted to the
	// given collector names (all enabled ones when none are given). A
	// bad name is the caller's fault (HTTP 400).
	NewCollector func(filters ...string) (prometheus.Collector, error)
	// MaxRequests bounds the metrics requests rendering at once (a
	// response is written outside its slot); 0 means no limit. Tuner
	// page requests have a limit apart: tunerPageLimit.
	MaxRequests int64
	Logger      log.Logger
	// Ready reports whether a first snapshot has been published.
	Ready func() bool
	// Reload rereads the web configuration and the tenants file and logs
	// the outcome, bounded (pipeline.ReloadAsked: a client may ask for
	// reloads as fast as it can send requests);
	// pipeline.ErrNothingToReload when there is neither.
	Reload func() error
	// Version returns a comparable value that changes whenever the
	// collector's output may change (the snapshot it renders); the
	// encoded collector metrics are then reused until it changes. Nil
	// renders on every request.
	Version func() any
	// Subscribe, when set, registers a function to call after each
	// snapshot is published (it encodes the new snapshot; until it is
	// encoded, scrapes are served the previous one).
	Subscribe func(func())
	// TunerPage, when set, is served at /tuner and linked from the
	// landing page.
	TunerPage http.Handler
	// TunerPageInfo is what the tuner page's answer beyond its limit
	// says: how often it reloads itself (its Refresh).
	TunerPageInfo webui.TunerPageInfo
	// About says what the landing page shows: backend, tuner mode,
	// tenants.
	About func() webui.About
}

// tunerPageLimit is how many tuner page requests of each format, HTML
// and JSON, are served at once:
// webui.TunerPageMaxInFlight, or --web.max-requests where lower (and not
// 0, no limit, which leaves the page its own).
func tunerPageLimit(maxRequests int64) int64 {
	if maxRequests > 0 {
		return min(maxRequests, webui.TunerPageMaxInFlight)
	}
	return webui.TunerPageMaxInFlight
}

// newHandler returns the exporter's HTTP handler: the landing page,
// metrics, /-/healthy, /-/ready, /-/reload and the tuner page.
func newHandler(o handlerOptions) (http.Handler, error) {
	if o.Logger == nil {
		o.Logger = log.NewNopLogger()
	}
	if o.NewCollector == nil {
		return nil, errors.New("no collector")
	}
	c, err := o.NewCollector()
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("registering the collector: %w", err)
	}
	// The text format, the one curl and Prometheus (short of native
	// histograms) get, is rendered straight from the collectors.
	opts := exposition.Options{Collectors: reg, Text: collector.NewText(c).Render, Version: o.Version,
		Logger: log.With(o.Logger, "component", "web")}
	if o.Self != nil {
		opts.Self, opts.SelfText = o.Self, collector.NewText(o.Self.Collector()).Render
	}
	def := exposition.New(opts)
	if o.Subscribe != nil {
		o.Subscribe(def.Publish)
	}
	links := []web.LandingLinks{
		{Address: o.TelemetryPath, Text: "Metrics"},
		{Address: "/-/healthy", Text: "Health", Description: "200 while the process runs"},
		{Address: "/-/ready", Text: "Readiness", Description: "200 once the first snapshot is published"},
	}
	if o.TunerPage != nil {
		links = append(links, web.LandingLinks{Address: webui.TunerPagePath, Text: "Tuner", Description: "tenants, SLO state, the tuner's settings and latest decisions"})
	}
	landing, err := webui.NewLanding(webui.LandingOptions{Links: links, About: o.About, Logger: o.Logger})
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	mux.Handle("/", landing)
	if o.TunerPage != nil {
		// The page renders the whole state on each request: a limit of
		// its own, so that its viewers never take a scraper's slot, and
		// a small one, so that its renders' memory stays bounded; the
		// HTML's and the JSON's apart, so that clients that do not read
		// the JSON (written as it is encoded, within its slot) do not
		// keep a browser off the HTML (written outside it).
		// A request beyond it gets a page that reloads itself as the
		// page does, not before the Retry-After (webui.NewTunerPageBusy).
		limit := tunerPageLimit(o.MaxRequests)
		busy := webui.NewTunerPageBusy(o.TunerPageInfo, limit)
		const setBy = "the page's own limit, --web.max-requests where lower"
		mux.Handle(webui.TunerPagePath, webui.TunerPageByFormat(
			httplimit.InFlightOf(limit, "tuner page", setBy, busy, o.Logger, o.TunerPage),
			httplimit.InFlightOf(limit, "tuner page JSON", setBy, busy, o.Logger, o.TunerPage)))
	}
	// One limit for every metrics request, filtered ones included (a
	// per-handler limit would not bound requests that each build their
	// own handler). Filtered requests get the same own metrics as the
	// cache (opts.Self: nil without any, not a nil *Self).
	metrics := httplimit.InFlight(o.MaxRequests, "metrics", o.Logger, def.Metrics(o.NewCollector, opts.Self, o.Logger))
	// Instrumented outside the limit, so that rejected requests are counted
	// in promhttp_metric_handler_requests_total{code="503"}.
	if o.Self != nil && !o.NoRequestMetrics {
		metrics = promhttp.InstrumentMetricHandler(o.Self, metrics)
	}
	mux.Handle(o.TelemetryPath, metrics)
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		fmt.Fprintln(w, "Healthy.")
	})
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if o.Ready != nil && o.Ready() {
			w.WriteHeader(http.StatusOK)
			fmt.Fprintln(w, "Ready.")
			return
		}
		http.Error(w, "Not ready: no GPU sample has been published yet.", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/-/reload", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "Only POST requests allowed.", http.StatusMethodNotAllowed)
			return
		}
		if o.Reload == nil {
			http.Error(w, "Reload is not available.", http.StatusInternalServerError)
			return
		}
		err := o.Reload() // logged as a SIGHUP's, bounded
		if errors.Is(err, pipeline.ErrNothingToReload) {
			fmt.Fprintf(w, "Nothing reloaded: %v.\n", err)
			return
		}
		if err != nil {
			http.Error(w, "Reload failed, the files named keep their previous configuration unless their error says otherwise (any other was reloaded): "+err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "Reloaded.")
	})
	return mux, nil
}

// selfRegistry returns the exporter's own metrics:
// vgpu_exporter_build_info, Go runtime and process metrics. Besides the
// Go collector's defaults, go_sched_latencies_seconds: how long the
// exporter's goroutines waited for a processor, which is what a scrape
// meets on a machine short of CPU.
func selfRegistry() *exposition.Self {
	return exposition.NewSelf(
		versioncollector.NewCollector("vgpu_exporter"),
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/sched/latencies:seconds$`)})),
		procmetrics.New(),
	)
}

// tunerPageInfoOf is the page's info for a configuration: --backend=auto
// serves NVML or nothing, and the page reloads at the tuner's interval, or
// the sample interval with the tuner off.
func tunerPageInfoOf(cfg *config) webui.TunerPageInfo {
	i := webui.TunerPageInfo{Backend: backendNVML, Refresh: cfg.SampleInterval}
	if cfg.Backend == backendSim {
		i.Backend = backendSim
	}
	if cfg.Tuner.active() {
		i.Refresh = cfg.Tuner.Interval
	}
	return i
}
