package webui

import (
	"bytes"
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/httplimit"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// TunerPagePath is where the tuner page is served.
const TunerPagePath = "/tuner"

// TunerPageMaxInFlight is how many tuner page requests of each format,
// HTML and JSON apart (TunerPageByFormat), the exporter serves at once; a
// request beyond is answered 503 with a Retry-After (NewTunerPageBusy).
// Each builds the whole view, history included: about 70 KB of
// allocations for each series of a full history, a tenant's burn or a
// knob's value (docs/tuner-page.md), so a count of its own, not
// --web.max-requests' 40, bounds the memory they take. An HTML request
// holds its slot while it renders, and while it is written only past
// maxOutsideBytes; a JSON request while it is written too.
const TunerPageMaxInFlight = 2

// TunerPageWriteTimeout bounds a stall in writing a tuner page response,
// in place of the server's write timeout (a minute): the write deadline
// is this long past the handler's start, and moved as far past the
// page's clock before each piece of the response (httplimit.StallPiece). A client
// that stops reading is cut at most this long after, and the page stops
// encoding at the first write that fails; a client that reads, however
// slowly, gets the whole response (the JSON of 100 tenants with a full
// history is 2.8 MB, of 1000 tenants 28 MB) as long as each piece drains
// within it.
const TunerPageWriteTimeout = httplimit.StallTimeout

// TunerPageMaxTransfer bounds the whole writing of a tuner page response:
// a client that reads just fast enough to beat TunerPageWriteTimeout at
// each piece (about 3 KB/s) would otherwise hold its connection (and, for
// the JSON, one of the TunerPageMaxInFlight slots) for hours (the JSON of
// 1000 tenants, 28 MB). Five minutes is the 1000-tenant JSON at about
// 100 KB/s, the HTML at 20 KB/s.
const TunerPageMaxTransfer = 5 * time.Minute

// tunerPageDecisions is how many of the latest decisions the page lists.
const tunerPageDecisions = 50

//go:embed tunerpage.html
var tunerPageHTML string

var tunerPageTemplate = template.Must(template.New("tuner").Funcs(template.FuncMap{"ts": timeText}).Parse(tunerPageHTML))

// timeText renders a time on the page ("never" for the zero time).
func timeText(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// TunerPageInfo is what the page says of the exporter itself.
type TunerPageInfo struct {
	// Backend is the GPU backend: "nvml" or "sim".
	Backend string
	// Refresh is how often the page reloads itself.
	Refresh time.Duration
}

// tunerView is what the tuner page shows, as HTML or (?format=json) JSON:
// the latest tenant snapshot and tuner status, joined. JSON fields hold
// numbers with their unit in the name; the text the HTML shows is in the
// fields JSON leaves out.
type tunerView struct {
	Backend        string    `json:"backend"`
	Simulated      bool      `json:"simulated"`
	RefreshSeconds int       `json:"refresh_seconds"`
	UpdatedAt      time.Time `json:"updated_at,omitzero"` // the latest sample or round
	// TunerOn is false when --tuner.mode is off on every GPU; the page
	// then shows the tenants and their SLO state only.
	TunerOn    bool   `json:"tuner_on"`
	Policy     string `json:"policy,omitempty"`
	Mode       string `json:"mode"`
	KillSwitch bool   `json:"kill_switch"`
	// Journal is whether --tuner.journal can be written (nil without
	// one): the tuner makes no change while it cannot.
	Journal *journalView `json:"journal,omitempty"`
	// NodeLock is whether the tuner holds the node lock (nil with the
	// tuner off).
	NodeLock *nodeLockView `json:"node_lock,omitempty"`
	LastRun  time.Time     `json:"last_round,omitzero"`
	// FastWindowSeconds is the span of the burn the tuner acts on.
	FastWindowSeconds float64 `json:"tuner_window_seconds,omitempty"`
	// Changed is the number of settings the tuner changed and has not
	// restored; the exit sets back RestoreAtExit of them, leaves open
	// WaitingForListing (MPS clients the start left to the rounds, no
	// snapshot listing them yet), tries again ThawPending (pauses an
	// earlier run left whose thaw at start failed, tried again at every
	// round too) and RestoreFailed whose restore failed, and leaves KeptOpen as they are (no GPU in enforce mode),
	// their originals open in the journal for a later start in enforce
	// mode.
	Changed           int        `json:"settings_changed"`
	RestoreAtExit     int        `json:"settings_restored_at_exit"`
	WaitingForListing int        `json:"settings_waiting_for_listing"`
	ThawPending       int        `json:"settings_thaw_pending"`
	RestoreFailed     int        `json:"settings_restore_failed"`
	KeptOpen          int        `json:"settings_kept_open"`
	ExitText          []exitText `json:"-"`
	// Sampled is false before the first snapshot.
	Sampled     bool           `json:"sampled"`
	SnapshotAt  time.Time      `json:"snapshot_time,omitzero"`
	GPUs        []gpuView      `json:"gpus"`
	Tenants     []tenantView   `json:"tenants"`
	Settings    []settingView  `json:"settings"`
	Decisions   []decisionView `json:"decisions"` // newest first
	History     historyView    `json:"history"`
	DecisionCap int            `json:"-"`
	FastWindow  string         `json:"-"`
}

// journalView is whether the tuner's journal can be written: its last
// write, or the probe of each round since a failed one, succeeded; Error
// is the last failed write's.
type journalView struct {
	Writable bool   `json:"writable"`
	Error    string `json:"error,omitempty"`
}

// gpuView is one GPU: its tuner mode, the knobs that apply to its sharing
// mode, and what the latest round did on it.
type gpuView struct {
	Index   int    `json:"index"`
	UUID    string `json:"uuid"`
	Name    string `json:"name"`
	Sharing string `json:"sharing"`
	Up      bool   `json:"up"`
	Err     string `json:"error,omitempty"`
	Mode    string `json:"tuner_mode"`
	// The knobs, each only where it applies (tuner.KnobsFor).
	MPSClients      []mpsClientView `json:"mps_clients,omitempty"`
	Pauses          []pauseView     `json:"pauses,omitempty"`
	TimeSlice       string          `json:"compute_timeslice,omitempty"`
	Scheduler       string          `json:"vgpu_scheduler,omitempty"`
	MIGLayout       []string        `json:"mig_layout,omitempty"`
	ClocksLocked    *bool           `json:"clocks_locked,omitempty"`
	PowerLimitWatts *float64        `json:"power_limit_watts,omitempty"`
	Round           *roundView      `json:"latest_round,omitempty"`
	HookWaits       []hookWaitView  `json:"hook_waits,omitempty"` // a revert, a restore waiting for a hook
	// TunerKnobs are the tuner's knobs and whether the host's backends
	// can turn each on this GPU, as its latest round found them.
	TunerKnobs []tunerKnobView `json:"tuner_knobs,omitempty"`
	Knobs      []knobText      `json:"-"`
	CanTurn    knobsText       `json:"-"`
}

// tunerKnobView is one of the tuner's knobs on a GPU: whether the host's
// backends can turn it there, and why not.
type tunerKnobView struct {
	Knob      string `json:"knob"`
	Available bool   `json:"available"`
	Why       string `json:"why_not,omitempty"`
	// SwitchedOff: the operator switched the knob off, or did not opt in
	// (the tuner never changes it, available or not).
	SwitchedOff bool `json:"switched_off,omitempty"`
}

// knobsText is what the HTML shows of a GPU's tuner knobs: those its
// backends can turn, those no backend drives, and each one its backends
// leave out with why.
type knobsText struct {
	Available, NoBackend, Off string
	NotListed                 []string
}

// roundView is what the tuner's latest round did on a GPU, or why it held.
type roundView struct {
	Kind    string `json:"kind"`
	Holding bool   `json:"holding"`
	Why     string `json:"why"`
	Guard   string `json:"guard,omitempty"`
}

// why is the round's line, "" for none.
func (r *roundView) why() string {
	if r == nil {
		return ""
	}
	return r.Why
}

// tenantView is one configured tenant with its SLO state over its SLO
// window and the burn the tuner acts on over its own window.
type tenantView struct {
	Name          string   `json:"name"`
	Class         string   `json:"class"`
	Priority      int      `json:"priority"`
	ShareMinRatio float64  `json:"share_min_ratio"`
	ShareMaxRatio float64  `json:"share_max_ratio"`
	GPUs          []string `json:"gpus"`
	SLO           *sloView `json:"slo,omitempty"` // nil without a latency source
	// State is one of met, violated, no requests, unknown, no SLO: the
	// SLO window's attainment against the quantile.
	State string `json:"slo_state"`
	// Note says why the state is unknown (source not read yet, or down and its
	// last error).
	Note string `json:"note,omitempty"`
	// Tuner is the tenant's SLO over the tuner's window (nil when the
	// tuner is off or has not seen the tenant's counters yet).
	Tuner *fastView  `json:"tuner_window,omitempty"`
	Text  tenantText `json:"-"`
}

// sloView is a tenant's SLO and its figures over the SLO window.
type sloView struct {
	// Metric is what the SLO bounds: "e2e" (a request's end-to-end
	// latency), "ttft" (time to first token) or "itl" (inter-token latency).
	Metric          string   `json:"metric"`
	QuantileRatio   float64  `json:"quantile_ratio"`
	TargetSeconds   float64  `json:"target_seconds,omitempty"`
	WindowSeconds   float64  `json:"window_seconds"`
	AttainmentRatio *float64 `json:"attainment_ratio,omitempty"`
	// QuantileSeconds is Metric's latency at the SLO's own quantile
	// (QuantileRatio) over the window.
	QuantileSeconds *float64 `json:"quantile_seconds,omitempty"`
	Requests        float64  `json:"requests"`
}

// fastView is a tenant's SLO over the tuner's window.
type fastView struct {
	WindowSeconds   float64  `json:"window_seconds"`
	Requests        float64  `json:"requests"`
	AttainmentRatio *float64 `json:"attainment_ratio,omitempty"`
	BurnRate        *float64 `json:"burn_rate,omitempty"`
	// SourceDown: the latency source is down, so there is no burn now
	SourceDown bool `json:"source_down,omitempty"`
	// SourceNotRead: the latency source has not been read yet, so there
	// is no burn yet
	SourceNotRead bool `json:"source_not_read,omitempty"`
}

// tenantText is a tenant row as the HTML shows it.
type tenantText struct {
	// Latency is the latency at the SLO's quantile, named: "p95 6.2s",
	// "TTFT p95 410ms".
	Share, GPUs, SLO, Attainment, Latency, Requests string
	// Burn is "2.30x over 1m" ("" without a figure); BurnClass ok, bad or "".
	Burn, FastAttainment, BurnClass string
	Spark                           *sparkline
}

// decisionView is one decision of the tuner. From and To are the values as
// the tuner recorded them, in text.
type decisionView struct {
	Time    time.Time `json:"time"`
	GPU     string    `json:"gpu"`
	Tenant  string    `json:"tenant,omitempty"`
	Knob    string    `json:"knob"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Outcome string    `json:"outcome"`
	Guard   string    `json:"guard,omitempty"`
	Reason  string    `json:"reason"`
}

// nodeLockView is whether the tuner holds the node lock (its file), or why
// it takes none (tuner.NodeLockSkip). A tuner refused the lock does not
// run: its exporter exits at start, serving no page.
type nodeLockView struct {
	Held     bool   `json:"held"`
	Path     string `json:"path,omitempty"`
	NotTaken string `json:"not_taken,omitempty"`
}

// newTunerView joins the latest snapshot (nil before the first sample)
// and tuner status (nil when the tuner is off) into the page's view, with
// at most maxDecisions decisions.
func newTunerView(info TunerPageInfo, snap *tenant.Snapshot, st *tuner.Status, maxDecisions int) tunerView {
	v := tunerView{Backend: info.Backend, Simulated: info.Backend == "sim", RefreshSeconds: info.refreshSeconds(),
		TunerOn: st != nil, Mode: string(tuner.ModeOff), DecisionCap: maxDecisions,
		GPUs: []gpuView{}, Tenants: []tenantView{}, Settings: []settingView{}, Decisions: []decisionView{},
		History: historyView{Tenants: []seriesView{}, Knobs: []seriesView{}}}
	if st != nil {
		v.Policy, v.Mode, v.KillSwitch, v.LastRun = st.Policy, string(st.Mode), st.KillSwitch, st.LastRun
		v.Changed, v.RestoreAtExit, v.RestoreFailed, v.KeptOpen = st.Unrestored, st.Exit.AtExit, st.Exit.Failed, st.Exit.KeptOpen
		v.WaitingForListing, v.ThawPending = st.Exit.WaitingForListing, st.Exit.ThawPending
		v.ExitText = exitTexts(st.Exit)
		if j := st.Journal; j != nil {
			v.Journal = &journalView{Writable: j.WriteError == "", Error: j.WriteError}
		}
		if l := st.NodeLock; l != (tuner.NodeLockState{}) {
			v.NodeLock = &nodeLockView{Held: l.Path != "", Path: l.Path, NotTaken: string(l.NotTaken)}
		}
		v.FastWindowSeconds, v.FastWindow, v.UpdatedAt = st.FastWindow.Seconds(), durationText(st.FastWindow), st.LastRun
		if len(st.GPUs) == 0 {
			v.LastRun = time.Time{} // published by the start's restore, before any round
		}
	}
	gpuNames := map[string]string{} // UUID -> "index"
	if snap != nil {
		v.Sampled, v.SnapshotAt = true, snap.Time
		if snap.Time.After(v.UpdatedAt) {
			v.UpdatedAt = snap.Time
		}
		if snap.Readings != nil {
			for i := range snap.Readings.Devices {
				d := &snap.Readings.Devices[i]
				gpuNames[d.UUID] = strconv.Itoa(d.Index)
				v.GPUs = append(v.GPUs, newGPUView(d, snap, st))
			}
		}
		v.Tenants = tenantViews(snap, st)
	}
	if st == nil {
		return v
	}
	gpuName := func(uuid string) string {
		if n, ok := gpuNames[uuid]; ok {
			return n
		}
		return uuid
	}
	for _, s := range st.Settings {
		v.Settings = append(v.Settings, newSettingView(s, snap))
	}
	for i := len(st.Recent) - 1; i >= 0 && len(v.Decisions) < maxDecisions; i-- {
		d := st.Recent[i]
		v.Decisions = append(v.Decisions, decisionView{Time: d.Time, GPU: gpuName(d.GPU), Tenant: d.Tenant, Knob: string(d.Knob),
			From: orUnknown(d.From), To: d.To, Outcome: string(d.Outcome), Guard: d.Guard, Reason: d.Reason})
	}
	v.History = newHistoryView(st)
	markClockLocks(&v.History, snap, st)
	for i := range v.Tenants {
		if s, ok := v.History.tenant(v.Tenants[i].Name); ok {
			v.Tenants[i].Text.Spark = s.Spark
		}
	}
	return v
}

// newGPUView is a GPU with the knobs of its sharing mode and, when the
// tuner runs, what its latest round did there.
func newGPUView(d *gpu.Device, snap *tenant.Snapshot, st *tuner.Status) gpuView {
	g := gpuView{Index: d.Index, UUID: d.UUID, Name: d.Name, Sharing: string(d.Mode), Up: d.Up, Err: d.Err, Mode: string(st.ModeOf(d.UUID, d.Index))}
	if !d.Up {
		return g
	}
	for _, k := range tuner.KnobsFor(d.Mode) {
		switch k {
		case gpu.KnobMPSActiveThreads:
			g.MPSClients = mpsClients(d, snap, st)
			for _, c := range g.MPSClients {
				g.Knobs = append(g.Knobs, mpsClientText(c))
			}
		case gpu.KnobPauseDuty:
			g.Pauses = pauses(d, st)
			g.Knobs = append(g.Knobs, pauseTexts(g.Pauses, st)...)
		case gpu.KnobComputeTimeSlice:
			g.TimeSlice = string(d.ComputeTimeSlice)
			g.Knobs = append(g.Knobs, knobText{Name: "time slice", Value: orUnknown(g.TimeSlice)})
		case gpu.KnobVGPUScheduler:
			t := knobText{Name: "vGPU scheduler", Value: "unknown"}
			if d.Scheduler != nil {
				g.Scheduler, t.Value = string(d.Scheduler.Policy), string(d.Scheduler.Policy)
			}
			g.Knobs = append(g.Knobs, t)
		case gpu.KnobMIGLayout:
			for _, m := range d.MIG {
				g.MIGLayout = append(g.MIGLayout, m.Profile)
			}
			g.Knobs = append(g.Knobs, knobText{Name: "MIG layout", Value: "[" + strings.Join(g.MIGLayout, ", ") + "]"})
		case gpu.KnobLockedClocks:
			t := knobText{Name: "clocks", Value: "unknown"}
			if g.ClocksLocked = d.ClocksLocked; d.ClocksLocked != nil {
				t.Value = map[bool]string{true: "locked", false: "free"}[*d.ClocksLocked]
			}
			g.Knobs = append(g.Knobs, t)
		case gpu.KnobPowerLimit:
			t := knobText{Name: "power limit", Value: "unknown"}
			if g.PowerLimitWatts = d.PowerLimitW; d.PowerLimitW != nil {
				t.Value = tuner.Watts(*d.PowerLimitW).String()
			}
			g.Knobs = append(g.Knobs, t)
		}
	}
	if st != nil {
		if i := slices.IndexFunc(st.GPUs, func(r tuner.GPURound) bool { return r.GPU == d.UUID }); i >= 0 {
			r := st.GPUs[i]
			g.Round = &roundView{Kind: string(r.Kind), Holding: r.Holding(), Why: r.Why, Guard: r.Guard}
			g.TunerKnobs, g.CanTurn = tunerKnobs(r.Knobs, st.SwitchedOff)
		}
		g.HookWaits = hookWaitViews(st, d.UUID, g.Round.why())
	}
	return g
}

// tunerKnobs are a GPU's tuner knobs as JSON and as the HTML shows them.
func tunerKnobs(ks []tuner.KnobAvailability, off []gpu.Knob) ([]tunerKnobView, knobsText) {
	var out []tunerKnobView
	var on []tuner.KnobAvailability
	var offNames []string
	for _, k := range ks {
		isOff := slices.Contains(off, k.Knob)
		out = append(out, tunerKnobView{Knob: string(k.Knob), Available: k.Available, Why: k.Why(), SwitchedOff: isOff})
		if isOff {
			offNames = append(offNames, string(k.Knob))
		} else {
			on = append(on, k)
		}
	}
	avail, unlisted, undriven := tuner.SplitKnobs(on)
	text := knobsText{Available: tuner.JoinKnobs(avail, ", "), NoBackend: tuner.JoinKnobs(undriven, ", "), Off: strings.Join(offNames, ", ")}
	for _, k := range unlisted {
		text.NotListed = append(text.NotListed, string(k.Knob)+": "+k.Why())
	}
	return out, text
}

func ptr[T any](v T) *T { return &v }

// tenantViews lists the configured tenants with where they ran, their SLO
// state and the burn the tuner acts on.
func tenantViews(snap *tenant.Snapshot, st *tuner.Status) []tenantView {
	gpus := map[string][]string{}
	for _, u := range snap.Usage {
		g := strconv.Itoa(u.GPU)
		if u.GPUInstance != "" {
			g += "/gi" + u.GPUInstance
		}
		if !slices.Contains(gpus[u.Tenant], g) {
			gpus[u.Tenant] = append(gpus[u.Tenant], g)
		}
	}
	slos := map[string]*tenant.SLOStatus{}
	for i := range snap.SLOs {
		slos[snap.SLOs[i].Tenant] = &snap.SLOs[i]
	}
	burns := map[string]tuner.TenantBurn{}
	if st != nil {
		for _, b := range st.Burns {
			burns[b.Tenant] = b
		}
	}
	out := make([]tenantView, 0, len(snap.Tenants))
	for _, ti := range snap.Tenants {
		tv := tenantView{Name: ti.Name, Class: string(ti.Class), Priority: ti.Priority, ShareMinRatio: ti.ShareMin, ShareMaxRatio: ti.ShareMax,
			GPUs: gpus[ti.Name], State: "no SLO"}
		if tv.GPUs == nil {
			tv.GPUs = []string{}
		}
		tv.Text.Share = percentText(ti.ShareMin) + " – " + percentText(ti.ShareMax)
		tv.Text.GPUs = cmp.Or(strings.Join(tv.GPUs, ", "), "none")
		if s, ok := slos[ti.Name]; ok {
			fillSLO(&tv, s)
		}
		if b, ok := burns[ti.Name]; ok {
			fillBurn(&tv, b)
		}
		out = append(out, tv)
	}
	return out
}

// fillSLO sets a tenant's SLO columns from its latency source's status.
func fillSLO(tv *tenantView, s *tenant.SLOStatus) {
	v := &sloView{Metric: cmp.Or(s.Metric, "e2e"), QuantileRatio: s.Quantile, TargetSeconds: s.TargetSeconds, WindowSeconds: s.Window.Seconds(), Requests: s.WindowRequests}
	tv.SLO = v
	metric := strings.ToUpper(s.Metric) // "" for end-to-end latency
	if s.TargetSeconds > 0 {
		tv.Text.SLO = strings.TrimSpace(metric + " " + percentText(s.Quantile) + " within " + secondsText(s.TargetSeconds))
	}
	if p, ok := s.Quantiles[s.Quantile]; ok && s.Quantile > 0 {
		v.QuantileSeconds, tv.Text.Latency = ptr(p), quantileName(metric, s.Quantile)+" "+secondsText(p)
	}
	tv.Text.Requests = strconv.FormatFloat(s.WindowRequests, 'f', 0, 64)
	switch {
	case !s.GoodKnown:
		tv.State, tv.Note = "unknown", "the source has no latency buckets or the tenant no target"
	case s.Attainment == nil:
		tv.State = "no requests"
	default:
		v.AttainmentRatio = ptr(*s.Attainment)
		tv.Text.Attainment = attainmentText(*s.Attainment) + " over " + durationText(s.Window)
		tv.State = "met"
		if *s.Attainment < s.Quantile {
			tv.State = "violated"
		}
		if s.BelowFloor() {
			// the tuner does not judge it either (tuning.md's rules)
			tv.State = "unknown"
			tv.Note = fmt.Sprintf("requests come at %.3g/s over the SLO window, below its min_throughput of %g/s: not judged",
				s.WindowRequests/s.Window.Seconds(), s.MinThroughput)
		}
	}
	switch {
	case !s.SourceRead:
		// not down: the tuner holds all the same
		tv.State, tv.Note = "unknown", "latency source not read yet"
	case !s.SourceUp:
		// what the window still holds is from before: the tuner holds
		tv.State, tv.Note = "unknown", "latency source down"
		if s.LastError != "" {
			tv.Note += ": " + s.LastError
		}
	case !s.Measured:
		// its window is empty, not without requests: the tuner holds
		tv.State, tv.Note = "unknown", "latency source read once: no window yet"
	}
}

// fillBurn sets a tenant's columns of the tuner's window.
func fillBurn(tv *tenantView, b tuner.TenantBurn) {
	f := &fastView{WindowSeconds: b.Window.Seconds(), Requests: b.Requests, SourceDown: b.SourceDown, SourceNotRead: b.SourceNotRead}
	tv.Tuner = f
	switch {
	case b.SourceNotRead:
		tv.Text.Burn = "latency source not read yet: no burn"
		return
	case b.SourceDown:
		tv.Text.Burn = "latency source down: no burn"
		return
	}
	if !b.Known {
		tv.Text.Burn = "no requests in " + durationText(b.Window)
		return
	}
	f.AttainmentRatio, f.BurnRate = ptr(b.Attainment), ptr(b.Burn)
	tv.Text.Burn = tuner.BurnText(b.Burn) + " over " + durationText(b.Window)
	tv.Text.FastAttainment = attainmentText(b.Attainment) + " of " + strconv.FormatFloat(b.Requests, 'f', 0, 64) + " requests"
	tv.Text.BurnClass = "ok"
	if b.Burn > 1 {
		tv.Text.BurnClass = "bad"
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func percentText(f float64) string {
	return strconv.FormatFloat(math.Round(f*10000)/100, 'f', -1, 64) + "%"
}

// quantileName names quantile q of metric ("" for end-to-end latency):
// "p95", "p99.9", "TTFT p95".
func quantileName(metric string, q float64) string {
	return strings.TrimSpace(metric + " p" + strings.TrimSuffix(percentText(q), "%"))
}

func attainmentText(f float64) string {
	return strconv.FormatFloat(f*100, 'f', 2, 64) + "%"
}

func secondsText(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(10 * time.Microsecond).String()
}

// durationText renders a window: "5m", "1m", "45s".
func durationText(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// tunerPage serves the tuner page: HTML, or JSON with ?format=json.
type tunerPage struct {
	snapshot func() *tenant.Snapshot
	status   func() *tuner.Status // nil, or returning nil, when the tuner is off
	info     TunerPageInfo
	logger   log.Logger
	// now is the clock a response's write deadlines are set from
	// (TunerPageWriteTimeout), and its warnings rate-limited on: the
	// network's, the wall clock.
	now  func() time.Time
	logs *pageLogs
	// maxTransfer bounds a response's writing (TunerPageMaxTransfer).
	maxTransfer time.Duration
	// outside holds the bytes of the HTML pages written outside their
	// slot (maxOutsideBytes).
	outside *httplimit.Budget
}

// NewTunerPage returns the tuner page over the latest snapshot and tuner
// status; status may be nil (the tuner is off).
func NewTunerPage(snapshot func() *tenant.Snapshot, status func() *tuner.Status, info TunerPageInfo, logger log.Logger) http.Handler {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	return tunerPage{snapshot: snapshot, status: status, info: info, logger: logger, now: time.Now, logs: newPageLogs(logger), maxTransfer: TunerPageMaxTransfer,
		outside: httplimit.NewBudget(maxOutsideBytes)}
}

func (p tunerPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The server's write timeout (a minute) would let a client that
	// stops reading hold one of the page's few slots that long.
	if err := http.NewResponseController(w).SetWriteDeadline(p.now().Add(TunerPageWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		level.Debug(p.logger).Log("msg", "setting the tuner page's write deadline", "err", err)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "Only GET and HEAD requests allowed.", http.StatusMethodNotAllowed)
		return
	}
	f, err := pageFormat(r.URL.RawQuery)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var snap *tenant.Snapshot
	if p.snapshot != nil {
		snap = p.snapshot()
	}
	var st *tuner.Status
	if p.status != nil {
		st = p.status()
	}
	v := newTunerView(p.info, snap, st, tunerPageDecisions)
	switch f {
	case "json":
		// What cannot be encoded is found before the first write: a 500,
		// not a 200 cut short with half a document.
		head, nulls, err := jsonHead(&v)
		if err != nil {
			level.Warn(p.logger).Log("msg", "encoding the tuner page", "err", err)
			http.Error(w, "encoding the tuner page: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if len(nulls) > 0 {
			logNulls(p.logger, p.logs, p.now(), nulls)
		}
		w.Header().Set("Content-Type", "application/json")
		sw := httplimit.NewStallWriter(w, p.now, TunerPageWriteTimeout, p.maxTransfer)
		if err := writeJSON(sw, head, &v); err != nil {
			p.logs.written.Failed(p.now(), r, sw, err, "history_series", len(v.History.Tenants)+len(v.History.Knobs))
		}
	case "", "html":
		// Rendered whole first: a template error is a 500, not half a page.
		var b bytes.Buffer
		if err := tunerPageTemplate.Execute(&b, v); err != nil {
			level.Error(p.logger).Log("msg", "rendering the tuner page", "err", err)
			http.Error(w, "rendering the tuner page: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		// A browser shows a body cut short as a failed load, not as a
		// page missing its bottom rows.
		w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
		sw := httplimit.NewStallWriter(w, p.now, TunerPageWriteTimeout, p.maxTransfer)
		if err := httplimit.WriteOutside(r, sw, p.outside, b.Bytes()); err != nil {
			p.logs.written.Failed(p.now(), r, sw, err, "total_bytes", b.Len())
		}
	default:
		http.Error(w, fmt.Sprintf("unknown format %q: want html or json", f), http.StatusBadRequest)
	}
}

// pageFormat is the format a page request's query asks for: "" where it
// names none. A query that cannot be read, or that names two formats, is
// an error: a script asking for JSON is not answered with the HTML page
// as if it had asked for no format.
func pageFormat(rawQuery string) (string, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", fmt.Errorf("malformed query: %w", err)
	}
	fs := q["format"]
	for _, f := range fs[min(1, len(fs)):] {
		if f != fs[0] {
			return "", fmt.Errorf("format given twice, %q and %q: want one", fs[0], f)
		}
	}
	return q.Get("format"), nil
}
