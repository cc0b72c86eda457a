package webui

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

const evilTenant = `<script>alert("x")</script>`

var pageTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// pageSnapshot has one GPU and three tenants: one in its SLO, one out of
// it, and one (with a hostile name) without a latency source.
func pageSnapshot() *tenant.Snapshot {
	locked, limit, mps := false, 500.0, 0.4
	met, violated := 0.995, 0.91
	return &tenant.Snapshot{
		Time: pageTime,
		Readings: &gpu.Readings{Devices: []gpu.Device{{
			Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H100 80GB HBM3", Up: true, Mode: gpu.SharingMPS,
			ClocksLocked: &locked, PowerLimitW: &limit, ComputeTimeSlice: gpu.TimeSliceDefault,
			Processes: []gpu.Process{{PID: 42, MPSActiveThreads: &mps}},
		}, {Index: 1, UUID: "GPU-bbbb", Name: "NVIDIA H100 80GB HBM3", Up: true}}},
		Tenants: []tenant.Info{
			{Name: "chat", Class: gpu.ClassLatency, Priority: 10, ShareMin: 0.3, ShareMax: 1},
			{Name: "search", Class: gpu.ClassLatency, Priority: 5, ShareMax: 1},
			{Name: evilTenant, Class: gpu.ClassBatch, ShareMax: 0.5},
		},
		Usage: []tenant.Usage{{Tenant: "chat", GPU: 0, UUID: "GPU-aaaa"}, {Tenant: evilTenant, GPU: 0, UUID: "GPU-aaaa", PIDs: []uint32{42}}},
		SLOs: []tenant.SLOStatus{
			{Tenant: "chat", Status: latency.Status{Quantile: 0.99, TargetSeconds: 0.05, Window: 5 * time.Minute, SourceUp: true, SourceRead: true, Measured: true, GoodKnown: true,
				Attainment: &met, Quantiles: map[float64]float64{0.99: 0.042}, WindowRequests: 1200}},
			{Tenant: "search", Status: latency.Status{Quantile: 0.95, TargetSeconds: 0.2, Window: 5 * time.Minute, SourceUp: true, SourceRead: true, Measured: true, GoodKnown: true,
				Attainment: &violated, Quantiles: map[float64]float64{0.95: 0.45, 0.99: 0.6}, WindowRequests: 300}},
		},
	}
}

// pageStatus is an enforcing tuner's status with GPU 1 on recommend, a
// pending MPS cap and three decisions, one of them refused by a guard;
// search burns its budget 3x over the tuner's window of 1m, chat within it.
func pageStatus() *tuner.Status {
	return &tuner.Status{
		Policy: "autotune", Mode: tuner.ModeEnforce, GPUModes: map[string]tuner.Mode{"1": tuner.ModeRecommend},
		KillSwitch: true, LastRun: pageTime, Unrestored: 2, Exit: tuner.ExitRestores{AtExit: 2}, FastWindow: time.Minute,
		Settings: []tuner.Setting{
			{GPU: "GPU-aaaa", Tenant: evilTenant, Knob: gpu.KnobMPSActiveThreads, PID: 42, Mode: tuner.ModeEnforce,
				Target: tuner.Fraction(0.25), Effective: tuner.Fraction(0.4), At: pageTime},
			{GPU: "GPU-aaaa", Knob: gpu.KnobPowerLimit, Mode: tuner.ModeEnforce, Target: tuner.Watts(500), Effective: tuner.Watts(500), At: pageTime},
			{GPU: "GPU-bbbb", GPUIndex: 1, Knob: gpu.KnobComputeTimeSlice, Mode: tuner.ModeRecommend, Target: tuner.Level(gpu.TimeSliceShort), At: pageTime},
		},
		Recent: []tuner.Decision{
			{Time: pageTime.Add(-2 * time.Minute), GPU: "GPU-aaaa", Tenant: evilTenant, Knob: gpu.KnobMPSActiveThreads,
				From: "40%", To: "25%", Outcome: tuner.OutcomeApplied, Reason: "search violates its SLO; take share from " + evilTenant},
			{Time: pageTime.Add(-time.Minute), GPU: "GPU-aaaa", Knob: gpu.KnobLockedClocks,
				To: "1980MHz", Outcome: tuner.OutcomeGuarded, Guard: "kill_switch", Reason: "latency variance breaks the SLO of chat"},
			{Time: pageTime, GPU: "GPU-bbbb", Knob: gpu.KnobComputeTimeSlice,
				From: "default", To: "short", Outcome: tuner.OutcomeRecommended, Reason: "shorter slices for latency tenants"},
		},
		Burns: []tuner.TenantBurn{
			{Tenant: "chat", Window: time.Minute, Requests: 240, Quantile: 0.99, Attainment: 0.996, Burn: 0.4, Known: true},
			{Tenant: "search", Window: time.Minute, Requests: 60, Quantile: 0.95, Attainment: 0.85, Burn: 3, Known: true},
		},
		GPUs: []tuner.GPURound{
			{GPU: "GPU-aaaa", Mode: tuner.ModeEnforce, Kind: tuner.RoundKillSwitch, Why: "the kill switch is on: the tuner changes nothing",
				Knobs: []tuner.KnobAvailability{{Knob: gpu.KnobMPSActiveThreads}, {Knob: gpu.KnobVGPUScheduler, Driven: true, Listed: []gpu.Knob{gpu.KnobLockedClocks, gpu.KnobPowerLimit}},
					{Knob: gpu.KnobLockedClocks, Driven: true, Available: true}, {Knob: gpu.KnobPowerLimit, Driven: true, Available: true}}},
			{GPU: "GPU-bbbb", GPUIndex: 1, Mode: tuner.ModeRecommend, Kind: tuner.RoundRecommend, Why: "the GPU is in recommend mode; it recommends short"},
		},
		History: []tuner.RoundPoint{
			{At: pageTime.Add(-30 * time.Second), Burn: map[string]float64{"chat": 0.2, "search": 1.5},
				Values: map[tuner.SettingKey]float64{{GPU: "GPU-aaaa", Tenant: evilTenant, Knob: gpu.KnobMPSActiveThreads, PID: 42}: 0.4}},
			{At: pageTime.Add(-15 * time.Second), Burn: map[string]float64{"search": 2}},
			{At: pageTime, Burn: map[string]float64{"chat": 0.4, "search": 3},
				Values: map[tuner.SettingKey]float64{{GPU: "GPU-aaaa", Tenant: evilTenant, Knob: gpu.KnobMPSActiveThreads, PID: 42}: 0.4,
					{GPU: "GPU-aaaa", Knob: gpu.KnobPowerLimit}: 500}},
		},
	}
}

// simInfo is the page's info on the simulator, the tuner every 15s.
var simInfo = TunerPageInfo{Backend: "sim", Refresh: 15 * time.Second}

func getPage(t *testing.T, snap *tenant.Snapshot, st *tuner.Status, target string) (int, string, string) {
	t.Helper()
	return getPageWith(t, simInfo, snap, st, target)
}

func getPageWith(t *testing.T, info TunerPageInfo, snap *tenant.Snapshot, st *tuner.Status, target string) (int, string, string) {
	t.Helper()
	p := NewTunerPage(func() *tenant.Snapshot { return snap }, func() *tuner.Status { return st }, info, nil)
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
	return rec.Code, rec.Body.String(), rec.Header().Get("Content-Type")
}

// summaryOf serves the tuner page of st as HTML and as JSON and returns
// the HTML and the JSON's top-level field key, compacted ("" where it is
// absent).
func summaryOf(t *testing.T, st *tuner.Status, key string) (html, field string) {
	t.Helper()
	_, html, _ = getPageWith(t, simInfo, nil, st, "/tuner")
	_, js, _ := getPageWith(t, simInfo, nil, st, "/tuner?format=json")
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(js), &raw); err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, raw[key])
	return html, compact.String()
}

func TestTunerPageHTML(t *testing.T) {
	for _, tc := range []struct {
		name      string
		info      TunerPageInfo
		snap      *tenant.Snapshot
		status    *tuner.Status
		want, not []string
	}{
		{
			name: "tuner on", info: simInfo, snap: pageSnapshot(), status: pageStatus(),
			want: []string{
				`<meta http-equiv="refresh" content="15">`, `<span id="updated">updated 2026-03-01 12:00:00Z</span>, reloads every 15s`,
				`id="simulated"`, `<dd id="backend">sim (simulated data)</dd>`,
				`<dd id="mode">enforce</dd>`, `on: the tuner changes nothing`,
				`<dt>Settings changed by the tuner, not restored yet</dt><dd id="changed">2<br><span id="restore-at-exit">2 restored at exit</span></dd>`,
				// GPUs: mode per GPU, the knobs of the sharing mode, the round.
				`<td>mps</td><td>enforce</td><td><ul class="knobs"><li class="knob warn">MPS cap, pid 42 (&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;): 40% (target 25%, not in effect yet)</li><li class="knob">clocks: free</li><li class="knob">power limit: 500W</li></ul></td>`,
				`<td class="round warn"><b>holding</b> because the kill switch is on: the tuner changes nothing</td>`,
				// The knobs the backends can turn on each GPU, as the round found them.
				`<td class="tuner-knobs"><span class="knobs-available">locked_clocks, power_limit</span><ul class="knobs muted small"><li class="knob-not-listed">vgpu_scheduler: not available on this GPU (its backends list locked_clocks, power_limit)</li></ul><br><span class="muted small knobs-no-backend">no backend on this host: mps_active_threads</span></td>`,
				`<td>recommend</td><td><ul class="knobs"><li class="knob">clocks: unknown</li><li class="knob">power limit: unknown</li></ul></td><td class="tuner-knobs"></td><td class="round warn"><b>holding</b> because the GPU is in recommend mode; it recommends short</td>`,
				// Tenants: the SLO window and the tuner's window, side by side.
				`<td class="tenant-name">chat</td><td>latency</td><td class="num">10</td><td>30% – 100%</td><td>0</td><td>99% within 50ms</td><td class="num">99.50% over 5m</td><td class="num latency">p99 42ms</td><td class="num">1200</td>`,
				`<td class="slo-state ok">met</td><td class="burn num ok">0.40x over 1m<br><span class="muted small">99.60% of 240 requests</span></td>`,
				`<td class="tenant-name">search</td>`, `<td class="slo-state bad">violated</td><td class="burn num bad">3.00x over 1m`,
				`<td class="slo-state ">no SLO</td><td class="burn num "></td><td class="burn-history"></td>`,
				`The tuner acts on the <b>burn</b> over its own, shorter window (1m)`,
				// Sparklines: chat has no burn in the middle round (two
				// segments), search one line, the dashed line at 1x.
				`<th>Burn, last 30s<br><small>dashed: 1x</small></th>`,
				`<svg class="spark" width="240" height="36" viewBox="0 0 240 36" role="img" aria-label="chat burn: 0.20x – 0.40x, now 0.40x"><title>chat burn: 0.20x – 0.40x, now 0.40x</title><line class="ref" x1="0" x2="240" y1="18.0" y2="18.0"></line><circle class="dot" cx="3.0" cy="30.0" r="1.2"></circle><circle class="dot" cx="237.0" cy="27.0" r="1.2"></circle><circle cx="237.0" cy="27.0" r="2"></circle></svg>`,
				`<line class="ref" x1="0" x2="240" y1="23.0" y2="23.0"></line><polyline points="3.0,18.0 120.0,13.0 237.0,3.0"></polyline>`,
				// Knob history.
				`<h2>Knob values, last 30s</h2>`,
				`<td class="num">0</td><td>mps_active_threads</td><td>pid 42 (&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;)</td><td class="num">40%</td><td class="nowrap">40%</td>`,
				`<td class="num">0</td><td>power_limit</td><td></td><td class="num">500W</td><td class="nowrap">500W</td>`,
				// Settings: pending vs in effect vs recommended.
				`<td>mps_active_threads</td><td class="num">42</td><td>enforce</td><td>25%</td><td>40%</td><td class="warn">pending</td>`,
				`<td>power_limit</td><td class="num"></td><td>enforce</td><td>500W</td><td>500W</td><td class="ok">in effect</td>`,
				`<td>compute_timeslice</td><td class="num"></td><td>recommend</td><td>short</td><td>unknown</td><td class="warn">recommended</td>`,
				// Decisions, newest first, with outcome, guard and reason.
				`<td class="nowrap">2026-03-01 12:00:00Z</td><td>1</td><td></td><td>compute_timeslice</td><td class="nowrap">default → short</td><td class="outcome warn">recommended</td>`,
				`<td class="nowrap">unknown → 1980MHz</td><td class="outcome warn">guarded</td><td>kill_switch</td><td>latency variance breaks the SLO of chat</td>`,
				`<td class="outcome ok">applied</td>`,
				// Escaped everywhere: tenant rows, settings, decisions.
				`<td class="tenant-name">&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;</td>`,
			},
			not: []string{`<script>`, `id="tuner-off"`, `Originals not yet restored`, `time slice:`},
		},
		{
			name: "tuner off, nvml", info: TunerPageInfo{Backend: "nvml", Refresh: 10 * time.Second}, snap: pageSnapshot(),
			want: []string{`id="tuner-off"`, `The tuner is off`, `<dd id="mode">off</dd>`, `<dd id="backend">nvml</dd>`, `content="10"`,
				`<td class="tenant-name">chat</td>`, `<td class="slo-state bad">violated</td>`, `<td>off</td>`, `&lt;script&gt;`},
			not: []string{`<script>`, `id="decisions"`, `id="settings"`, `Kill switch`, `id="simulated"`, `Burn`, `<svg`, `Latest round`},
		},
		{
			name: "tuner on, nothing decided, no sample yet", info: simInfo, status: &tuner.Status{Policy: "autotune", Mode: tuner.ModeRecommend},
			want: []string{`<dd id="mode">recommend</dd>`, `<dd id="kill-switch" class="">off</dd>`, `<dd>never</dd>`, `none yet`, `updated never`,
				`No GPU sampled yet.`, `No tenants configured, or no sample yet.`, `No target decided yet.`, `id="no-decisions"`},
			not: []string{`id="tuner-off"`, `id="tenants"`, `id="knob-history"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, ctype := getPageWith(t, tc.info, tc.snap, tc.status, "/tuner")
			if code != 200 || ctype != "text/html; charset=utf-8" {
				t.Fatalf("code %d, content type %q", code, ctype)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %s", w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(body, n) {
					t.Errorf("page holds %s", n)
				}
			}
			if t.Failed() {
				t.Logf("page:\n%s", body)
			}
		})
	}
}

// JSON holds numbers, units in the field names, and no display text.
func TestTunerPageJSON(t *testing.T) {
	code, body, ctype := getPage(t, pageSnapshot(), pageStatus(), "/tuner?format=json")
	if code != 200 || ctype != "application/json" {
		t.Fatalf("code %d, content type %q", code, ctype)
	}
	var v tunerView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	var states []string
	for _, tn := range v.Tenants {
		states = append(states, tn.Name+"="+tn.State)
	}
	if got, want := strings.Join(states, " "), "chat=met search=violated "+evilTenant+"=no SLO"; got != want {
		t.Errorf("tenant states %q, want %q", got, want)
	}
	if !v.TunerOn || v.Mode != "enforce" || !v.KillSwitch || len(v.GPUs) != 2 || v.GPUs[1].Mode != "recommend" ||
		v.Backend != "sim" || !v.Simulated || v.RefreshSeconds != 15 || v.Changed != 2 || v.RestoreAtExit != 2 || v.FastWindowSeconds != 60 {
		t.Errorf("summary: %+v", v)
	}
	if len(v.Decisions) != 3 || v.Decisions[0].Knob != "compute_timeslice" || v.Decisions[1].Guard != "kill_switch" {
		t.Errorf("decisions (want newest first): %+v", v.Decisions)
	}
	if len(v.Settings) != 3 || v.Settings[0].State != "pending" {
		t.Errorf("settings: %+v", v.Settings)
	}
	var raw struct {
		GPUs     []map[string]any `json:"gpus"`
		Tenants  []map[string]any `json:"tenants"`
		Settings []map[string]any `json:"settings"`
		History  struct {
			Tenants []map[string]any `json:"tenants"`
			Knobs   []map[string]any `json:"knobs"`
		} `json:"history"`
	}
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		obj  map[string]any
		path string
		want any
	}{
		{"share", raw.Tenants[0], "share_min_ratio", 0.3},
		{"share max", raw.Tenants[0], "share_max_ratio", 1.0},
		{"SLO quantile", raw.Tenants[0], "slo.quantile_ratio", 0.99},
		{"SLO target", raw.Tenants[0], "slo.target_seconds", 0.05},
		{"SLO window", raw.Tenants[0], "slo.window_seconds", 300.0},
		{"attainment", raw.Tenants[0], "slo.attainment_ratio", 0.995},
		{"SLO metric", raw.Tenants[1], "slo.metric", "e2e"},
		{"latency at the SLO's quantile (p95)", raw.Tenants[1], "slo.quantile_seconds", 0.45},
		{"requests", raw.Tenants[0], "slo.requests", 1200.0},
		{"tuner window", raw.Tenants[1], "tuner_window.window_seconds", 60.0},
		{"burn", raw.Tenants[1], "tuner_window.burn_rate", 3.0},
		{"fast attainment", raw.Tenants[1], "tuner_window.attainment_ratio", 0.85},
		{"fast requests", raw.Tenants[1], "tuner_window.requests", 60.0},
		{"power", raw.GPUs[0], "power_limit_watts", 500.0},
		{"clocks", raw.GPUs[0], "clocks_locked", false},
		{"MPS cap", raw.GPUs[0], "mps_clients.0.active_threads_ratio", 0.4},
		{"MPS pending", raw.GPUs[0], "mps_clients.0.pending_active_threads_ratio", 0.25},
		{"round", raw.GPUs[0], "latest_round.kind", "kill_switch"},
		{"holding", raw.GPUs[0], "latest_round.holding", true},
		{"knob no backend drives", raw.GPUs[0], "tuner_knobs.0.why_not", "no backend of this host drives mps_active_threads"},
		{"knob not listed", raw.GPUs[0], "tuner_knobs.1.available", false},
		{"why not listed", raw.GPUs[0], "tuner_knobs.1.why_not", "not available on this GPU (its backends list locked_clocks, power_limit)"},
		{"knob available", raw.GPUs[0], "tuner_knobs.2.available", true},
		{"its name", raw.GPUs[0], "tuner_knobs.2.knob", "locked_clocks"},
		{"target", raw.Settings[0], "target.ratio", 0.25},
		{"effective", raw.Settings[1], "effective.watts", 500.0},
		{"burn history", raw.History.Tenants[1], "points.2.value", 3.0},
		{"burn unit", raw.History.Tenants[1], "unit", "burn_rate"},
		{"knob history", raw.History.Knobs[1], "points.0.value", 500.0},
		{"knob unit", raw.History.Knobs[1], "unit", "watts"},
	} {
		if got := jsonPath(tc.obj, tc.path); got != tc.want {
			t.Errorf("%s: %s = %#v, want %#v", tc.name, tc.path, got, tc.want)
		}
	}
	// No display text: no percent signs, no "W" after a number, no "x".
	for _, text := range []string{`"30% – 100%"`, `"500W"`, `"42ms"`, `"0.40x`, `99.50%`} {
		if strings.Contains(body, text) {
			t.Errorf("JSON holds display text %s", text)
		}
	}
}

// jsonPath walks a decoded JSON object along dotted keys and indexes.
func jsonPath(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// The tenant's row reconciles the SLO window's state with the burn the
// tuner acts on: met over 5m, burning 3x over the last minute; with no
// burn while its source is down, or not read yet (not said to be down).
func TestTunerPageBurn(t *testing.T) {
	att := 0.9944
	for _, tc := range []struct {
		name                   string
		burn                   tuner.TenantBurn
		state, text, class     string
		attainment, burnRate   float64
		hasAttainment, hasBurn bool
	}{
		{name: "met over 5m, burning over 1m", burn: tuner.TenantBurn{Tenant: "chat", Window: time.Minute, Requests: 100, Quantile: 0.99, Attainment: 0.97, Burn: 3, Known: true},
			state: "met", text: "3.00x over 1m", class: "bad", attainment: 0.97, burnRate: 3, hasAttainment: true, hasBurn: true},
		{name: "within budget", burn: tuner.TenantBurn{Tenant: "chat", Window: time.Minute, Requests: 100, Quantile: 0.99, Attainment: 0.999, Burn: 0.1, Known: true},
			state: "met", text: "0.10x over 1m", class: "ok", attainment: 0.999, burnRate: 0.1, hasAttainment: true, hasBurn: true},
		{name: "exactly the budget", burn: tuner.TenantBurn{Tenant: "chat", Window: 45 * time.Second, Requests: 100, Quantile: 0.99, Attainment: 0.99, Burn: 1, Known: true},
			state: "met", text: "1.00x over 45s", class: "ok", attainment: 0.99, burnRate: 1, hasAttainment: true, hasBurn: true},
		{name: "no requests in the window", burn: tuner.TenantBurn{Tenant: "chat", Window: 30 * time.Second, Quantile: 0.99},
			state: "met", text: "no requests in 30s"},
		{name: "latency source down", burn: tuner.TenantBurn{Tenant: "chat", Window: time.Minute, Requests: 100, Quantile: 0.99, SourceDown: true},
			state: "met", text: "latency source down: no burn"},
		{name: "latency source not read yet", burn: tuner.TenantBurn{Tenant: "chat", Window: time.Minute, Quantile: 0.99, SourceNotRead: true},
			state: "met", text: "latency source not read yet: no burn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := pageSnapshot()
			snap.SLOs[0].Attainment = &att
			st := &tuner.Status{Mode: tuner.ModeEnforce, FastWindow: time.Minute, Burns: []tuner.TenantBurn{tc.burn}}
			tv := newTunerView(simInfo, snap, st, 10).Tenants[0]
			if tv.State != tc.state || tv.Text.Attainment != "99.44% over 5m" || tv.Text.Burn != tc.text || tv.Text.BurnClass != tc.class {
				t.Errorf("state %q, attainment %q, burn %q (%q); want %q, 99.44%% over 5m, %q (%q)", tv.State, tv.Text.Attainment, tv.Text.Burn, tv.Text.BurnClass, tc.state, tc.text, tc.class)
			}
			f := tv.Tuner
			if f == nil || f.WindowSeconds != tc.burn.Window.Seconds() || f.Requests != tc.burn.Requests ||
				f.SourceDown != tc.burn.SourceDown || f.SourceNotRead != tc.burn.SourceNotRead ||
				(f.AttainmentRatio != nil) != tc.hasAttainment || (f.BurnRate != nil) != tc.hasBurn ||
				(tc.hasBurn && (*f.AttainmentRatio != tc.attainment || *f.BurnRate != tc.burnRate)) {
				t.Errorf("tuner window %+v", f)
			}
		})
	}
}

// The latency column is the SLO's own quantile of what the SLO bounds,
// named, whatever other quantiles the source reports.
func TestTunerPageSLOQuantile(t *testing.T) {
	reported := map[float64]float64{0.5: 0.1, 0.9: 0.2, 0.95: 0.3, 0.99: 0.4, 0.999: 0.5}
	for _, tc := range []struct {
		name, metric       string
		quantile           float64
		quantiles          map[float64]float64
		slo, latency, kind string
		seconds            float64 // 0: none
	}{
		{name: "end to end p99", quantile: 0.99, quantiles: reported, slo: "99% within 1s", latency: "p99 400ms", kind: "e2e", seconds: 0.4},
		{name: "end to end p95", quantile: 0.95, quantiles: reported, slo: "95% within 1s", latency: "p95 300ms", kind: "e2e", seconds: 0.3},
		{name: "end to end p99.9", quantile: 0.999, quantiles: reported, slo: "99.9% within 1s", latency: "p99.9 500ms", kind: "e2e", seconds: 0.5},
		{name: "TTFT p95", metric: "ttft", quantile: 0.95, quantiles: reported, slo: "TTFT 95% within 1s", latency: "TTFT p95 300ms", kind: "ttft", seconds: 0.3},
		{name: "ITL p90", metric: "itl", quantile: 0.9, quantiles: reported, slo: "ITL 90% within 1s", latency: "ITL p90 200ms", kind: "itl", seconds: 0.2},
		{name: "p95 SLO, only p99 known", quantile: 0.95, quantiles: map[float64]float64{0.99: 0.4}, slo: "95% within 1s", kind: "e2e"},
		{name: "no requests in the window", metric: "ttft", quantile: 0.95, quantiles: map[float64]float64{}, slo: "TTFT 95% within 1s", kind: "ttft"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := pageSnapshot()
			snap.SLOs = []tenant.SLOStatus{{Tenant: "chat", Metric: tc.metric, Status: latency.Status{Quantile: tc.quantile, TargetSeconds: 1,
				Window: 5 * time.Minute, SourceUp: true, SourceRead: true, Measured: true, GoodKnown: true, Quantiles: tc.quantiles}}}
			tv := newTunerView(simInfo, snap, nil, 10).Tenants[0]
			if tv.Text.SLO != tc.slo || tv.Text.Latency != tc.latency {
				t.Errorf("SLO %q, latency %q; want %q, %q", tv.Text.SLO, tv.Text.Latency, tc.slo, tc.latency)
			}
			v := tv.SLO
			if v == nil || v.Metric != tc.kind || v.QuantileRatio != tc.quantile || (v.QuantileSeconds != nil) != (tc.seconds > 0) ||
				(v.QuantileSeconds != nil && *v.QuantileSeconds != tc.seconds) {
				t.Errorf("JSON view %+v (quantile_seconds %v), want metric %q, quantile %v, %v s", v, v.QuantileSeconds, tc.kind, tc.quantile, tc.seconds)
			}
		})
	}
	// The page names no fixed quantile in its header.
	_, body, _ := getPage(t, pageSnapshot(), pageStatus(), "/tuner")
	if strings.Contains(body, "<th>p99") || !strings.Contains(body, "<th>Latency<br><small>SLO's quantile, SLO window</small></th>") {
		t.Error("the tenant table's latency header is not the SLO's quantile")
	}
}

// The round's line: holding or acting, and its colour.
func TestTunerPageRound(t *testing.T) {
	for _, tc := range []struct {
		kind tuner.RoundKind
		want string
	}{
		{tuner.RoundActing, `<td class="round ok"><b>acting</b>: why</td>`},
		{tuner.RoundWithinBudget, `<td class="round "><b>holding</b> because why</td>`},
		{tuner.RoundNoSignal, `<td class="round "><b>holding</b> because why</td>`},
		{tuner.RoundHeld, `<td class="round "><b>holding</b> because why</td>`},
		{tuner.RoundGuarded, `<td class="round warn"><b>holding</b> because why</td>`},
		{tuner.RoundRecommend, `<td class="round warn"><b>holding</b> because why</td>`},
		{tuner.RoundKillSwitch, `<td class="round warn"><b>holding</b> because why</td>`},
		{tuner.RoundNoChange, `<td class="round warn"><b>holding</b> because why</td>`},
		{tuner.RoundHook, `<td class="round warn"><b>holding</b> because why</td>`},
	} {
		st := &tuner.Status{Mode: tuner.ModeEnforce, GPUs: []tuner.GPURound{{GPU: "GPU-aaaa", Kind: tc.kind, Why: "why"}}}
		_, body, _ := getPage(t, pageSnapshot(), st, "/tuner")
		if !strings.Contains(body, tc.want) {
			t.Errorf("%s: page lacks %s", tc.kind, tc.want)
		}
	}
	_, body, _ := getPage(t, pageSnapshot(), &tuner.Status{Mode: tuner.ModeEnforce}, "/tuner")
	if !strings.Contains(body, `<td class="round "><span class="muted">no round yet</span></td>`) {
		t.Errorf("a GPU without a round: %s", body)
	}
}

// The history's series: gaps split a line, x runs over the rounds' span,
// values keep their unit.
func TestTunerPageHistory(t *testing.T) {
	k := tuner.SettingKey{GPU: "GPU-aaaa", GPUIndex: 0, Knob: gpu.KnobComputeTimeSlice}
	st := &tuner.Status{History: []tuner.RoundPoint{
		{At: pageTime, Burn: map[string]float64{"a": 0}, Values: map[tuner.SettingKey]float64{k: 1}},
		{At: pageTime.Add(time.Minute), Burn: map[string]float64{"a": 4}},
		{At: pageTime.Add(2 * time.Minute), Burn: map[string]float64{"b": 1}, Values: map[tuner.SettingKey]float64{k: 0}},
	}}
	h := newHistoryView(st)
	if h.Span != "2m" || len(h.Tenants) != 2 || len(h.Knobs) != 1 {
		t.Fatalf("%+v", h)
	}
	a, b, ts := h.Tenants[0], h.Tenants[1], h.Knobs[0]
	for _, tc := range []struct {
		name          string
		s             seriesView
		segments      []string
		dots          [][2]string
		now, rng, ref string
		points        int
	}{
		{"burn 0 to 4", a, []string{"3.0,33.0 120.0,3.0"}, nil, "4.00x", "0.00x – 4.00x", "25.5", 2},
		{"burn at 1 only at the end", b, nil, [][2]string{{"237.0", "18.0"}}, "1.00x", "1.00x", "18.0", 1},
		{"time slice default then short, a gap between", ts, nil, [][2]string{{"3.0", "23.0"}, {"237.0", "33.0"}}, "short", "short – default", "", 2},
	} {
		sp := tc.s.Spark
		if sp == nil || !slices.Equal(sp.Segments, tc.segments) || !slices.Equal(sp.Dots, tc.dots) || tc.s.Now != tc.now || tc.s.Range != tc.rng || sp.RefY != tc.ref || len(tc.s.Points) != tc.points {
			t.Errorf("%s: %+v %+v", tc.name, tc.s, sp)
		}
	}
	if empty := newHistoryView(&tuner.Status{}); len(empty.Tenants) != 0 || empty.Span != "" {
		t.Errorf("no rounds: %+v", empty)
	}
}

// The names the page gives the tuner's numeric ranks are the tuner's.
func TestTunerPageRankNames(t *testing.T) {
	for i, n := range levelNames {
		if f, ok := tuner.Numeric(tuner.Level(n)); !ok || f != float64(i) {
			t.Errorf("level %s is %v in the tuner, %d here", n, f, i)
		}
	}
	for i, n := range policyNames {
		if f, ok := tuner.Numeric(tuner.Scheduler{Policy: gpu.VGPUPolicy(n)}); !ok || f != float64(i) {
			t.Errorf("policy %s is %v in the tuner, %d here", n, f, i)
		}
	}
}

func TestTunerPageKeepsLatestDecisions(t *testing.T) {
	st := &tuner.Status{Mode: tuner.ModeEnforce}
	for i := range tunerPageDecisions + 5 {
		st.Recent = append(st.Recent, tuner.Decision{Time: pageTime.Add(time.Duration(i) * time.Second), Knob: gpu.KnobPowerLimit})
	}
	v := newTunerView(simInfo, nil, st, tunerPageDecisions)
	if len(v.Decisions) != tunerPageDecisions {
		t.Fatalf("%d decisions, want %d", len(v.Decisions), tunerPageDecisions)
	}
	if first, last := v.Decisions[0].Time, v.Decisions[len(v.Decisions)-1].Time; !first.Equal(pageTime.Add(54*time.Second)) || !last.Equal(pageTime.Add(5*time.Second)) {
		t.Errorf("decisions from %s to %s, want the latest, newest first", first, last)
	}
}

func TestTunerPageBadRequests(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		code           int
		body           string
	}{
		{"POST", "/tuner", 405, "Only GET and HEAD"},
		{"GET", "/tuner?format=xml", 400, `unknown format "xml"`},
		// a query that cannot be read is refused, not answered with
		// the HTML page as if no format were asked for
		{"GET", "/tuner?format=json;x=1", 400, "malformed query"},
		{"GET", "/tuner?format=%zz", 400, "malformed query"},
		{"GET", "/tuner?format=json&format=html", 400, `format given twice, "json" and "html"`},
		{"GET", "/tuner?format=json&format=json", 200, `"backend":"sim"`},
	} {
		p := NewTunerPage(nil, nil, simInfo, nil)
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.target, nil))
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.target, rec.Code, rec.Body.String(), tc.code, tc.body)
		}
	}
}

// Before the first round (the status the start's restore published) the
// page says no round ran, as its GPU rows do, and the JSON has no
// last_round.
func TestTunerPageNoRoundYet(t *testing.T) {
	st := pageStatus()
	st.GPUs = nil
	_, body, _ := getPage(t, pageSnapshot(), st, "/tuner")
	if !strings.Contains(body, "<dt>Last round</dt><dd>never</dd>") {
		t.Errorf("the page gives a last round before any:\n%s", body)
	}
	if _, js, _ := getPage(t, pageSnapshot(), st, "/tuner?format=json"); strings.Contains(js, `"last_round"`) {
		t.Errorf("the JSON gives a last round before any:\n%s", js)
	}
}

// The summary says what the exit really does with the settings changed:
// restored, left open where their client is not listed yet (before,
// counted restored at exit), tried again after a failed restore, or left
// as they are outside enforce mode (their originals kept open in the
// journal).
func TestTunerPageExitRestores(t *testing.T) {
	for _, tc := range []struct {
		name string
		exit tuner.ExitRestores
		want string
	}{
		{"none", tuner.ExitRestores{}, `<dd id="changed">0</dd>`},
		{"enforce", tuner.ExitRestores{AtExit: 2}, `<dd id="changed">2<br><span id="restore-at-exit">2 restored at exit</span></dd>`},
		{"recommend", tuner.ExitRestores{KeptOpen: 1},
			`<dd id="changed">1<br><span id="kept-open">1 left as they are at exit (no GPU in enforce mode): kept open in the journal, restored by a later start in enforce mode</span></dd>`},
		{"a client not listed yet", tuner.ExitRestores{WaitingForListing: 1},
			`<dd id="changed">1<br><span id="waiting-for-listing">1 waiting for a snapshot to list their client: left open if the exit comes first</span></dd>`},
		{"a restore failed", tuner.ExitRestores{AtExit: 1, Failed: 1},
			`<dd id="changed">2<br><span id="restore-at-exit">1 restored at exit</span><br><span id="restore-failed" class="bad">1 whose restore failed: tried again at exit, then kept open in the journal for the next start</span></dd>`},
	} {
		st := pageStatus()
		st.Exit, st.Unrestored = tc.exit, tc.exit.AtExit+tc.exit.WaitingForListing+tc.exit.Failed+tc.exit.KeptOpen
		_, body, _ := getPage(t, pageSnapshot(), st, "/tuner")
		if !strings.Contains(body, tc.want) {
			t.Errorf("%s: the page lacks\n%s", tc.name, tc.want)
		}
		if strings.Contains(body, "restored at exit") != (tc.exit.AtExit > 0) {
			t.Errorf("%s: says %q with %d restored at exit", tc.name, "restored at exit", tc.exit.AtExit)
		}
		_, js, _ := getPage(t, pageSnapshot(), st, "/tuner?format=json")
		var v tunerView
		if err := json.Unmarshal([]byte(js), &v); err != nil {
			t.Fatal(err)
		}
		if v.Changed != st.Unrestored || v.RestoreAtExit != tc.exit.AtExit || v.WaitingForListing != tc.exit.WaitingForListing || v.RestoreFailed != tc.exit.Failed || v.KeptOpen != tc.exit.KeptOpen {
			t.Errorf("%s: JSON %d changed, %d at exit, %d failed, %d kept open; want %d, %+v", tc.name, v.Changed, v.RestoreAtExit, v.RestoreFailed, v.KeptOpen, st.Unrestored, tc.exit)
		}
	}
}

// Every knob's value is a number in JSON, its unit in the field's name.
func TestTunerPageValueJSON(t *testing.T) {
	for _, tc := range []struct {
		v    tuner.Value
		want string
	}{
		{tuner.Fraction(0.25), `{"ratio":0.25}`},
		{tuner.Duty(0.3), `{"duty_ratio":0.3}`},
		{tuner.Duty(0), `{"duty_ratio":0}`},
		{tuner.Watts(500), `{"watts":500}`},
	} {
		b, err := json.Marshal(valueJSON(tc.v))
		if err != nil || string(b) != tc.want {
			t.Errorf("%v: %s (%v), want %s", tc.v, b, err, tc.want)
		}
	}
}
