package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// tunerPagePath is where the tuner page is served.
const tunerPagePath = "/tuner"

// tunerPageDecisions is how many of the latest decisions the page lists.
const tunerPageDecisions = 50

//go:embed tunerpage.html
var tunerPageHTML string

var tunerPageTemplate = template.Must(template.New("tuner").Funcs(template.FuncMap{
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
}).Parse(tunerPageHTML))

// tunerView is what the tuner page shows, as HTML or (?format=json) JSON:
// the latest tenant snapshot and tuner status, joined and rendered to
// text.
type tunerView struct {
	// TunerOn is false when --tuner.mode is off on every GPU; the page
	// then shows the tenants and their SLO state only.
	TunerOn    bool      `json:"tuner_on"`
	Policy     string    `json:"policy,omitempty"`
	Mode       string    `json:"mode"`
	KillSwitch bool      `json:"kill_switch"`
	LastRun    time.Time `json:"last_run,omitzero"`
	// Unrestored is the number of original settings changed and not yet
	// set back.
	Unrestored int `json:"unrestored_originals"`
	// Sampled is false before the first snapshot.
	Sampled     bool           `json:"sampled"`
	SnapshotAt  time.Time      `json:"snapshot_time,omitzero"`
	GPUs        []gpuView      `json:"gpus"`
	Tenants     []tenantView   `json:"tenants"`
	Settings    []settingView  `json:"settings"`
	Decisions   []decisionView `json:"decisions"` // newest first
	DecisionCap int            `json:"-"`
}

// gpuView is one GPU: its tuner mode and the current value of its
// device-wide knobs.
type gpuView struct {
	Index     int    `json:"index"`
	UUID      string `json:"uuid"`
	Name      string `json:"name"`
	Sharing   string `json:"sharing"`
	Mode      string `json:"tuner_mode"`
	TimeSlice string `json:"compute_timeslice"`
	Power     string `json:"power_limit"`
	Clocks    string `json:"clocks"`
	Scheduler string `json:"vgpu_scheduler"`
}

// tenantView is one configured tenant with its SLO state.
type tenantView struct {
	Name     string `json:"name"`
	Class    string `json:"class"`
	Priority int    `json:"priority"`
	Share    string `json:"share"`
	GPUs     string `json:"gpus"`
	// SLO is "" for a tenant without a latency source.
	SLO        string `json:"slo,omitempty"` // e.g. "99% within 50ms"
	Attainment string `json:"attainment,omitempty"`
	P99        string `json:"p99,omitempty"`
	Requests   string `json:"window_requests,omitempty"`
	// State is one of met, violated, no requests, unknown, no SLO.
	State string `json:"slo_state"`
	// Note says why the state is unknown (source down, its last error).
	Note string `json:"note,omitempty"`
}

// settingView is the latest target of one knob and the value in effect.
type settingView struct {
	GPU       string    `json:"gpu"`
	GPUIndex  int       `json:"gpu_index"`
	Tenant    string    `json:"tenant,omitempty"`
	Knob      string    `json:"knob"`
	PID       uint32    `json:"pid,omitempty"`
	Mode      string    `json:"mode"`
	Target    string    `json:"target"`
	Effective string    `json:"effective"`
	State     string    `json:"state"`
	At        time.Time `json:"decided_at"`
}

// decisionView is one decision of the tuner.
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

// newTunerView joins the latest snapshot (nil before the first sample)
// and tuner status (nil when the tuner is off) into the page's view, with
// at most maxDecisions decisions.
func newTunerView(snap *tenant.Snapshot, st *tuner.Status, maxDecisions int) tunerView {
	v := tunerView{TunerOn: st != nil, Mode: string(tuner.ModeOff), DecisionCap: maxDecisions,
		GPUs: []gpuView{}, Tenants: []tenantView{}, Settings: []settingView{}, Decisions: []decisionView{}}
	if st != nil {
		v.Policy, v.Mode, v.KillSwitch, v.LastRun, v.Unrestored = st.Policy, string(st.Mode), st.KillSwitch, st.LastRun, st.Unrestored
	}
	gpuNames := map[string]string{} // UUID -> "index"
	if snap != nil {
		v.Sampled, v.SnapshotAt = true, snap.Time
		if snap.Readings != nil {
			for i := range snap.Readings.Devices {
				d := &snap.Readings.Devices[i]
				gpuNames[d.UUID] = strconv.Itoa(d.Index)
				v.GPUs = append(v.GPUs, newGPUView(d, string(st.ModeOf(d.UUID, d.Index))))
			}
		}
		v.Tenants = tenantViews(snap)
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
		v.Settings = append(v.Settings, settingView{GPU: s.GPU, GPUIndex: s.GPUIndex, Tenant: s.Tenant, Knob: string(s.Knob),
			PID: s.PID, Mode: string(s.Mode), Target: valueString(s.Target), Effective: valueString(s.Effective),
			State: settingState(s), At: s.At})
	}
	for i := len(st.Recent) - 1; i >= 0 && len(v.Decisions) < maxDecisions; i-- {
		d := st.Recent[i]
		v.Decisions = append(v.Decisions, decisionView{Time: d.Time, GPU: gpuName(d.GPU), Tenant: d.Tenant, Knob: string(d.Knob),
			From: orUnknown(d.From), To: d.To, Outcome: string(d.Outcome), Guard: d.Guard, Reason: d.Reason})
	}
	return v
}

func newGPUView(d *gpu.Device, mode string) gpuView {
	g := gpuView{Index: d.Index, UUID: d.UUID, Name: d.Name, Sharing: string(d.Mode), Mode: mode,
		TimeSlice: orUnknown(string(d.ComputeTimeSlice)), Power: "unknown", Clocks: "unknown", Scheduler: "none"}
	if d.PowerLimitW != nil {
		g.Power = tuner.Watts(*d.PowerLimitW).String()
	}
	if d.ClocksLocked != nil {
		g.Clocks = "free"
		if *d.ClocksLocked {
			g.Clocks = "locked"
		}
	}
	if d.Scheduler != nil {
		g.Scheduler = string(d.Scheduler.Policy)
	}
	if !d.Up {
		g.Sharing = "down: " + d.Err
	}
	return g
}

// tenantViews lists the configured tenants with where they ran and their
// SLO state.
func tenantViews(snap *tenant.Snapshot) []tenantView {
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
	out := make([]tenantView, 0, len(snap.Tenants))
	for _, ti := range snap.Tenants {
		tv := tenantView{Name: ti.Name, Class: string(ti.Class), Priority: ti.Priority,
			Share: percentText(ti.ShareMin) + " – " + percentText(ti.ShareMax), GPUs: strings.Join(gpus[ti.Name], ", "), State: "no SLO"}
		if tv.GPUs == "" {
			tv.GPUs = "none"
		}
		if s, ok := slos[ti.Name]; ok {
			fillSLO(&tv, s)
		}
		out = append(out, tv)
	}
	return out
}

// fillSLO sets a tenant's SLO columns from its latency source's status.
func fillSLO(tv *tenantView, s *tenant.SLOStatus) {
	if s.TargetSeconds > 0 {
		tv.SLO = percentText(s.Quantile) + " within " + secondsText(s.TargetSeconds)
	}
	if p, ok := s.Quantiles[0.99]; ok {
		tv.P99 = secondsText(p)
	}
	tv.Requests = strconv.FormatFloat(s.WindowRequests, 'f', 0, 64) + " in " + s.Window.String()
	switch {
	case !s.GoodKnown:
		tv.State, tv.Note = "unknown", "the source has no latency buckets or the tenant no target"
	case s.Attainment == nil:
		tv.State = "no requests"
	default:
		tv.Attainment = strconv.FormatFloat(*s.Attainment*100, 'f', 2, 64) + "%"
		tv.State = "met"
		if *s.Attainment < s.Quantile {
			tv.State = "violated"
		}
	}
	if !s.SourceUp {
		tv.Note = "latency source down"
		if s.LastError != "" {
			tv.Note += ": " + s.LastError
		}
	}
}

// settingState says whether a target is in effect: "recommended" where
// the tuner only recommends, "pending" while the value read differs (a
// guard refused it so far, or an MPS cap that reaches only new contexts),
// "unknown" when nothing is read.
func settingState(s tuner.Setting) string {
	switch {
	case s.Mode != tuner.ModeEnforce:
		return "recommended"
	case s.Effective == nil:
		return "unknown"
	case s.Target != nil && s.Target.String() == s.Effective.String():
		return "in effect"
	default:
		return "pending"
	}
}

func valueString(v tuner.Value) string {
	if v == nil {
		return "unknown"
	}
	return v.String()
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

func secondsText(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(10 * time.Microsecond).String()
}

// tunerPage serves the tuner page: HTML, or JSON with ?format=json.
type tunerPage struct {
	snapshot func() *tenant.Snapshot
	status   func() *tuner.Status // nil, or returning nil, when the tuner is off
	logger   log.Logger
}

// newTunerPage returns the tuner page over the latest snapshot and tuner
// status; status may be nil (the tuner is off).
func newTunerPage(snapshot func() *tenant.Snapshot, status func() *tuner.Status, logger log.Logger) http.Handler {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	return tunerPage{snapshot: snapshot, status: status, logger: logger}
}

func (p tunerPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "Only GET and HEAD requests allowed.", http.StatusMethodNotAllowed)
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
	v := newTunerView(snap, st, tunerPageDecisions)
	switch f := r.URL.Query().Get("format"); f {
	case "json":
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			level.Debug(p.logger).Log("msg", "writing the tuner page", "err", err)
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
		_, _ = w.Write(b.Bytes())
	default:
		http.Error(w, fmt.Sprintf("unknown format %q: want html or json", f), http.StatusBadRequest)
	}
}
