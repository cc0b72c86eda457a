// Package collector renders the latest tenant.Snapshot as Prometheus metrics.
//
// It follows node_exporter's layout: each collector registers itself in
// init() under a name with a default state, which gives the command line
// flags --collector.<name> and --no-collector.<name> (plus
// --collector.disable-defaults) on kingpin.CommandLine. An Exporter runs the
// enabled collectors one after another on one snapshot and reports for
// each how long it took and whether it succeeded; one collector's failure
// never fails the scrape or the other collectors.
//
// Collectors only read the snapshot they are given: they never call a
// backend and do no I/O, so a scrape costs the same whatever NVML is doing.
package collector

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// namespace is the prefix of every metric name.
const namespace = "vgpu"

// Collector renders one part of a snapshot.
type Collector interface {
	// Describe sends the descriptors of every metric the collector may
	// emit.
	Describe(ch chan<- *prometheus.Desc)
	// Update sends the collector's metrics for snap, which is never nil,
	// to ch. It must not modify snap, block on anything but ch, or do I/O.
	// An error fails the collector's success metric only; metrics already
	// sent are still served.
	Update(snap *tenant.Snapshot, ch chan<- prometheus.Metric) error
}

// Factory builds a collector.
type Factory func(logger log.Logger) (Collector, error)

type registration struct {
	factory        Factory
	defaultEnabled bool
	// enabled is the flag's value: the default until the command line is
	// parsed.
	enabled *bool
	// forced is true when the command line named the collector.
	forced bool
}

var (
	regMu         sync.Mutex
	registrations = map[string]*registration{}

	disableDefaults = kingpin.Flag("collector.disable-defaults",
		"Disable every collector not explicitly enabled with --collector.<name>.").Default("false").Bool()
)

// registerCollector adds a collector and its --collector.<name> flag. It is
// called from the collectors' init functions.
func registerCollector(name string, defaultEnabled bool, f Factory) {
	r := addCollector(name, defaultEnabled, f)
	def := "disabled"
	if defaultEnabled {
		def = "enabled"
	}
	kingpin.Flag("collector."+name, fmt.Sprintf("Enable the %s collector (default: %s).", name, def)).
		Default(strconv.FormatBool(defaultEnabled)).
		Action(func(*kingpin.ParseContext) error {
			regMu.Lock()
			defer regMu.Unlock()
			r.forced = true
			return nil
		}).
		BoolVar(r.enabled)
}

// addCollector registers a collector without a flag.
func addCollector(name string, defaultEnabled bool, f Factory) *registration {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registrations[name]; dup {
		panic("collector: " + name + " registered twice") // programming error at init
	}
	enabled := defaultEnabled
	r := &registration{factory: f, defaultEnabled: defaultEnabled, enabled: &enabled}
	registrations[name] = r
	return r
}

// Collectors returns the names of all registered collectors, sorted.
func Collectors() []string {
	regMu.Lock()
	defer regMu.Unlock()
	names := make([]string, 0, len(registrations))
	for n := range registrations {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// UnknownError is NewExporter's error for a filter that names no
// registered collector.
type UnknownError struct {
	Name  string
	Known []string // the names there are, sorted
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("collector: unknown collector %q (known: %v)", e.Name, e.Known)
}

// isEnabled says whether the command line (or the default) enables r.
// Call with regMu held.
func (r *registration) isEnabled() bool {
	if *disableDefaults && !r.forced {
		return false
	}
	return *r.enabled
}

var (
	scrapeDurationDesc = prometheus.NewDesc(namespace+"_scrape_collector_duration_seconds",
		"Wall time a collector took to render the snapshot served: it is rendered once per snapshot for every scrape of it (a request with collect[] or name[] renders its own).", []string{"collector"}, nil)
	scrapeSuccessDesc = prometheus.NewDesc(namespace+"_scrape_collector_success",
		"1 if the collector rendered the snapshot served without error, 0 if it failed or no snapshot exists yet.",
		[]string{"collector"}, nil)
)

// Exporter is a prometheus.Collector that runs the enabled collectors
// one after another over the latest snapshot on each collection.
type Exporter struct {
	snap       func() *tenant.Snapshot
	logger     log.Logger
	names      []string
	collectors []Collector
	errs       *Errors
}

// Errors remembers the last error each collector logged at error level,
// so that a persistent error is logged at error level once and then at
// debug level while it repeats. Exporters sharing one (see ShareErrors)
// remember together.
type Errors struct {
	mu   sync.Mutex
	last map[string]string // collector -> last error logged at error level
}

// NewErrors returns an Errors that remembers nothing yet.
func NewErrors() *Errors { return &Errors{last: map[string]string{}} }

// ShareErrors makes e remember its collectors' errors in errs, with the
// other Exporters sharing it: the exporter's own, rendered once per
// snapshot, and those built for each collect[] scrape, which would
// otherwise each log a persistent error at error level anew. Call it
// before e collects; nil changes nothing.
func (e *Exporter) ShareErrors(errs *Errors) {
	if errs != nil {
		e.errs = errs
	}
}

// NewExporter returns an Exporter over the snapshots snap returns (nil
// before the first). Without filters it runs every collector the command
// line enables (the registered defaults when no command line was parsed);
// with filters it runs only those collectors, each of which must exist and
// be enabled, as node_exporter's collect[] parameter does. A nil logger
// discards.
func NewExporter(snap func() *tenant.Snapshot, logger log.Logger, filters ...string) (*Exporter, error) {
	if snap == nil {
		return nil, errors.New("collector: nil snapshot function")
	}
	if logger == nil {
		logger = log.NewNopLogger()
	}
	regMu.Lock()
	var names []string
	if len(filters) == 0 {
		for n, r := range registrations {
			if r.isEnabled() {
				names = append(names, n)
			}
		}
	} else {
		seen := map[string]bool{}
		for _, f := range filters {
			r, ok := registrations[f]
			if !ok {
				regMu.Unlock() // Collectors takes the lock
				return nil, &UnknownError{Name: f, Known: Collectors()}
			}
			if !r.isEnabled() {
				regMu.Unlock()
				return nil, fmt.Errorf("collector: collector %q is disabled", f)
			}
			if !seen[f] {
				seen[f] = true
				names = append(names, f)
			}
		}
	}
	factories := make([]Factory, 0, len(names))
	sort.Strings(names)
	for _, n := range names {
		factories = append(factories, registrations[n].factory)
	}
	regMu.Unlock()

	e := &Exporter{snap: snap, logger: logger, names: names, errs: NewErrors()}
	for i, f := range factories {
		c, err := f(log.With(logger, "collector", names[i]))
		if err != nil {
			return nil, fmt.Errorf("collector: %s: %w", names[i], err)
		}
		e.collectors = append(e.collectors, c)
	}
	return e, nil
}

// Names returns the collectors the Exporter runs, sorted.
func (e *Exporter) Names() []string { return append([]string(nil), e.names...) }

// Describe implements prometheus.Collector.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	ch <- scrapeDurationDesc
	ch <- scrapeSuccessDesc
	for _, c := range e.collectors {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector. Before the first snapshot it
// emits only vgpu_scrape_collector_success 0 for each collector.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	snap := e.snap()
	if snap == nil {
		level.Debug(e.logger).Log("msg", "no snapshot yet; collectors report failure")
		for _, n := range e.names {
			ch <- prometheus.MustNewConstMetric(scrapeSuccessDesc, prometheus.GaugeValue, 0, n)
		}
		return
	}
	// One after another: the exporter renders its collectors in the
	// background, once per snapshot, and a goroutine each would take every
	// processor of a small machine from the scrapes served meanwhile.
	for i, c := range e.collectors {
		e.execute(e.names[i], c, snap, ch)
	}
}

func (e *Exporter) execute(name string, c Collector, snap *tenant.Snapshot, ch chan<- prometheus.Metric) {
	start := time.Now() // wall time: how long rendering took
	err := safeUpdate(c, snap, ch)
	took := time.Since(start)
	success := 1.0
	if err != nil {
		success = 0
		e.logError(name, err)
	} else {
		e.errs.mu.Lock()
		delete(e.errs.last, name)
		e.errs.mu.Unlock()
	}
	ch <- prometheus.MustNewConstMetric(scrapeDurationDesc, prometheus.GaugeValue, took.Seconds(), name)
	ch <- prometheus.MustNewConstMetric(scrapeSuccessDesc, prometheus.GaugeValue, success, name)
}

// safeUpdate runs c.Update and turns a panic into an error, so that a bug
// triggered by an odd snapshot costs one collector, not the process.
func safeUpdate(c Collector, snap *tenant.Snapshot, ch chan<- prometheus.Metric) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return c.Update(snap, ch)
}

// panicError is a recovered panic; the stack is logged separately so that
// the message stays the same from one scrape to the next.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// logError logs a collector's error at error level the first time it
// occurs and at debug level while it repeats, so that a persistent problem
// does not flood the log on every scrape.
func (e *Exporter) logError(name string, err error) {
	msg := err.Error()
	e.errs.mu.Lock()
	repeat := e.errs.last[name] == msg
	e.errs.last[name] = msg
	e.errs.mu.Unlock()
	lvl := level.Error
	if repeat {
		lvl = level.Debug
	}
	kv := []any{"msg", "collector failed", "collector", name, "err", err}
	var pe *panicError
	if errors.As(err, &pe) {
		kv = append(kv, "stack", string(pe.stack))
	}
	lvl(e.logger).Log(kv...)
}
