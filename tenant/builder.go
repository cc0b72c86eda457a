package tenant

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// BuilderOptions configure a Builder.
type BuilderOptions struct {
	// ProcRoot is where process facts (cgroup, comm, status) are read;
	// default "/proc".
	ProcRoot string
	// Clock is the model time; nil means gpu.RealClock{}.
	Clock gpu.Clock
	// Logger receives errors and state changes; nil discards.
	Logger log.Logger
	// AppMetrics serves latency sources with sim://<app> URLs (the
	// simulator); nil otherwise.
	AppMetrics gpu.AppMetricsSource
	// PodResourcesSocket is the kubelet pod-resources socket
	// (usually /var/lib/kubelet/pod-resources/kubelet.sock); "" turns the
	// Kubernetes mapping off.
	PodResourcesSocket string
	// PodMetadata is an optional source of pod metadata (UIDs, labels,
	// container IDs): a file path or an http(s) URL serving a PodList in
	// JSON, such as the kubelet's /pods endpoint. Needed for `labels`
	// selectors and to tell apart pods that share one GPU.
	PodMetadata string
	// KubeletRefresh is how often the mapping is refreshed; default 10s.
	KubeletRefresh time.Duration
	// KubeletTimeout bounds one refresh; default 5s.
	KubeletTimeout time.Duration
	// HTTPClient is used for latency sources and pod metadata; nil means a
	// default client.
	HTTPClient *http.Client
}

// Builder attributes readings to tenants and keeps the background state
// (latency sources, the kubelet mapping) that each Snapshot reports.
type Builder struct {
	opts    BuilderOptions
	logger  log.Logger
	clock   gpu.Clock
	proc    procReader
	scraper *scraper

	cfg atomic.Pointer[compiledConfig]

	mu         sync.Mutex // guards everything below
	cfgStatus  ConfigStatus
	trackers   map[string]*sloTracker // by tenant name
	trackerKey map[string]string
	cancels    map[string]context.CancelFunc
	runCtx     context.Context
	kube       *kubeClient
	kubeStatus *KubeletStatus
	kubeMap    atomic.Pointer[kubeMapping]
	// loops counts the goroutines Start and Reload started.
	loops sync.WaitGroup

	buildMu sync.Mutex
	attr    attrState
}

// compiledConfig is a Config with what Build derives from it.
type compiledConfig struct {
	*Config
	info       []Info
	class      map[string]gpu.TenantClass
	minShare   map[string]float64 // share.min of the tenants that set one above 0
	needCgroup bool               // some selector needs the cgroup path or the pod
	needExe    bool
	needUID    bool
}

func compile(cfg *Config) *compiledConfig {
	c := &compiledConfig{Config: cfg, class: map[string]gpu.TenantClass{}, minShare: map[string]float64{}}
	for _, t := range cfg.Tenants {
		c.info = append(c.info, Info{Name: t.Name, Class: t.Class, Priority: t.Priority})
		c.class[t.Name] = t.Class
		if t.Share != nil && t.Share.Min > 0 {
			c.minShare[t.Name] = t.Share.Min
		}
		for _, s := range t.Selectors {
			if s.Cgroup != "" || s.Kubernetes != nil {
				c.needCgroup = true
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
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	if opts.Clock == nil {
		opts.Clock = gpu.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = log.NewNopLogger()
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.KubeletRefresh <= 0 {
		opts.KubeletRefresh = 10 * time.Second
	}
	if opts.KubeletTimeout <= 0 {
		opts.KubeletTimeout = 5 * time.Second
	}
	b := &Builder{
		opts:       opts,
		logger:     opts.Logger,
		clock:      opts.Clock,
		proc:       procReader{root: opts.ProcRoot},
		scraper:    &scraper{httpc: opts.HTTPClient, app: opts.AppMetrics},
		trackers:   map[string]*sloTracker{},
		trackerKey: map[string]string{},
		cancels:    map[string]context.CancelFunc{},
		attr:       newAttrState(),
	}
	if opts.PodMetadata != "" && opts.PodResourcesSocket == "" {
		return nil, fmt.Errorf("pod metadata %s is read only with a kubelet pod-resources socket; set both or neither", opts.PodMetadata)
	}
	if opts.PodResourcesSocket != "" {
		k, err := newKubeClient(opts.PodResourcesSocket, opts.PodMetadata, opts.HTTPClient, opts.KubeletTimeout)
		if err != nil {
			return nil, err
		}
		b.kube = k
		b.kubeStatus = &KubeletStatus{}
	}
	b.cfgStatus = ConfigStatus{File: cfg.File, LastReloadSuccessful: true, LastReloadSuccessTime: b.clock.Now()}
	b.mu.Lock()
	b.installLocked(cfg)
	b.mu.Unlock()
	return b, nil
}

// Config returns the configuration in use.
func (b *Builder) Config() *Config { return b.cfg.Load().Config }

// trackerID identifies a tenant's latency tracking; it changes when the
// source or the objective changes (the counters then restart).
func trackerID(t *Tenant, d Defaults) string {
	id := t.LatencySource.key() + fmt.Sprintf("|w=%s", d.SLOWindow)
	if t.SLO != nil {
		id += fmt.Sprintf("|q=%v|t=%s|w=%s", t.SLO.Quantile, t.SLO.Target, t.SLO.Window)
	}
	return id
}

// installLocked makes cfg current, keeping the latency trackers whose
// source and objective did not change.
func (b *Builder) installLocked(cfg *Config) {
	c := compile(cfg)
	keep := map[string]bool{}
	for i := range cfg.Tenants {
		t := &cfg.Tenants[i]
		if t.LatencySource == nil {
			continue
		}
		id := trackerID(t, cfg.Defaults)
		keep[t.Name] = true
		if _, ok := b.trackers[t.Name]; ok && b.trackerKey[t.Name] == id {
			continue
		}
		if cancel, ok := b.cancels[t.Name]; ok {
			cancel()
			delete(b.cancels, t.Name)
		}
		tr := newSLOTracker(t, cfg.Defaults)
		b.trackers[t.Name] = tr
		b.trackerKey[t.Name] = id
		b.startTrackerLocked(t.Name, tr)
	}
	for name := range b.trackers {
		if !keep[name] {
			if cancel, ok := b.cancels[name]; ok {
				cancel()
				delete(b.cancels, name)
			}
			delete(b.trackers, name)
			delete(b.trackerKey, name)
		}
	}
	b.cfg.Store(c)
	b.buildMu.Lock()
	b.attr.reconfigured(c)
	b.buildMu.Unlock()
}

// Reload reads the tenants file at path ("" = the current file) and, if it
// is valid, makes it current. On error the last good configuration stays in
// use; the failure is counted, logged as "file:line: problem" lines, and
// reported in Snapshot.Config.
func (b *Builder) Reload(path string) error {
	if path == "" {
		path = b.Config().File
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cfgStatus.ReloadsTotal++
	if path == "" {
		b.cfgStatus.ReloadFailuresTotal++
		b.cfgStatus.LastReloadSuccessful = false
		err := fmt.Errorf("no tenants file to reload")
		level.Error(b.logger).Log("msg", "tenants file reload failed", "err", err)
		return err
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		b.cfgStatus.ReloadFailuresTotal++
		b.cfgStatus.LastReloadSuccessful = false
		for _, line := range strings.Split(err.Error(), "\n") {
			level.Error(b.logger).Log("msg", "tenants file reload failed; keeping the last good configuration", "err", line)
		}
		return err
	}
	b.installLocked(cfg)
	b.cfgStatus.File = path
	b.cfgStatus.LastReloadSuccessful = true
	b.cfgStatus.LastReloadSuccessTime = b.clock.Now()
	level.Info(b.logger).Log("msg", "tenants file reloaded", "file", path, "tenants", len(cfg.Tenants))
	return nil
}

// Start begins the background work: each latency source is scraped every
// defaults.scrape_interval and the kubelet mapping refreshed every
// KubeletRefresh, on the Builder's clock, until ctx ends. Start returns at
// once. Build never waits on this work; it uses the latest results.
func (b *Builder) Start(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.runCtx != nil {
		return
	}
	b.runCtx = ctx
	for name, tr := range b.trackers {
		b.startTrackerLocked(name, tr)
	}
	if b.kube != nil {
		b.loops.Add(1)
		go func() {
			defer b.loops.Done()
			b.kubeLoop(ctx)
		}()
	}
}

// Wait blocks until every goroutine Start (and Reload while running)
// started has returned, which they do once Start's context ends.
func (b *Builder) Wait() { b.loops.Wait() }

func (b *Builder) startTrackerLocked(name string, tr *sloTracker) {
	if b.runCtx == nil {
		return
	}
	ctx, cancel := context.WithCancel(b.runCtx)
	b.cancels[name] = cancel
	b.loops.Add(1)
	go func() {
		defer b.loops.Done()
		b.trackerLoop(ctx, tr)
	}()
}

// scrape reads tr's source once and logs when it fails after working (or
// at its first failure) and when it recovers.
func (b *Builder) scrape(ctx context.Context, tr *sloTracker, now time.Time) {
	tr.mu.Lock()
	wasUp := tr.up || tr.errsTotal == 0
	tr.mu.Unlock()
	err := b.scraper.scrapeOnce(ctx, tr, now)
	if ctx.Err() != nil {
		return
	}
	if err != nil && wasUp {
		level.Warn(b.logger).Log("msg", "latency source failed", "tenant", tr.tenant, "err", err)
	} else if err == nil && !wasUp {
		level.Info(b.logger).Log("msg", "latency source recovered", "tenant", tr.tenant)
	}
}

func (b *Builder) trackerLoop(ctx context.Context, tr *sloTracker) {
	for {
		b.scrape(ctx, tr, b.clock.Now())
		if ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-b.clock.After(b.cfg.Load().Defaults.ScrapeInterval):
		}
	}
}

func (b *Builder) kubeLoop(ctx context.Context) {
	defer b.kube.close()
	for {
		b.refreshKubelet(ctx)
		select {
		case <-ctx.Done():
			return
		case <-b.clock.After(b.opts.KubeletRefresh):
		}
	}
}

// Refresh runs one round of the background work now, in the caller's
// goroutine: every latency source is scraped once and the kubelet mapping
// refreshed. Offline runs in virtual time call it instead of Start.
func (b *Builder) Refresh(ctx context.Context) {
	b.mu.Lock()
	trs := make([]*sloTracker, 0, len(b.trackers))
	for _, tr := range b.trackers {
		trs = append(trs, tr)
	}
	b.mu.Unlock()
	now := b.clock.Now()
	for _, tr := range trs {
		b.scrape(ctx, tr, now)
	}
	if b.kube != nil {
		b.refreshKubelet(ctx)
	}
}

// refreshKubelet fetches the pod-resources mapping; on failure the last
// good mapping stays in use.
func (b *Builder) refreshKubelet(ctx context.Context) {
	m, err := b.kube.fetch(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.kubeStatus
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		st.ErrorsTotal++
		if st.Up || st.ErrorsTotal == 1 {
			level.Warn(b.logger).Log("msg", "kubelet pod-resources refresh failed; keeping the last good mapping", "err", err)
		}
		st.Up = false
		return
	}
	if !st.Up && st.ErrorsTotal > 0 {
		level.Info(b.logger).Log("msg", "kubelet pod-resources refresh recovered", "pods", m.pods)
	}
	b.kubeMap.Store(m)
	st.Up = true
	st.LastSuccess = b.clock.Now()
	st.PodsMapped = m.pods
}

// Build attributes one sample to tenants and returns its Snapshot. It does
// no network I/O: it uses the latest latency and kubelet results. It reads
// /proc/PID files for processes whose cgroup, name or user the selectors
// need and the readings do not carry. r may be nil (no sample yet).
func (b *Builder) Build(r *gpu.Readings, st gpu.SamplerStats) *Snapshot {
	cc := b.cfg.Load()
	snap := &Snapshot{Readings: r, Sampler: st, Tenants: append([]Info(nil), cc.info...)}
	if r != nil {
		snap.Time = r.Time
	} else {
		snap.Time = b.clock.Now()
	}

	b.buildMu.Lock()
	snap.Usage = b.usage(cc, r, b.kubeMap.Load())
	snap.Attribution = b.attr.status()
	snap.Attribution.ShareMinSums, snap.Attribution.OvercommittedShares = b.shareSums(cc, snap.Usage)
	b.attr.events = AddEvents(b.attr.events, r)
	snap.Events = b.attr.events
	b.buildMu.Unlock()

	b.mu.Lock()
	snap.Config = b.cfgStatus
	if b.kubeStatus != nil {
		ks := *b.kubeStatus
		snap.Kubelet = &ks
	}
	trs := make([]*sloTracker, 0, len(b.trackers))
	for _, t := range cc.Tenants {
		if tr, ok := b.trackers[t.Name]; ok {
			trs = append(trs, tr)
		}
	}
	b.mu.Unlock()
	for _, tr := range trs {
		snap.SLOs = append(snap.SLOs, tr.Status())
	}
	sort.SliceStable(snap.SLOs, func(i, j int) bool {
		return indexOf(cc.info, snap.SLOs[i].Tenant) < indexOf(cc.info, snap.SLOs[j].Tenant)
	})
	return snap
}

func indexOf(info []Info, name string) int {
	for i, in := range info {
		if in.Name == name {
			return i
		}
	}
	return len(info)
}
