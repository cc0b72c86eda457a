// Package dcgmexp adds DCGM's profiling fields, read from a running
// dcgm-exporter's /metrics page, to the readings of another gpu.Source
// (normally NVML). It lets GPUs without NVML GPM (before Hopper) report SM
// activity, SM occupancy, DRAM activity and tensor activity, and fills the
// device fields the inner source left empty.
//
// dcgm-exporter being down never stops the readings: the inner source's
// readings are returned unchanged, the failure is logged and counted.
package dcgmexp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
	"github.com/vgpu-exporter/vgpu_exporter/internal/headercap"
	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
	"github.com/vgpu-exporter/vgpu_exporter/internal/redirect"
	"github.com/vgpu-exporter/vgpu_exporter/internal/urlmask"
)

// Defaults for Options.
const (
	DefaultTimeout  = 500 * time.Millisecond // below the default sample interval
	DefaultMaxBytes = 16 << 20
	DefaultMaxAge   = time.Minute
)

// Options configure New.
type Options struct {
	// URL of dcgm-exporter's metrics page, e.g. http://localhost:9400/metrics.
	// The request is made to it as given; errors and log lines write it
	// with its password and query values masked (urlmask.DisplayURL).
	URL string
	// Timeout bounds one scrape; 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxBytes bounds the size of the page; 0 means DefaultMaxBytes.
	MaxBytes int64
	// Logger receives scrape failures (at most one warning a minute, the
	// first at once), skipped series (at most one warning a minute) and
	// the warnings of a host GPU (each GPU's at most once a minute of
	// each kind); nil discards.
	Logger log.Logger
	// MaxAge bounds the age of a series whose line carries a timestamp:
	// one older at the sample is stale, left out of the readings (and
	// logged at most once a minute); 0 means DefaultMaxAge. Lines without
	// a timestamp (dcgm-exporter's own) are taken as current.
	MaxAge time.Duration
	// Client is the HTTP client; nil means a plain http.Client. The
	// Source reads through a copy whose answers' headers may hold at
	// most headercap.MaxBytes (package headercap).
	Client *http.Client
	// Clock paces the warnings and ages the timestamps; nil means
	// gpu.RealClock{}.
	Clock gpu.Clock
}

// Source wraps an inner gpu.Source and adds dcgm-exporter's fields.
type Source struct {
	inner    gpu.Source
	url      string // the request's
	name     string // url in errors and logs: urlmask.DisplayURL
	timeout  time.Duration
	maxBytes int64
	maxAge   time.Duration
	logger   log.Logger
	client   *http.Client

	clock gpu.Clock

	scrapeErrors atomic.Uint64
	up           atomic.Bool

	// A scrape that timed out puts the next ones off the sampling path
	// (Sample): run on a goroutine of their own, one at a time, until one
	// succeeds. bgCtx ends at Close, which waits for bg.
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup

	mu         sync.Mutex
	offPath    bool   // the last scrape on the sampling path timed out
	inFlight   bool   // a scrape off the path runs
	ready      Fields // what the last scrape off the path read, until taken
	lastErr    string
	failLog    *ratelog.Log         // warnings of a failure that differs from the last
	failLogged bool                 // the failures since the last success were logged
	mismatched map[mismatchKey]bool // device-level fields whose disagreement was logged
	// ownEnergy are the GPUs, by UUID, whose energy counter the inner
	// source has read: the page's copy of it never fills theirs.
	ownEnergy map[string]bool
	// energy are the guards of the page's energy counters, by UUID.
	energy map[string]*pageEnergy
	// sources are the activity sources pages last gave (keepSources).
	sources map[Key]sourceSeen

	// warns bounds the warnings but a failed scrape's, by kind and host
	// GPU (allowWarn): one GPU's does not hold back another's.
	warns *ratelog.Keyed
}

// warnEvery is the least time between two warnings of one kind (of one
// GPU where the warning is a GPU's).
const warnEvery = time.Minute

// warnKeys bounds the keys of the warnings kept (and the lines written in
// a warnEvery): a key is a kind and a host GPU's UUID (and GPU_I_ID), never
// a name the page alone gives, so the keys grow with the host's GPUs only;
// 32 GPUs of a few kinds each fit.
const warnKeys = 256

var _ gpu.Source = (*Source)(nil)

// New returns a Source reading url on every Sample of inner.
func New(inner gpu.Source, opts Options) (*Source, error) {
	if inner == nil {
		return nil, errors.New("dcgm-exporter source: no inner source")
	}
	// named as everywhere else: a password or query token masked
	u, err := url.Parse(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("dcgm-exporter URL %q: %s", urlmask.DisplayURL(opts.URL), urlmask.URLParseReason(opts.URL, err))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("dcgm-exporter URL %q: want http(s)://host:port/metrics", urlmask.DisplayURL(opts.URL))
	}
	if opts.Timeout < 0 || opts.MaxBytes < 0 || opts.MaxAge < 0 {
		return nil, fmt.Errorf("dcgm-exporter source: negative timeout, size limit or age")
	}
	s := &Source{inner: inner, url: u.String(), name: urlmask.DisplayURL(u.String()), timeout: opts.Timeout, maxBytes: opts.MaxBytes, maxAge: opts.MaxAge,
		logger: opts.Logger, client: opts.Client, clock: opts.Clock,
		failLog: ratelog.New(warnEvery, 1), warns: ratelog.NewKeyed(warnEvery, warnKeys),
		ownEnergy: map[string]bool{}, energy: map[string]*pageEnergy{}, sources: map[Key]sourceSeen{}}
	if s.clock == nil {
		s.clock = gpu.RealClock{}
	}
	if s.timeout == 0 {
		s.timeout = DefaultTimeout
	}
	if s.maxBytes == 0 {
		s.maxBytes = DefaultMaxBytes
	}
	if s.maxAge == 0 {
		s.maxAge = DefaultMaxAge
	}
	if s.logger == nil {
		s.logger = log.NewNopLogger()
	}
	s.client = redirect.Client(headercap.Client(s.client))
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	return s, nil
}

// Name is "nvml+dcgm-exporter" (the inner source's name joined to it).
func (s *Source) Name() string { return s.inner.Name() + "+dcgm-exporter" }

// ScrapeErrorsTotal counts failed scrapes of dcgm-exporter.
func (s *Source) ScrapeErrorsTotal() uint64 { return s.scrapeErrors.Load() }

// Up reports whether the last scrape of dcgm-exporter succeeded.
func (s *Source) Up() bool { return s.up.Load() }

// Inner returns the wrapped source, e.g. to reach its actuators.
func (s *Source) Inner() gpu.Source { return s.inner }

// Close ends a scrape running off the sampling path, waits for it and
// closes the inner source.
func (s *Source) Close() error {
	s.bgCancel()
	s.bg.Wait()
	return s.inner.Close()
}

// Sample samples the inner source and adds the DCGM fields. A failed scrape
// returns the inner readings unchanged. Once a scrape timed out (a
// dcgm-exporter that accepts connections and does not answer), the next
// ones run off the sampling path, one at a time, and samples go on with
// the inner readings without waiting for them; the first that succeeds
// gives its fields to the next sample and puts scrapes back on the path.
func (s *Source) Sample(ctx context.Context) (*gpu.Readings, error) {
	// what a scrape off the path read is taken before the inner sample:
	// dropped with it when that fails, never merged into a later one
	s.mu.Lock()
	off, f := s.offPath, s.ready
	s.ready = nil
	if f != nil {
		s.offPath, off = false, false
	}
	s.mu.Unlock()
	rd, err := s.inner.Sample(ctx)
	if err != nil || rd == nil {
		return rd, err
	}
	own := s.ownCounters(rd)
	switch {
	case f != nil: // read off the path, its success noted there
	case off:
		s.mu.Lock()
		if !s.inFlight {
			s.inFlight = true
			s.bg.Add(1)
			go s.scrapeOffPath()
		}
		// the health as the fields are: a success off the path sets both
		h := s.health()
		s.mu.Unlock()
		out := without(rd, h, s.Name())
		s.checkEnergy(rd, out)
		s.keepSources(out, nil)
		return out, nil
	default:
		if f, err = s.scrape(ctx); err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				s.mu.Lock()
				s.offPath = true
				s.mu.Unlock()
			}
			s.failed(err)
			out := without(rd, s.health(), s.Name())
			s.checkEnergy(rd, out)
			s.keepSources(out, nil)
			return out, nil
		}
		s.succeeded()
	}
	f, age := s.fresh(f, rd)
	if frozen := s.frozen(rd, f, s.clock.Now()); len(frozen) > 0 {
		if held, ok := s.allowWarn("frozen", frozen); ok {
			level.Warn(s.logger).Log("msg", "dcgm-exporter page's energy counter unmoved past the maximum age while NVML reads the GPU drawing power: a frozen page, its figures left out (logged at most once a minute per GPU)",
				"url", s.name, "gpus", len(frozen), "uuids", strings.Join(firstN(frozen, maxListed), ","), "max_age", s.maxAge, "held", held)
		}
	}
	out, odd, other := merge(rd, f, s.Name(), own)
	s.warnMismatches(odd)
	s.warnOtherInstances(other)
	s.checkEnergy(rd, out)
	s.keepSources(out, s.freshAt(f, s.clock.Now()))
	out.DCGMExporter = s.health()
	out.DCGMExporter.PageAgeSeconds = age
	out.DCGMExporter.GPUsMatched = s.matched(rd, f)
	return out, nil
}

// matched returns how many of rd's GPUs that are up the page f has a
// series for (of the whole GPU or of one of its MIG instances), and warns
// (at most once a minute per GPU missing) when it lacks some: a page of
// another host's dcgm-exporter (a Kubernetes Service routing to another
// node), or one without the fields read, is scraped without error and
// fills nothing.
func (s *Source) matched(rd *gpu.Readings, f Fields) int {
	pageUUIDs := map[string]bool{}
	for k := range f {
		pageUUIDs[k.UUID] = true
	}
	host := map[string]bool{}
	n := 0
	var missing []string
	for _, d := range rd.Devices {
		if !d.Up || host[d.UUID] {
			continue
		}
		host[d.UUID] = true
		if pageUUIDs[d.UUID] {
			n++
		} else {
			missing = append(missing, d.UUID)
		}
	}
	if len(missing) == 0 {
		return n
	}
	if held, ok := s.allowWarn("missing", missing); ok {
		seen := slices.Sorted(maps.Keys(pageUUIDs))
		level.Warn(s.logger).Log("msg", "dcgm-exporter page has no current DCGM fields for some GPUs of this host (logged at most once a minute per GPU)",
			"url", s.name, "gpus_up", len(host), "gpus_matched", n, "missing", strings.Join(firstN(missing, maxListed), ","),
			"page_gpus", len(seen), "page_uuids", strings.Join(firstN(seen, maxListed), ","), "held", held)
	}
	return n
}

// maxListed is how many UUIDs a warning lists.
const maxListed = 8

// allowWarn notes a warning of kind for each of the host's GPUs keys
// (their UUIDs, or UUID/GPU_I_ID) and says whether a line may be written:
// when the warning of one of them may (each key's at most once per
// warnEvery, apart from the others). held counts the warnings of the keys
// allowed held back since their last line.
func (s *Source) allowWarn(kind string, keys []string) (held int64, ok bool) {
	now := s.clock.Now()
	for _, k := range keys {
		if h, allowed := s.warns.NoteAt(kind+"/"+k, now); allowed {
			held, ok = held+h, true
		}
	}
	return held, ok
}

// firstN returns the first n of l, with "..." after them when l is longer.
func firstN(l []string, n int) []string {
	if len(l) <= n {
		return l
	}
	return append(l[:n:n], "...")
}

// fresh drops from f the series whose timestamp is older than the maximum
// age now (logged at most once a minute per GPU of rd, the host's, and
// once a minute for those of other GPUs) and returns the page's age: that
// of its oldest timestamp, nil when no line carried one.
func (s *Source) fresh(f Fields, rd *gpu.Readings) (Fields, *float64) {
	now := s.clock.Now()
	var oldest time.Time
	stale := 0
	var keys []string // the host's GPUs with a stale series; "" for others
	host := map[string]bool{}
	for _, d := range rd.Devices {
		host[d.UUID] = true
	}
	for k, v := range f {
		if v.Time.IsZero() {
			continue
		}
		if oldest.IsZero() || v.Time.Before(oldest) {
			oldest = v.Time
		}
		if now.Sub(v.Time) > s.maxAge {
			delete(f, k)
			stale++
			key := ""
			if host[k.UUID] {
				key = k.UUID
			}
			if !slices.Contains(keys, key) {
				keys = append(keys, key)
			}
		}
	}
	if oldest.IsZero() {
		return f, nil
	}
	age := max(now.Sub(oldest), 0)
	if stale > 0 {
		if held, ok := s.allowWarn("stale", keys); ok {
			level.Warn(s.logger).Log("msg", "dcgm-exporter series older than the maximum age left out (logged at most once a minute per GPU)",
				"url", s.name, "gpus_and_instances", stale, "oldest", oldest.UTC().Format(time.RFC3339Nano), "max_age", s.maxAge, "held", held)
		}
	}
	secs := age.Seconds()
	return f, &secs
}

// scrapeOffPath is one scrape off the sampling path: a success is kept
// for the next sample, a failure counted and logged as one on the path.
func (s *Source) scrapeOffPath() {
	defer s.bg.Done()
	f, err := s.scrape(s.bgCtx)
	if err != nil && s.bgCtx.Err() == nil {
		s.failed(err)
	}
	s.mu.Lock()
	s.inFlight = false
	if err == nil {
		s.ready = f
		s.up.Store(true) // with the fields, under mu (Sample's health)
	}
	s.mu.Unlock()
	if err == nil {
		s.logChange("")
	}
}

// failed counts and logs a failed scrape.
func (s *Source) failed(err error) {
	s.scrapeErrors.Add(1)
	s.up.Store(false)
	s.logChange(err.Error())
}

// succeeded notes a scrape that read the page.
func (s *Source) succeeded() {
	s.up.Store(true)
	s.logChange("")
}

// without returns the inner readings rd, unchanged but for the health h
// and the backend's name, which is the Source's whatever a scrape's
// outcome (vgpu_backend_info keeps one series; the health says the rest).
func without(rd *gpu.Readings, h *gpu.ScrapeHealth, backend string) *gpu.Readings {
	out := *rd
	out.DCGMExporter = h
	out.Backend = backend
	return &out
}

// health is the scrape state the readings carry, so that collectors never
// ask the Source.
func (s *Source) health() *gpu.ScrapeHealth {
	return &gpu.ScrapeHealth{Up: s.up.Load(), ScrapeErrorsTotal: s.scrapeErrors.Load()}
}

// logChange logs a failure that differs from the last one and a recovery,
// at most one failure warning a minute: a failure message that changes on
// every scrape (a port, a time in it), and a source that flaps between
// failing and answering, are logged once a minute with the count of the
// failures not logged since. A recovery is logged when the failure before it
// was.
func (s *Source) logChange(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg == s.lastErr {
		return
	}
	switch {
	case msg == "":
		if s.failLogged {
			level.Info(s.logger).Log("msg", "dcgm-exporter reachable again", "url", s.name)
		}
		s.failLogged = false
	default:
		if held, ok := s.failLog.NoteAt(s.clock.Now()); ok {
			kv := []any{"msg", "scraping dcgm-exporter failed; readings without DCGM fields", "url", s.name, "err", msg}
			if held > 0 {
				kv = append(kv, "other_failures_not_logged", held)
			}
			level.Warn(s.logger).Log(kv...)
			s.failLogged = true
		}
	}
	s.lastErr = msg
}

// scrape reads and parses the page, the whole of it under the timeout and
// the size limit: the body is parsed as it arrives.
func (s *Source) scrape(ctx context.Context) (Fields, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %s", s.name, urlmask.URLParseReason(s.url, err))
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", s.name, urlmask.Unwrap(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		// The status code only: the reason phrase is the server's text.
		return nil, fmt.Errorf("GET %s: HTTP %d %s", s.name, resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	f, warnings, err := ParseFormat(ctx, fileread.Limit(resp.Body, s.maxBytes, "page"), FormatOf(resp.Header.Get("Content-Type")))
	switch {
	case errors.Is(err, fileread.ErrTooLarge):
		return nil, fmt.Errorf("GET %s: page larger than %d bytes", s.name, s.maxBytes)
	case err != nil && ctx.Err() != nil:
		// the timeout cut the page, perhaps within a line: that is
		// the error, not the line it left unfinished
		return nil, fmt.Errorf("GET %s: reading the page: %w", s.name, context.Cause(ctx))
	case err != nil:
		return nil, fmt.Errorf("GET %s: %w", s.name, err)
	}
	if len(warnings) > 0 {
		// the page's, not a host GPU's: one key
		if held, ok := s.allowWarn("skipped", []string{""}); ok {
			level.Warn(s.logger).Log("msg", "dcgm-exporter series skipped (logged at most once a minute)", "url", s.name, "warnings", len(warnings), "first", warnings[0], "held", held)
		}
	}
	return f, nil
}

// ownCounters notes the GPUs whose energy counter rd has, and returns
// those of rd's GPUs without it whose counter the inner source has read
// before (nil if none).
func (s *Source) ownCounters(rd *gpu.Readings) map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out map[string]bool
	for _, d := range rd.Devices {
		switch {
		case d.EnergyJoules != nil:
			s.ownEnergy[d.UUID] = true
		case s.ownEnergy[d.UUID]:
			if out == nil {
				out = map[string]bool{}
			}
			out[d.UUID] = true
		}
	}
	return out
}

// merge returns a copy of rd with the DCGM fields filled in where rd has
// none: Activity (Source "dcgm") per GPU and MIG instance, and the device
// readings the inner source left nil, taken from the GPU's instance series
// where the page has none for the whole GPU (MIG mode), but the energy
// counter of the GPUs in ownEnergy. The page's copy of a counter the inner
// source reads is up to dcgm-exporter's collect interval old, behind the
// inner source's: filling a sample whose own read of it failed would turn
// the counter back, a counter reset to its readers. A MIG GPU without
// activity of its own whose instances' activity comes from DCGM gets that
// Source, with no ratios. An instance series whose GPU_I_PROFILE is not
// the profile of the host's instance at its GPU_I_ID (sameProfile) fills
// nothing of that instance: another's figures. It also returns the
// device-level fields whose copies on the instance series disagree, and
// the instance series left out. rd itself is not modified.
func merge(rd *gpu.Readings, f Fields, backend string, ownEnergy map[string]bool) (*gpu.Readings, []mismatch, []otherInstance) {
	out := *rd
	if backend != "" {
		out.Backend = backend
	}
	out.Devices = make([]gpu.Device, len(rd.Devices))
	copy(out.Devices, rd.Devices)
	gis := instances(f)
	var odd []mismatch
	var other []otherInstance
	for i := range out.Devices {
		d := &out.Devices[i]
		if !d.Up {
			continue
		}
		v, o := wholeGPU(f, d.UUID, gis[d.UUID])
		odd = append(odd, o...)
		if v != nil {
			fillActivity(&d.Activity, v)
			fill(&d.GPUUtil, v.GPUUtil)
			fill(&d.MemUtil, v.MemCopyUtil)
			fill(&d.SMClockHz, v.SMClockHz)
			fill(&d.MemClockHz, v.MemClockHz)
			fill(&d.PowerWatts, v.PowerWatts)
			fill(&d.TemperatureC, v.TemperatureC)
			if !ownEnergy[d.UUID] {
				fill(&d.EnergyJoules, v.EnergyJoules)
			}
			if d.MemoryTotalBytes == 0 && v.FBUsedBytes != nil && v.FBFreeBytes != nil {
				d.MemoryUsedBytes = uint64(*v.FBUsedBytes)
				d.MemoryTotalBytes = uint64(*v.FBUsedBytes + *v.FBFreeBytes)
			}
		}
		if len(d.MIG) == 0 {
			continue
		}
		d.MIG = append([]gpu.MIGInstance(nil), d.MIG...)
		migSource := ""
		for j := range d.MIG {
			m := &d.MIG[j]
			if m.GPUInstanceID < 0 {
				continue // unknown instance: Key{GI: -1} is the whole GPU
			}
			v := f[Key{UUID: d.UUID, GI: m.GPUInstanceID}]
			if v == nil {
				continue
			}
			if !sameProfile(m.Profile, v.Profile) {
				other = append(other, otherInstance{UUID: d.UUID, GI: m.GPUInstanceID, Page: v.Profile, Profile: m.Profile})
				continue
			}
			if fillActivity(&m.Activity, v) && migSource != ActivityDCGMGREngine {
				migSource = m.Activity.Source // the weaker figure wins
			}
			if m.MemoryTotalBytes == 0 && v.FBUsedBytes != nil && v.FBFreeBytes != nil {
				m.MemoryUsedBytes = uint64(*v.FBUsedBytes)
				m.MemoryTotalBytes = uint64(*v.FBUsedBytes + *v.FBFreeBytes)
			}
		}
		if a := &d.Activity; a.Source == "" && a.SMActive == nil && a.SMOccupancy == nil && a.DRAMActive == nil && a.TensorActive == nil {
			a.Source = migSource
		}
	}
	return &out, odd, other
}

// Activity sources the dcgm-exporter source sets.
const (
	ActivityDCGM = "dcgm"
	// ActivityDCGMGREngine: SM activity is DCGM_FI_PROF_GR_ENGINE_ACTIVE,
	// the page having no DCGM_FI_PROF_SM_ACTIVE.
	ActivityDCGMGREngine = "dcgm-gr-engine"
)

// fillActivity sets the profiling ratios when the inner source has none,
// and says whether it did. Without DCGM_FI_PROF_SM_ACTIVE, the graphics
// engine activity stands in for SM activity, and the Source says so.
func fillActivity(a *gpu.Activity, v *Values) bool {
	if a.Source != "" || a.SMActive != nil || a.SMOccupancy != nil || a.DRAMActive != nil || a.TensorActive != nil {
		return false
	}
	sm, src := v.SMActive, ActivityDCGM
	if sm == nil && v.GREngineActive != nil {
		sm, src = v.GREngineActive, ActivityDCGMGREngine
	}
	if sm == nil && v.SMOccupancy == nil && v.DRAMActive == nil && v.TensorActive == nil {
		return false
	}
	*a = gpu.Activity{SMActive: cp(sm), SMOccupancy: cp(v.SMOccupancy), DRAMActive: cp(v.DRAMActive),
		TensorActive: cp(v.TensorActive), Source: src}
	return true
}

func fill(dst **float64, v *float64) {
	if *dst == nil && v != nil {
		*dst = cp(v)
	}
}

func cp(v *float64) *float64 {
	if v == nil {
		return nil
	}
	x := *v
	return &x
}
