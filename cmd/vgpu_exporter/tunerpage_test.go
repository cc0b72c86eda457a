package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

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
			{Tenant: "chat", Status: latency.Status{Quantile: 0.99, TargetSeconds: 0.05, Window: 5 * time.Minute, SourceUp: true, GoodKnown: true,
				Attainment: &met, Quantiles: map[float64]float64{0.99: 0.042}, WindowRequests: 1200}},
			{Tenant: "search", Status: latency.Status{Quantile: 0.95, TargetSeconds: 0.2, Window: 5 * time.Minute, SourceUp: true, GoodKnown: true,
				Attainment: &violated, Quantiles: map[float64]float64{0.99: 0.6}, WindowRequests: 300}},
		},
	}
}

// pageStatus is an enforcing tuner's status with GPU 1 on recommend, a
// pending MPS cap and three decisions, one of them refused by a guard.
func pageStatus() *tuner.Status {
	return &tuner.Status{
		Policy: "autotune", Mode: tuner.ModeEnforce, GPUModes: map[string]tuner.Mode{"1": tuner.ModeRecommend},
		KillSwitch: true, LastRun: pageTime, Unrestored: 2,
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
	}
}

func getPage(t *testing.T, snap *tenant.Snapshot, st *tuner.Status, target string) (int, string, string) {
	t.Helper()
	p := newTunerPage(func() *tenant.Snapshot { return snap }, func() *tuner.Status { return st }, nil)
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
	return rec.Code, rec.Body.String(), rec.Header().Get("Content-Type")
}

func TestTunerPageHTML(t *testing.T) {
	for _, tc := range []struct {
		name      string
		snap      *tenant.Snapshot
		status    *tuner.Status
		want, not []string
	}{
		{
			name: "tuner on", snap: pageSnapshot(), status: pageStatus(),
			want: []string{
				`<dd id="mode">enforce</dd>`, `on: the tuner changes nothing`, `<dd>2</dd>`,
				// GPUs: mode per GPU, current settings.
				`<code>GPU-aaaa</code></td><td>mps</td><td>enforce</td><td>default</td><td>500W</td><td>free</td>`,
				`<code>GPU-bbbb</code></td><td></td><td>recommend</td>`,
				// Tenants and SLO state.
				`<td class="tenant-name">chat</td><td>latency</td><td class="num">10</td><td>30% – 100%</td><td>0</td><td>99% within 50ms</td><td class="num">99.50%</td><td class="num">42ms</td>`,
				`<td class="slo-state ok">met</td>`,
				`<td class="tenant-name">search</td>`, `<td class="slo-state bad">violated</td>`,
				`<td class="slo-state ">no SLO</td>`,
				// Settings: pending vs in effect vs recommended.
				`<td>mps_active_threads</td><td class="num">42</td><td>enforce</td><td>25%</td><td>40%</td><td class="warn">pending</td>`,
				`<td>power_limit</td><td class="num"></td><td>enforce</td><td>500W</td><td>500W</td><td class="ok">in effect</td>`,
				`<td>compute_timeslice</td><td class="num"></td><td>recommend</td><td>short</td><td>unknown</td><td class="warn">recommended</td>`,
				// Decisions, newest first, with outcome, guard and reason.
				`<td class="nowrap">2026-03-01 12:00:00Z</td><td>1</td><td></td><td>compute_timeslice</td><td class="nowrap">default → short</td><td class="outcome warn">recommended</td>`,
				`<td class="nowrap">unknown → 1980MHz</td><td class="outcome warn">guarded</td><td>kill_switch</td><td>latency variance breaks the SLO of chat</td>`,
				`<td class="outcome ok">applied</td>`,
				// Escaped everywhere: tenant rows, settings, decisions.
				`&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;`,
			},
			not: []string{`<script>`, `id="tuner-off"`},
		},
		{
			name: "tuner off", snap: pageSnapshot(),
			want: []string{`id="tuner-off"`, `The tuner is off`, `<dd id="mode">off</dd>`, `<td class="tenant-name">chat</td>`,
				`<td class="slo-state bad">violated</td>`, `<td>off</td>`, `&lt;script&gt;`},
			not: []string{`<script>`, `id="decisions"`, `id="settings"`, `Kill switch`},
		},
		{
			name: "tuner on, nothing decided, no sample yet", status: &tuner.Status{Policy: "autotune", Mode: tuner.ModeRecommend},
			want: []string{`<dd id="mode">recommend</dd>`, `<dd id="kill-switch" class="">off</dd>`, `<dd>never</dd>`, `none yet`,
				`No GPU sampled yet.`, `No tenants configured, or no sample yet.`, `No target decided yet.`, `id="no-decisions"`},
			not: []string{`id="tuner-off"`, `id="tenants"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, ctype := getPage(t, tc.snap, tc.status, "/tuner")
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
	if !v.TunerOn || v.Mode != "enforce" || !v.KillSwitch || len(v.GPUs) != 2 || v.GPUs[1].Mode != "recommend" {
		t.Errorf("summary: %+v", v)
	}
	if len(v.Decisions) != 3 || v.Decisions[0].Knob != "compute_timeslice" || v.Decisions[1].Guard != "kill_switch" {
		t.Errorf("decisions (want newest first): %+v", v.Decisions)
	}
	if len(v.Settings) != 3 || v.Settings[0].State != "pending" {
		t.Errorf("settings: %+v", v.Settings)
	}
}

func TestTunerPageKeepsLatestDecisions(t *testing.T) {
	st := &tuner.Status{Mode: tuner.ModeEnforce}
	for i := range tunerPageDecisions + 5 {
		st.Recent = append(st.Recent, tuner.Decision{Time: pageTime.Add(time.Duration(i) * time.Second), Knob: gpu.KnobPowerLimit})
	}
	v := newTunerView(nil, st, tunerPageDecisions)
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
	} {
		p := newTunerPage(nil, nil, nil)
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.target, nil))
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.target, rec.Code, rec.Body.String(), tc.code, tc.body)
		}
	}
}

// The exporter on the simulator links the page from its landing page, and
// the page shows the tuner's section only when it runs. (Decisions need the
// latency sources' background scrapes: test/e2e checks them on the binary.)
func TestExporterServesTunerPage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"off", nil, []string{`id="tuner-off"`, `class="tenant"`}},
		{"enforce", []string{"--tuner.mode=enforce"}, []string{`<dd id="mode">enforce</dd>`, `class="tenant"`, `<h2>Latest decisions</h2>`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := gpu.NewManualClock(pageTime)
			cfg := testConfig(t, append([]string{"--backend=sim", "--sim.scenario=noisy-neighbour"}, tc.args...)...)
			svc, err := buildOn(cfg, clock, log.NewNopLogger())
			if err != nil {
				t.Fatal(err)
			}
			defer svc.src.Close()
			simRounds(t, svc, clock, 4)
			h, err := newHandler(handlerOptions{TelemetryPath: "/metrics",
				NewCollector: newFakeCollector,
				TunerPage:    newTunerPage(svc.snapshot, svc.tunerStatus, nil)})
			if err != nil {
				t.Fatal(err)
			}
			for path, want := range map[string][]string{"/": {`<a href="/tuner">Tuner</a>`}, "/tuner": tc.want} {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
				for _, w := range want {
					if !strings.Contains(rec.Body.String(), w) {
						t.Errorf("%s lacks %s", path, w)
					}
				}
			}
			if svc.tuner != nil {
				if err := svc.tuner.restore(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// simRounds samples the service n times, 15s apart on clock, running the
// tuner after each sample when it is on.
func simRounds(t *testing.T, svc *service, clock *gpu.ManualClock, n int) {
	t.Helper()
	for range n {
		clock.Advance(15 * time.Second)
		if err := svc.sampler.SampleOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if svc.tuner != nil {
			if _, err := svc.tuner.t.RunOnce(context.Background(), svc.snapshot()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The browser that tests the page stays out of the binary.
func TestBinaryLinksNoBrowserDriver(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/prometheus/exporter-toolkit/web") {
		t.Fatalf("go list -deps lists %d packages, without the exporter's own", len(deps))
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/chromedp/") {
			t.Errorf("the exporter links %s", d)
		}
	}
}
