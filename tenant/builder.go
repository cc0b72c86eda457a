package tenant

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// BuilderOptions configure a Builder.
type BuilderOptions struct {
	// Clock is the model time; nil means gpu.RealClock{}.
	Clock gpu.Clock
	// Logger receives errors and state changes; nil discards.
	Logger log.Logger
	// Latency follows the tenants' latency sources (a latency.Pool); nil:
	// latency sources are not read and Snapshot.SLOs stays empty.
	Latency LatencyTracker
	// Pods maps devices to Kubernetes pods (a kube.Mapper); nil turns the
	// Kubernetes mapping off (Snapshot.Kubelet is then nil; a pod UID in a
	// process's cgroup still names its pod).
	Pods PodMapper
	// Proc reads process facts (cgroup, comm, user) the readings lack (a
	// kube.ProcReader); nil: those facts are unknown.
	Proc ProcFacts
	// AllowEmpty makes Reload accept a tenants file with no tenants; by
	// default one is refused (see NotEmpty).
	AllowEmpty bool
	// Check, when set, is a rule a reloaded file must meet besides its
	// own, as the file loaded at start met it (the simulator's: the SLOs
	// its scenario judges, the sim:// sources it serves); its error
	// refuses the reload.
	Check func(*Config) error
	// PodTenancy gives the pods that no tenant of the tenants file matches
	// a tenant of their own (their namespace, or a label's value); the zero
	// value leaves them Unassigned. It needs Pods.
	PodTenancy PodTenancy
	// Prices are the cost series' prices the flags give, used while the
	// tenants file has no metering section; nil: none. Checked by the
	// caller (Prices.Problems).
	Prices *Prices
	// PodInfo turns on Snapshot.PodInfo, with Pods.
	PodInfo PodInfoOptions
	// SourcesWhereRunning makes a tenant's latency source read only while
	// the tenant has usage on this host (hostedSources.update): one
	// tenants file given to the exporters of many hosts then has each
	// source read and served by the host its tenant runs on alone. False:
	// every source is read (one host, vgpusim's).
	SourcesWhereRunning bool
	// DepartedRetention is how long the meters and context-switch count
	// of a tenant without usage on a GPU are kept (at most
	// MaxDepartedPerGPU such tenants a GPU); 0 keeps them for good. A
	// tenant back after they were forgotten starts them again at 0. The
	// time a GPU is not read does not count; for a tenant of pods, the
	// time counts up to Pods' last good mapping alone (the LastSuccess of
	// its Status, on Clock, and of its metadata where labels decide the
	// tenant: departures.expire).
	DepartedRetention time.Duration
}

// Builder attributes readings to tenants and reports, in each Snapshot, the
// latest state of the background work (latency sources, the kubelet
// mapping) that its LatencyTracker and PodMapper run.
type Builder struct {
	logger  log.Logger
	clock   gpu.Clock
	proc    ProcFacts
	latency LatencyTracker // nil: none
	pods    PodMapper      // nil: none
	// allowEmpty: a reload may install a file with no tenants.
	allowEmpty bool
	check      func(*Config) error // BuilderOptions.Check; nil: none
	podTenancy PodTenancy
	prices     *Prices // the flags' (BuilderOptions.Prices)
	// whereRunning: BuilderOptions.SourcesWhereRunning
	whereRunning bool

	// cfg is stored with buildMu held (installLocked); Build reads it
	// under buildMu, the other readers (Config) at any time.
	cfg atomic.Pointer[compiledConfig]
	// beforeInstall, when set (by tests), runs in installLocked before it
	// takes buildMu: where a sample may take buildMu first.
	beforeInstall func()

	mu        sync.Mutex // guards cfgStatus and serializes installs
	cfgStatus ConfigStatus
	reloadMu  sync.Mutex // serializes reloads

	buildMu sync.Mutex
	attr    attrState
	meters  meterState     // guarded by buildMu
	sched   []RunlistCount // guarded by buildMu
	// departed forgets the meters of tenants that left (guarded by buildMu)
	departed departures
	// hosted: the tenants whose sources are read, with whereRunning
	// (guarded by buildMu)
	hosted hostedSources

	podInfoOpts  PodInfoOptions
	podInfoState podInfoState // guarded by buildMu
	// unmappedLogged: the resources whose unmapped devices were logged
	// (guarded by buildMu)
	unmappedLogged map[string]bool
	// oversizedLogged: a pod mapping's oversized names were logged
	// (guarded by buildMu)
	oversizedLogged bool
}

// compiledConfig is a Config with what Build derives from it.
type compiledConfig struct {
	*Config
	info       []Info
	class      map[string]gpu.TenantClass
	minShare   map[string]float64 // share.min of the tenants that set one above 0
	needCgroup bool               // some selector (or the pod tenancy) needs the cgroup path or the pod
	// kubeSelected: the tenants with a kubernetes selector
	kubeSelected map[string]bool
	// sourceWindow: the SLO window of the tenants with a latency source
	sourceWindow map[string]time.Duration
	// labelSelected: the tenants with a kubernetes selector naming labels
	labelSelected map[string]bool
	pods          PodTenancy
	needExe       bool
	needUID       bool
	// prices are the file's metering section, else the flags' (nil: none).
	prices *Prices
}

func compile(cfg *Config, pods PodTenancy) *compiledConfig {
	c := &compiledConfig{Config: cfg, class: map[string]gpu.TenantClass{}, minShare: map[string]float64{}, kubeSelected: map[string]bool{}, labelSelected: map[string]bool{}, sourceWindow: map[string]time.Duration{}, pods: pods, needCgroup: pods.On()}
	for _, t := range cfg.Tenants {
		info := Info{Name: t.Name, Class: t.Class, Priority: t.Priority, ShareMax: 1, RestartCost: t.RestartCost}
		if t.Share != nil {
			info.ShareMin, info.ShareMax = t.Share.Min, t.Share.Max
		}
		c.class[t.Name] = t.Class
		if t.Share != nil && t.Share.Min > 0 {
			c.minShare[t.Name] = t.Share.Min
		}
		if t.LatencySource != nil {
			info.SLOWindow = sloWindow(&t, cfg.Defaults)
			c.sourceWindow[t.Name] = info.SLOWindow
		}
		c.info = append(c.info, info)
		for _, s := range t.Selectors {
			if s.Cgroup != "" || s.Kubernetes != nil {
				c.needCgroup = true
			}
			if s.Kubernetes != nil {
				c.kubeSelected[t.Name] = true
				if len(s.Kubernetes.Labels) > 0 {
					c.labelSelected[t.Name] = true
				}
			}
			if s.Executable != "" {
				c.needExe = true
			}
			if s.UID != nil {
				c.needUID = true
			}
		}
	}
	return c
}

// NewBuilder returns a Builder for cfg (nil: no tenants file, everything
// goes to Unassigned). It does no I/O; Start begins the background work.
func NewBuilder(cfg *Config, opts BuilderOptions) (*Builder, error) {
	if cfg == nil {
		cfg = EmptyConfig()
	}
	if opts.Clock == nil {
		opts.Clock = gpu.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = log.NewNopLogger()
	}
	if opts.Proc == nil {
		opts.Proc = noProcFacts{}
	}
	b := &Builder{
		logger:  opts.Logger,
		clock:   opts.Clock,
		proc:    opts.Proc,
		latency: opts.Latency,
		pods:    opts.Pods,
		attr:    newAttrState(),
		meters:  newMeterState(),

		departed:     newDepartures(opts.DepartedRetention),
		hosted:       newHostedSources(),
		whereRunning: opts.SourcesWhereRunning,
		allowEmpty:   opts.AllowEmpty,
		check:        opts.Check,
		podTenancy:   opts.PodTenancy,
		prices:       opts.Prices,

		podInfoOpts: opts.PodInfo,
	}
	b.cfgStatus = ConfigStatus{File: cfg.File, LastReloadSuccessful: true, LastReloadSuccessTime: b.clock.Now()}
	b.mu.Lock()
	b.installLocked(cfg)
	b.mu.Unlock()
	return b, nil
}

// Config returns the configuration in use.
func (b *Builder) Config() *Config { return b.cfg.Load().Config }

// installLocked makes cfg current; the latency tracker keeps the sources
// whose configuration and objective did not change. With whereRunning,
// those of cfg's tenants this host reads (hostedSources) are set, under
// buildMu as Build sets them: the tenants it read before that cfg keeps
// with a source; which have left is for the next sample to say.
func (b *Builder) installLocked(cfg *Config) {
	c := compile(cfg, b.podTenancy)
	c.prices = cmp.Or(cfg.Metering, b.prices)
	if b.latency != nil && !b.whereRunning {
		b.latency.Set(latencySpecs(cfg), cfg.Defaults.ScrapeInterval)
	}
	if b.beforeInstall != nil {
		b.beforeInstall()
	}
	// The configuration is stored under buildMu, with the attribution
	// state reset for it: a sample that took buildMu between the two
	// attributed by the new file with the state of the old one (a tenant
	// the file removed served, carried forward, for one sample). Lock
	// order: mu (held here), then buildMu; Build never holds both.
	b.buildMu.Lock()
	b.cfg.Store(c)
	b.attr.reconfigured(c)
	if b.latency != nil && b.whereRunning {
		read, _ := b.hosted.update(c, nil, nil, nil)
		b.latency.Set(sourceSpecs(read, cfg.Defaults), cfg.Defaults.ScrapeInterval)
	}
	b.buildMu.Unlock()
}

// Reload reads the tenants file at path ("" = the current file) and, if it
// is valid, makes it current. On error the last good configuration stays in
// use; the failure is counted and reported in Snapshot.Config, and the error,
// its problems as "file:line: problem" lines, is for the caller to log (the
// pipeline logs it once, in the reload's outcome): Reload logs only a success.
func (b *Builder) Reload(path string) error { return b.reload(path, false) }

// ReloadQuietly is Reload logging nothing, its success included: for a
// reload whose lines are held back (pipeline.ReloadAsked).
func (b *Builder) ReloadQuietly(path string) error { return b.reload(path, true) }

func (b *Builder) reload(path string, quiet bool) error {
	if path == "" {
		path = b.Config().File
	}
	// The file is read and checked before mu is taken, which Build takes
	// too: a sample does not wait for a reload's parse.
	b.reloadMu.Lock()
	defer b.reloadMu.Unlock()
	var cfg *Config
	var err error
	unchanged := false
	if path != "" {
		// The bytes of the file in use, under its name, are that file:
		// installed again, it would only start the attribution's logging
		// over (its conflicts logged and counted again at every reload).
		var data []byte
		data, err = fileread.Regular(path, MaxConfigBytes)
		switch {
		case err != nil:
		case b.Config().sameFile(path, data):
			unchanged = true
		default:
			cfg, err = ParseConfig(path, data)
		}
		if err == nil && cfg != nil && !b.allowEmpty {
			err = NotEmpty(cfg)
		}
		if err == nil && cfg != nil && b.check != nil {
			err = b.check(cfg)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cfgStatus.ReloadsTotal++
	if path == "" {
		b.cfgStatus.ReloadFailuresTotal++
		b.cfgStatus.LastReloadSuccessful = false
		return fmt.Errorf("no tenants file to reload")
	}
	if err != nil {
		b.cfgStatus.ReloadFailuresTotal++
		b.cfgStatus.LastReloadSuccessful = false
		return err
	}
	if !unchanged {
		b.installLocked(cfg)
	}
	b.cfgStatus.File = path
	b.cfgStatus.LastReloadSuccessful = true
	b.cfgStatus.LastReloadSuccessTime = b.clock.Now()
	switch {
	case quiet:
	case unchanged:
		level.Info(b.logger).Log("msg", "tenants file unchanged; the configuration in use is kept as it is", "file", path)
	default:
		level.Info(b.logger).Log("msg", "tenants file reloaded", "file", path, "tenants", len(cfg.Tenants), "prices", b.cfg.Load().prices)
	}
	return nil
}

// runners are the background work the Builder reports on.
func (b *Builder) runners() []Runner {
	var out []Runner
	if b.latency != nil {
		out = append(out, b.latency)
	}
	if b.pods != nil {
		out = append(out, b.pods)
	}
	return out
}

// Start begins the background work: each latency source is scraped every
// defaults.scrape_interval and the kubelet mapping refreshed, on the
// runners' own goroutines, until ctx ends. Start returns at once. Build
// never waits on this work; it uses the latest results.
func (b *Builder) Start(ctx context.Context) {
	for _, r := range b.runners() {
		r.Start(ctx)
	}
}

// Wait blocks until every goroutine Start (and Reload while running)
// started has returned, which they do once Start's context ends.
func (b *Builder) Wait() {
	for _, r := range b.runners() {
		r.Wait()
	}
}

// Refresh runs one round of the background work now, in the caller's
// goroutine: every latency source is scraped once and the kubelet mapping
// refreshed. Offline runs in virtual time call it instead of Start.
func (b *Builder) Refresh(ctx context.Context) {
	for _, r := range b.runners() {
		r.Refresh(ctx)
	}
}

// Build attributes one sample to tenants and returns its Snapshot. It does
// no network I/O: it uses the latest latency and kubelet results. It asks
// the ProcFacts for the cgroup, name or user of processes when the
// selectors need them and the readings do not carry them. r may be nil (no
// sample yet).
func (b *Builder) Build(r *gpu.Readings, st gpu.SamplerStats) *Snapshot {
	snap := &Snapshot{Readings: r, Sampler: st}
	if r != nil {
		snap.Time = r.Time
	} else {
		snap.Time = b.clock.Now()
	}

	var podMap *kube.Mapping
	if b.pods != nil {
		podMap = b.pods.Mapping()
		ks := b.pods.Status()
		snap.Kubelet = &ks
	}
	b.buildMu.Lock()
	// The configuration is read under buildMu, which a reload takes to
	// reset the attribution state once the new one is in place: a sample
	// attributed by the one it replaced would put back the state of the
	// tenants it removed (their context switches kept until the next one).
	compiled := b.cfg.Load()
	snap.Tenants = append([]Info(nil), compiled.info...)
	b.logUnmapped(podMap)
	snap.Usage = b.usage(compiled, r, podMap)
	b.forgetDeparted(compiled, r, snap.Usage, snap.Kubelet)
	if b.latency != nil && b.whereRunning {
		if read, changed := b.hosted.update(compiled, r, snap.Usage, knownAsOf(compiled, r, snap.Kubelet)); changed {
			b.latency.Set(sourceSpecs(read, compiled.Defaults), compiled.Defaults.ScrapeInterval)
		}
	}
	snap.KeptContextSwitches = b.keptContextSwitches(compiled, r, snap.Usage)
	snap.Tenants = append(snap.Tenants, podTenants(compiled, snap.Usage)...)
	if b.podInfoOpts.On && b.pods != nil {
		snap.PodInfo = b.podInfo(compiled, r, podMap, snap.Usage)
	}
	snap.Meters, snap.GPUMeters = b.meters.meter(compiled.Defaults.IdleEnergy, compiled.prices, r, snap.Usage)
	snap.Attribution = b.attr.status()
	snap.Attribution.ShareMinSums, snap.Attribution.OvercommittedShares = b.shareSums(compiled, snap.Usage)
	b.attr.events = AddEvents(b.attr.events, r)
	snap.Events = b.attr.events
	b.sched = AddSchedulerLog(b.sched, r)
	snap.VGPURunlists = b.sched
	b.buildMu.Unlock()
	logEvents(b.logger, r, snap.Usage)

	b.mu.Lock()
	snap.Config = b.cfgStatus
	b.mu.Unlock()
	if b.latency != nil {
		for _, t := range compiled.Tenants {
			if t.LatencySource == nil {
				continue
			}
			if st, ok := b.latency.Status(t.Name); ok {
				snap.SLOs = append(snap.SLOs, sloStatus(&t, st))
			}
		}
	}
	return snap
}

// logUnmapped logs, once per resource, the devices of NVIDIA's resources
// that the pod mapping cannot tie to a GPU: their containers' processes
// cannot be placed in their pods.
func (b *Builder) logUnmapped(podMap *kube.Mapping) {
	for _, u := range podMap.Unmapped() {
		if b.unmappedLogged[u.Resource] {
			continue
		}
		if b.unmappedLogged == nil {
			b.unmappedLogged = map[string]bool{}
		}
		b.unmappedLogged[u.Resource] = true
		level.Warn(b.logger).Log("msg", "kubelet pod-resources: devices of an NVIDIA resource named neither by a GPU or MIG UUID nor by a GPU's index (MIG devices under the device plugin's deviceIDStrategy=index) are not mapped to their pods; set deviceIDStrategy=uuid",
			"resource", u.Resource, "device_ids", strings.Join(u.IDs, ","))
	}
	if n, first := podMap.Oversized(); n > 0 && !b.oversizedLogged {
		b.oversizedLogged = true
		level.Warn(b.logger).Log("msg", "kubelet pod-resources: containers or device IDs named longer than Kubernetes allows left out of the pod mapping (logged once)",
			"left_out", n, "first", first)
	}
}

// logEvents logs each XID of r: the counters keep only well-known codes
// apart, so the log is where an unusual code and the driver's message stay.
// An XID the backend tied to a process names the process's tenant where the
// sample attributed it on that GPU: the counters have no tenant, and an
// application's XID (13, 31, 43) is its owner's to look at.
func logEvents(logger log.Logger, r *gpu.Readings, usage []Usage) {
	if r == nil {
		return
	}
	for i := range r.Devices {
		d := &r.Devices[i]
		for _, ev := range d.Events {
			if ev.Kind != gpu.EventXID {
				continue
			}
			kv := []any{"msg", "XID event", "gpu", d.Index, "uuid", d.UUID, "xid", ev.Code, "pid", ev.PID}
			if name, ok := pidTenant(usage, d, ev.PID); ok {
				kv = append(kv, "tenant", name)
			}
			level.Warn(logger).Log(append(kv, "message", ev.Message)...)
		}
	}
}

// pidTenant is the tenant usage attributes the host process pid to on
// the GPU d (any of its MIG instances): a VM's host process (its QEMU) by
// the usage's VMPIDs, or a process on the host itself. A process inside a
// VM (VGPUInstance != 0) has the guest's PID, not the host's that an XID
// names, so it never matches. False for PID 0 (none named), a PID not
// among the sample's, or one that tenants both hold (a guest's PID equal
// to a host process's).
func pidTenant(usage []Usage, d *gpu.Device, pid uint32) (string, bool) {
	if pid == 0 {
		return "", false
	}
	for i := range usage {
		if u := &usage[i]; u.UUID == d.UUID && slices.Contains(u.VMPIDs, pid) {
			return u.Tenant, true
		}
	}
	if !slices.ContainsFunc(d.Processes, func(p gpu.Process) bool { return p.PID == pid && p.VGPUInstance == 0 }) {
		return "", false
	}
	name := ""
	for i := range usage {
		u := &usage[i]
		if u.UUID != d.UUID || !slices.Contains(u.PIDs, pid) {
			continue
		}
		if name != "" && u.Tenant != name {
			return "", false
		}
		name = u.Tenant
	}
	return name, name != ""
}
