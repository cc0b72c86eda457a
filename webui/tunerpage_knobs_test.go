package webui

import (
	"cmp"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// Each GPU lists only the knobs of its sharing mode.
func TestTunerPageKnobsPerSharingMode(t *testing.T) {
	limit, locked, eff := 300.0, true, 0.5
	base := func(m gpu.SharingMode) gpu.Device {
		return gpu.Device{UUID: "GPU-x", Up: true, Mode: m, PowerLimitW: &limit, ClocksLocked: &locked, ComputeTimeSlice: gpu.TimeSliceLong,
			Scheduler: &gpu.VGPUScheduler{Policy: gpu.VGPUPolicyEqualShare}, MIG: []gpu.MIGInstance{{Profile: "3g.40gb"}, {Profile: "4g.40gb"}},
			Processes: []gpu.Process{{PID: 9, MPSActiveThreads: &eff}}}
	}
	for _, tc := range []struct {
		mode gpu.SharingMode
		want []string
	}{
		{gpu.SharingMPS, []string{"MPS cap, pid 9 (batch): 50%", "clocks: locked", "power limit: 300W"}},
		{gpu.SharingTimeSlice, []string{"time slice: long", "clocks: locked", "power limit: 300W"}},
		{gpu.SharingVGPU, []string{"vGPU scheduler: equal-share", "clocks: locked", "power limit: 300W"}},
		{gpu.SharingMIG, []string{"MIG layout: [3g.40gb, 4g.40gb]", "clocks: locked", "power limit: 300W"}},
		{gpu.SharingExclusive, []string{"clocks: locked", "power limit: 300W"}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			d := base(tc.mode)
			snap := &tenant.Snapshot{Usage: []tenant.Usage{{Tenant: "batch", UUID: "GPU-x", PIDs: []uint32{9}}}}
			g := newGPUView(&d, snap, nil)
			var got []string
			for _, k := range g.Knobs {
				got = append(got, k.Name+": "+k.Value)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("knobs %q, want %q", got, tc.want)
			}
			// JSON: only the fields of the mode.
			if (g.TimeSlice != "") != (tc.mode == gpu.SharingTimeSlice) || (g.Scheduler != "") != (tc.mode == gpu.SharingVGPU) ||
				(g.MIGLayout != nil) != (tc.mode == gpu.SharingMIG) || (g.MPSClients != nil) != (tc.mode == gpu.SharingMPS) ||
				g.PowerLimitWatts == nil || g.ClocksLocked == nil {
				t.Errorf("JSON fields %+v", g)
			}
		})
	}
}

// An MPS client's cap: in effect, pending while the target differs, and
// a client the readings do not show yet that the tuner set a cap for.
func TestTunerPageMPSClients(t *testing.T) {
	eff := 0.5
	d := gpu.Device{UUID: "GPU-x", Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{{PID: 9, MPSActiveThreads: &eff}, {PID: 10, MPSActiveThreads: &eff}}}
	st := &tuner.Status{Settings: []tuner.Setting{
		{GPU: "GPU-x", Knob: gpu.KnobMPSActiveThreads, PID: 9, Target: tuner.Fraction(0.3), Mode: tuner.ModeEnforce},
		{GPU: "GPU-x", Knob: gpu.KnobMPSActiveThreads, PID: 10, Target: tuner.Fraction(0.5), Mode: tuner.ModeEnforce},
		{GPU: "GPU-x", Knob: gpu.KnobMPSActiveThreads, PID: 11, Tenant: "new", Target: tuner.Fraction(0.2), Effective: tuner.Fraction(1), Mode: tuner.ModeEnforce},
		{GPU: "GPU-y", Knob: gpu.KnobMPSActiveThreads, PID: 12, Target: tuner.Fraction(0.2), Mode: tuner.ModeEnforce},
	}}
	g := newGPUView(&d, &tenant.Snapshot{}, st)
	var got []string
	for _, k := range g.Knobs {
		got = append(got, k.Name+": "+k.Value)
	}
	want := []string{"MPS cap, pid 9: 50% (target 30%, not in effect yet)", "MPS cap, pid 10: 50%",
		"MPS cap, pid 11 (new): 100% (target 20%, not in effect yet)", "clocks: unknown", "power limit: unknown"}
	if !slices.Equal(got, want) {
		t.Errorf("knobs\n%q, want\n%q", got, want)
	}
}

// A tenant's pause shows beside its GPU's other knobs; a host that can
// pause shows "none" when nobody is; one that cannot shows nothing. The
// JSON lists the same pauses on the GPU, set or recommended.
func TestTunerPagePause(t *testing.T) {
	d := gpu.Device{UUID: "GPU-x", Up: true, Mode: gpu.SharingTimeSlice, ComputeTimeSlice: gpu.TimeSliceDefault}
	texts := func(g gpuView) []string {
		var out []string
		for _, k := range g.Knobs {
			if strings.HasPrefix(k.Name, "pause") {
				out = append(out, k.Name+": "+k.Value)
			}
		}
		return out
	}
	pausing := []tuner.ActuatorInfo{{Knob: gpu.KnobPauseDuty, Backend: "pause"}}
	for _, tc := range []struct {
		name string
		st   *tuner.Status
		want []string
		json string
	}{
		{"no pause actuator", &tuner.Status{}, nil, `null`},
		{"nobody paused", &tuner.Status{Actuators: pausing}, []string{"pause: none"}, `null`},
		{"a tenant paused", &tuner.Status{Actuators: pausing, Settings: []tuner.Setting{
			{GPU: "GPU-x", Tenant: "train", Knob: gpu.KnobPauseDuty, PID: 9, Mode: tuner.ModeEnforce, Target: tuner.Duty(0.4)},
			{GPU: "GPU-y", Tenant: "other", Knob: gpu.KnobPauseDuty, PID: 10, Mode: tuner.ModeEnforce, Target: tuner.Duty(0.5)},
		}}, []string{"pause (train): 40% of each period"}, `[{"tenant":"train","duty_ratio":0.4}]`},
		{"in effect as set", &tuner.Status{Actuators: pausing, Settings: []tuner.Setting{
			{GPU: "GPU-x", Tenant: "train", Knob: gpu.KnobPauseDuty, PID: 9, Mode: tuner.ModeEnforce, Target: tuner.Duty(0.4), Effective: tuner.Duty(0.4)},
		}}, []string{"pause (train): 40% of each period"}, `[{"tenant":"train","duty_ratio":0.4,"effective_duty_ratio":0.4}]`},
		{"in effect: another GPU's", &tuner.Status{Actuators: pausing, Settings: []tuner.Setting{
			{GPU: "GPU-x", Tenant: "train", Knob: gpu.KnobPauseDuty, PID: 9, Mode: tuner.ModeEnforce, Target: tuner.Duty(0.4), Effective: tuner.Duty(0.6)},
		}}, []string{"pause (train): 40% of each period (in effect: 60%, another of its GPUs asks for more)"}, `[{"tenant":"train","duty_ratio":0.4,"effective_duty_ratio":0.6}]`},
		{"in effect: capped", &tuner.Status{Actuators: pausing, Settings: []tuner.Setting{
			{GPU: "GPU-x", Tenant: "train", Knob: gpu.KnobPauseDuty, PID: 9, Mode: tuner.ModeEnforce, Target: tuner.Duty(0.8), Effective: tuner.Duty(0.5)},
		}}, []string{"pause (train): 80% of each period (in effect: 50%, capped by --pause.max)"}, `[{"tenant":"train","duty_ratio":0.8,"effective_duty_ratio":0.5}]`},
		{"in effect: the freeze failed", &tuner.Status{Actuators: pausing, Settings: []tuner.Setting{
			{GPU: "GPU-x", Tenant: "train", Knob: gpu.KnobPauseDuty, PID: 9, Mode: tuner.ModeEnforce, Target: tuner.Duty(0.4), Effective: tuner.Duty(0)},
		}}, []string{"pause (train): 40% of each period (not in effect: its latest freeze failed, or its pause ended; the exporter's log says why)"},
			`[{"tenant":"train","duty_ratio":0.4,"effective_duty_ratio":0}]`},
		{"a tenant thawed", &tuner.Status{Actuators: pausing, Settings: []tuner.Setting{
			{GPU: "GPU-x", Tenant: "train", Knob: gpu.KnobPauseDuty, PID: 9, Mode: tuner.ModeEnforce, Target: tuner.Duty(0)},
		}}, []string{"pause: none"}, `null`},
		// A recommendation pauses nobody: never shown as in force.
		{"a pause recommended", &tuner.Status{Actuators: pausing, Settings: []tuner.Setting{
			{GPU: "GPU-x", Tenant: "train", Knob: gpu.KnobPauseDuty, PID: 9, Mode: tuner.ModeRecommend, Target: tuner.Duty(0.2)},
		}}, []string{"pause: none", "pause (train): none (recommended: 20% of each period, not set)"},
			`[{"tenant":"train","recommended_duty_ratio":0.2}]`},
		{"one set, one recommended", &tuner.Status{Actuators: pausing, Settings: []tuner.Setting{
			{GPU: "GPU-x", Tenant: "embed", Knob: gpu.KnobPauseDuty, PID: 11, Mode: tuner.ModeRecommend, Target: tuner.Duty(0.1)},
			{GPU: "GPU-x", Tenant: "train", Knob: gpu.KnobPauseDuty, PID: 9, Mode: tuner.ModeEnforce, Target: tuner.Duty(0.25)},
		}}, []string{"pause (train): 25% of each period", "pause (embed): none (recommended: 10% of each period, not set)"},
			`[{"tenant":"train","duty_ratio":0.25},{"tenant":"embed","recommended_duty_ratio":0.1}]`},
	} {
		g := newGPUView(&d, &tenant.Snapshot{}, tc.st)
		if got := texts(g); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		if js, err := json.Marshal(g.Pauses); err != nil || string(js) != tc.json {
			t.Errorf("%s: JSON pauses %s (%v), want %s", tc.name, js, err, tc.json)
		}
	}
}

// A knob switched off (--tuner.disable-knob, or opt-in and not enabled)
// is not among those the tuner can turn, though the GPU has it: the page
// says it is switched off, the JSON marks it.
func TestTunerPageSwitchedOffKnobs(t *testing.T) {
	st := pageStatus()
	st.SwitchedOff = []gpu.Knob{gpu.KnobPowerLimit, gpu.KnobPauseDuty}
	_, body, _ := getPage(t, pageSnapshot(), st, "/tuner")
	want := `<td class="tuner-knobs"><span class="knobs-available">locked_clocks</span><ul class="knobs muted small"><li class="knob-not-listed">vgpu_scheduler: not available on this GPU (its backends list locked_clocks, power_limit)</li></ul><br><span class="muted small knobs-no-backend">no backend on this host: mps_active_threads</span><br><span class="muted small knobs-off">switched off (<code>--tuner.disable-knob</code>, or opt-in without <code>--tuner.enable-knob</code>): power_limit</span></td>`
	if !strings.Contains(body, want) {
		t.Errorf("the page lacks\n%s\nin\n%s", want, body)
	}
	_, js, _ := getPage(t, pageSnapshot(), st, "/tuner?format=json")
	for _, w := range []string{`"knob":"power_limit","available":true,"switched_off":true`, `"knob":"locked_clocks","available":true}`} {
		if !strings.Contains(js, w) {
			t.Errorf("the JSON lacks\n%s\nin\n%s", w, js)
		}
	}
}

// An MPS cap the tuner recommends is shown as a recommendation, never as
// pending: only a cap it set can be waiting to take effect.
func TestTunerPageMPSRecommended(t *testing.T) {
	eff := 1.0
	d := gpu.Device{UUID: "GPU-x", Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{{PID: 9, MPSActiveThreads: &eff}}}
	snap := &tenant.Snapshot{Usage: []tenant.Usage{{UUID: "GPU-x", Tenant: "embed", PIDs: []uint32{9}}}}
	for _, tc := range []struct {
		name                 string
		mode                 tuner.Mode
		text                 string
		pending, recommended *float64
	}{
		{"set, waiting for the client", tuner.ModeEnforce, "MPS cap, pid 9 (embed): 100% (target 50%, not in effect yet)", ptr(0.5), nil},
		{"recommended", tuner.ModeRecommend, "MPS cap, pid 9 (embed): 100% (recommended 50%, not set)", nil, ptr(0.5)},
	} {
		st := &tuner.Status{Settings: []tuner.Setting{{GPU: "GPU-x", Tenant: "embed", Knob: gpu.KnobMPSActiveThreads, PID: 9, Mode: tc.mode, Target: tuner.Fraction(0.5)}}}
		g := newGPUView(&d, snap, st)
		if len(g.MPSClients) != 1 || len(g.Knobs) == 0 {
			t.Fatalf("%s: clients %+v, knobs %+v", tc.name, g.MPSClients, g.Knobs)
		}
		c := g.MPSClients[0]
		if got := g.Knobs[0].Name + ": " + g.Knobs[0].Value; got != tc.text {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.text)
		}
		if !equalPtr(c.PendingRatio, tc.pending) || !equalPtr(c.RecommendedRatio, tc.recommended) {
			t.Errorf("%s: pending %v, recommended %v; want %v, %v", tc.name, c.PendingRatio, c.RecommendedRatio, tc.pending, tc.recommended)
		}
		if g.Knobs[0].Pending != (tc.pending != nil) {
			t.Errorf("%s: marked pending %v", tc.name, g.Knobs[0].Pending)
		}
	}
}

func equalPtr(a, b *float64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// TestValueJSONKeysDocumented: every key a setting's target or effective
// value has in /tuner?format=json is named in docs/tuner-page.md, so that a
// script reading the JSON knows each knob's.
func TestValueJSONKeysDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/tuner-page.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []tuner.Value{
		tuner.Fraction(0.5), tuner.Duty(0.2), tuner.Watts(0), tuner.Watts(300),
		tuner.ClockRange{MinMHz: 1000, MaxMHz: 1500}, tuner.Level("long"),
		tuner.Scheduler{Policy: "fixed-share"}, tuner.Layout("3g.71gb,3g.71gb"),
		tuner.Placement("GPU-1"), tuner.Running{},
	} {
		for k := range valueJSON(v) {
			if !strings.Contains(string(doc), "`"+k+"`") {
				t.Errorf("docs/tuner-page.md does not name %q, the JSON key of a %s value", k, v.Kind())
			}
		}
	}
}

// A clock lock's range is never read back (NVML has no call for it): the
// setting of a lock the readings say is locked is "locked, range not
// read", never "unknown" nor "in effect"; one the readings say is free is
// pending; an unlock read free is in effect.
func TestTunerPageClockLockState(t *testing.T) {
	lock := tuner.ClockRange{MinMHz: 1980, MaxMHz: 1980}
	for _, c := range []struct {
		name      string
		target    tuner.Value
		locked    *bool
		effective tuner.Value // as the tuner reads it
		state     string
		text      string
		json      string
		mode      tuner.Mode // "": enforce
	}{
		{"lock, read locked", lock, ptr(true), nil, "locked, range not read", "locked (range not read)", `{"locked":true}`, ""},
		{"lock, read free", lock, ptr(false), tuner.ClockRange{}, "pending", "unlocked", `{"locked":false,"max_mhz":0,"min_mhz":0}`, ""},
		{"lock, not read", lock, nil, nil, "unknown", "unknown", `null`, ""},
		{"unlock, read free", tuner.ClockRange{}, ptr(false), tuner.ClockRange{}, "in effect", "unlocked", `{"locked":false,"max_mhz":0,"min_mhz":0}`, ""},
		// the readings say free, the tuner read nothing back: not locked
		{"lock, read free, none read back", lock, ptr(false), nil, "unknown", "unknown", `null`, ""},
		// only recommended: the lock in force is not the tuner's
		{"lock recommended, read locked", lock, ptr(true), nil, "recommended", "unknown", `null`, tuner.ModeRecommend},
	} {
		t.Run(c.name, func(t *testing.T) {
			mode := cmp.Or(c.mode, tuner.ModeEnforce)
			snap := &tenant.Snapshot{Readings: &gpu.Readings{Devices: []gpu.Device{{UUID: "GPU-x", Up: true, ClocksLocked: c.locked}}}}
			st := &tuner.Status{Mode: mode, Settings: []tuner.Setting{
				{GPU: "GPU-x", Knob: gpu.KnobLockedClocks, Target: c.target, Effective: c.effective, Mode: mode}}}
			v := newTunerView(simInfo, snap, st, 50)
			if len(v.Settings) != 1 {
				t.Fatalf("settings %+v", v.Settings)
			}
			s := v.Settings[0]
			eff, _ := json.Marshal(s.Effective)
			if s.State != c.state || s.Text[1] != c.text || string(eff) != c.json {
				t.Errorf("state %q, in effect %q, JSON %s; want %q, %q, %s", s.State, s.Text[1], eff, c.state, c.text, c.json)
			}
		})
	}
}

// The summary says whether the journal can be written, as
// vgpu_tuner_journal_writable does: an SRE reading /tuner during a full
// disk sees why the tuner makes no change, not only a decision's reason.
func TestTunerPageJournal(t *testing.T) {
	for _, c := range []struct {
		name    string
		journal *tuner.JournalStats
		html    string
		json    string
	}{
		{"writable", &tuner.JournalStats{}, `<dd id="journal">writable</dd>`, `{"writable":true}`},
		{"full disk", &tuner.JournalStats{WriteError: "tuner journal /j: no space left on device"},
			`<dd id="journal" class="bad">cannot be written: the tuner makes no change until it can (probed each round; restores go on): tuner journal /j: no space left on device</dd>`,
			`{"writable":false,"error":"tuner journal /j: no space left on device"}`},
		{"none", nil, `<dd id="journal">none (<code>--tuner.journal</code>)`, `null`},
	} {
		t.Run(c.name, func(t *testing.T) {
			body, got := summaryOf(t, &tuner.Status{Mode: tuner.ModeEnforce, Journal: c.journal}, "journal")
			if !strings.Contains(body, c.html) {
				t.Errorf("page has no %s", c.html)
			}
			if got != c.json && !(c.json == "null" && got == "") {
				t.Errorf("JSON journal %s, want %s", got, c.json)
			}
		})
	}
}
