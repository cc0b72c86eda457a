package tenant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/yamlconf"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
)

// The Builder reads no network and no files itself: what it needs from
// outside comes through these interfaces, which the commands fill with
// latency.Pool, kube.Mapper and kube.ProcReader, and tests with fakes.

// Runner is background work the Builder's Start, Wait and Refresh drive.
type Runner interface {
	// Start begins the work on its own goroutines until ctx ends; it
	// returns at once.
	Start(ctx context.Context)
	// Wait blocks until the goroutines Start began have returned.
	Wait()
	// Refresh does one round of the work now, in the caller's goroutine.
	Refresh(ctx context.Context)
}

// LatencyTracker follows the tenants' latency sources (latency.Pool).
type LatencyTracker interface {
	Runner
	// Set makes specs the tracked sources, keeping the counters of those
	// whose name and Key did not change.
	Set(specs []latency.Spec, scrapeInterval time.Duration)
	// Status is the latest status of the named source; false when the
	// source is not tracked.
	Status(name string) (latency.Status, bool)
}

// PodMapper keeps the kubelet's mapping of devices to pods (kube.Mapper).
type PodMapper interface {
	Runner
	// Mapping is the latest good mapping; nil before the first.
	Mapping() *kube.Mapping
	// Status is the mapping's state; its LastSuccess times, on the
	// Builder's clock, bound how long a tenant of pods is known to have
	// had no usage (BuilderOptions.DepartedRetention).
	Status() kube.Status
}

// ProcFacts reads what the readings may lack about a process
// (kube.ProcReader over /proc).
type ProcFacts interface {
	// Cgroup is the cgroup path that best identifies the process
	// (kube.ParseProcCgroup), the system manager's service it runs in, ""
	// for none (kube.SystemdUnit), and whether it is in no pod's place,
	// from one read (kube.ProcCgroup). An error where the process is gone
	// (kube.ProcessGone) or the file may not be opened (fs.ErrPermission)
	// leaves its place unknown; any other gives it no pod by its devices.
	Cgroup(pid uint32) (kube.ProcCgroup, error)
	Comm(pid uint32) string // "" when unknown
	UID(pid uint32) int     // -1 when unknown
}

// noProcFacts is the ProcFacts of a Builder given none: every fact is
// unknown.
type noProcFacts struct{}

var errNoProcFacts = errors.New("no process facts reader (the readings carry no cgroup)")

func (noProcFacts) Cgroup(uint32) (kube.ProcCgroup, error) { return kube.ProcCgroup{}, errNoProcFacts }
func (noProcFacts) Comm(uint32) string                     { return "" }
func (noProcFacts) UID(uint32) int                         { return -1 }

// trackerID identifies a tenant's latency tracking; it changes when the
// source or the objective changes (the counters then restart): the window
// the tenant is judged over (sloWindow), not the default of one that sets
// its own.
func trackerID(t *Tenant, d Defaults) string {
	id := t.LatencySource.key() + fmt.Sprintf("|w=%s", sloWindow(t, d))
	if t.SLO != nil {
		id += fmt.Sprintf("|q=%v|t=%s", t.SLO.Quantile, t.SLO.Target)
	}
	return id
}

// latencySpecs are the latency sources of cfg's tenants, in the latency
// package's terms.
func latencySpecs(cfg *Config) []latency.Spec {
	var sourced []*Tenant
	for i := range cfg.Tenants {
		if cfg.Tenants[i].LatencySource != nil {
			sourced = append(sourced, &cfg.Tenants[i])
		}
	}
	return sourceSpecs(sourced, cfg.Defaults)
}

// sloWindow is the window t's SLO is judged over: its own, or the default.
func sloWindow(t *Tenant, d Defaults) time.Duration {
	if t.SLO != nil && t.SLO.Window > 0 {
		return t.SLO.Window
	}
	return d.SLOWindow
}

func latencySpec(t *Tenant, d Defaults) latency.Spec {
	l := t.LatencySource
	sp := latency.Spec{
		Name:   t.Name,
		Key:    trackerID(t, d),
		Source: &latency.Source{URL: l.URL, Preset: l.Preset, Metric: l.Metric, Matchers: l.Matchers, Timeout: l.Timeout, MaxBytes: l.MaxBytes, FollowRedirects: l.FollowRedirects},
		Window: sloWindow(t, d),
	}
	if t.SLO != nil {
		sp.Objective = &latency.Objective{Quantile: t.SLO.Quantile, Target: t.SLO.Target}
	}
	return sp
}

// CheckSimSources returns an error, a "file:line: problem" line for each,
// when a sim:// latency source of c could never give a reading from app
// (latency.CheckSim): an application the simulated scenario does not run,
// a histogram the simulator does not serve, matchers no series meets. The
// tuner would otherwise run blind to that tenant's latency without a word.
func (c *Config) CheckSimSources(app gpu.AppMetricsSource) error {
	errs := &yamlconf.Errors{File: c.File, Max: maxErrors}
	for i := range c.Tenants {
		t := &c.Tenants[i]
		if t.LatencySource == nil {
			continue
		}
		if err := latency.CheckSim(latencySpec(t, c.Defaults).Source, app); err != nil {
			errs.Addf(t.LatencySource.keys.Line("url", t.Line), "tenant %q: latency_source %v", t.Name, err)
		}
	}
	return errs.Err()
}

// sloStatus is tenant t's SLOStatus from its source's status.
func sloStatus(t *Tenant, st latency.Status) SLOStatus {
	s := SLOStatus{Tenant: t.Name, Metric: t.LatencySource.SLOMetric(), Status: st}
	if t.SLO != nil {
		s.MinThroughput = t.SLO.MinThroughput
	}
	return s
}

// SimApp returns the application tenant name's sim:// latency source
// reads and the line its url is given on; app is "" when the file defines
// no such tenant or gives it no sim:// source.
func (c *Config) SimApp(name string) (app string, line int) {
	t := c.TenantByName(name)
	if t == nil || t.LatencySource == nil {
		return "", 0
	}
	return latency.SimApp(t.LatencySource.URL), t.LatencySource.keys.Line("url", t.Line)
}
