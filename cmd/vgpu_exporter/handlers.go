package main

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
)

// handlerOptions is what the HTTP handler needs from the rest of the
// exporter; tests fill it with fakes.
type handlerOptions struct {
	TelemetryPath string
	// Self holds the exporter's own metrics (build info, Go, process);
	// nil with --web.disable-exporter-metrics.
	Self *prometheus.Registry
	// NewCollector returns the GPU/tenant collector restricted to the
	// given collector names (all enabled ones when none are given). A
	// bad name is the caller's fault (HTTP 400).
	NewCollector func(filters ...string) (prometheus.Collector, error)
	// MaxRequests bounds concurrent metrics requests; 0 means no limit.
	MaxRequests int64
	Logger      log.Logger
	// Ready reports whether a first snapshot has been published.
	Ready func() bool
	// Reload rereads the tenants file; errNothingToReload when there is
	// none.
	Reload func() error
}

// newHandler returns the exporter's HTTP handler: the landing page,
// metrics, /-/healthy, /-/ready and /-/reload.
func newHandler(o handlerOptions) (http.Handler, error) {
	if o.Logger == nil {
		o.Logger = log.NewNopLogger()
	}
	def, err := metricsHandler(o, nil)
	if err != nil {
		return nil, err
	}
	if o.Self != nil {
		def = promhttp.InstrumentMetricHandler(o.Self, def)
	}
	landing, err := web.NewLandingPage(web.LandingConfig{
		Name:        "vgpu_exporter",
		Description: "Prometheus exporter of what each tenant gets from shared GPUs (MIG, MPS, time-slicing, vGPU)",
		Version:     version.Info(),
		// No /debug/pprof handlers are served, so no links to them.
		Profiling: "false",
		Links: []web.LandingLinks{
			{Address: o.TelemetryPath, Text: "Metrics"},
			{Address: "/-/healthy", Text: "Health", Description: "200 while the process runs"},
			{Address: "/-/ready", Text: "Readiness", Description: "200 once the first snapshot is published"},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("landing page: %w", err)
	}

	mux := http.NewServeMux()
	mux.Handle("/", landing)
	// One limit for every metrics request, filtered ones included (a
	// per-handler limit would not bound requests that each build their
	// own handler).
	var inFlight chan struct{}
	if o.MaxRequests > 0 {
		inFlight = make(chan struct{}, o.MaxRequests)
	}
	mux.HandleFunc(o.TelemetryPath, func(w http.ResponseWriter, r *http.Request) {
		if inFlight != nil {
			select {
			case inFlight <- struct{}{}:
				defer func() { <-inFlight }()
			default:
				http.Error(w, fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", o.MaxRequests), http.StatusServiceUnavailable)
				return
			}
		}
		filters := r.URL.Query()["collect[]"]
		if len(filters) == 0 {
			def.ServeHTTP(w, r)
			return
		}
		h, err := metricsHandler(o, filters)
		if err != nil {
			level.Warn(o.Logger).Log("msg", "bad metrics request", "collect", fmt.Sprint(filters), "err", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
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
		err := o.Reload()
		if errors.Is(err, errNothingToReload) {
			fmt.Fprintf(w, "Nothing reloaded: %v.\n", err)
			return
		}
		if err != nil {
			level.Error(o.Logger).Log("msg", "reload failed", "source", "http", "err", err)
			http.Error(w, "Reload failed, the previous configuration stays in use: "+err.Error(), http.StatusInternalServerError)
			return
		}
		level.Info(o.Logger).Log("msg", "reloaded the tenants configuration", "source", "http")
		fmt.Fprintln(w, "Reloaded.")
	})
	return mux, nil
}

// metricsHandler returns a handler serving the collector (restricted to
// filters) together with the exporter's own metrics.
func metricsHandler(o handlerOptions, filters []string) (http.Handler, error) {
	if o.NewCollector == nil {
		return nil, errors.New("no collector")
	}
	c, err := o.NewCollector(filters...)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("registering the collector: %w", err)
	}
	gatherers := prometheus.Gatherers{reg}
	if o.Self != nil {
		gatherers = append(prometheus.Gatherers{o.Self}, reg)
	}
	return promhttp.HandlerFor(gatherers, promhttp.HandlerOpts{
		ErrorLog:      promLogger{o.Logger},
		ErrorHandling: promhttp.ContinueOnError,
	}), nil
}

// promLogger lets promhttp log through go-kit.
type promLogger struct{ logger log.Logger }

func (l promLogger) Println(v ...any) {
	level.Error(l.logger).Log("msg", fmt.Sprint(v...))
}

// selfRegistry returns a registry with the exporter's own metrics:
// vgpu_exporter_build_info, Go runtime and process metrics.
func selfRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(
		versioncollector.NewCollector("vgpu_exporter"),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return r
}
