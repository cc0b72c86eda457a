package nvml

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/tunertest"
)

// onePolicy proposes the same actions every round.
type onePolicy []tuner.Action

func (onePolicy) Name() string                         { return "one" }
func (p onePolicy) Decide(*tuner.State) []tuner.Action { return p }

// powerTuner is an enforcing tuner on f's backend that proposes act every
// round, with a journal at path and its log in logs.
func powerTuner(t *testing.T, f *fixture, act tuner.Action) (tu *tuner.Tuner, path string, logs *strings.Builder) {
	t.Helper()
	return tunerOn(t, f.backend(), onePolicy{act})
}

// tunerOn is an enforcing tuner on b with policy p, a journal at path and
// its log in logs.
func tunerOn(t *testing.T, b *Backend, p tuner.Decider) (tu *tuner.Tuner, path string, logs *strings.Builder) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "journal")
	j, err := tuner.OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	logs = &strings.Builder{}
	tu, err = tuner.New(tuner.Options{Policy: p, Actuators: tuner.ActuatorsOf(b), Journal: j, Clock: b.clock,
		Mode: tuner.ModeEnforce, Logger: log.NewLogfmtLogger(log.NewSyncWriter(logs))})
	if err != nil {
		t.Fatal(err)
	}
	return tu, path, logs
}

// The tuner reads a power limit back after NVML set it. A driver that
// holds the limit at 200 W whatever its constraints say (150 W asked):
// the decision, the journal's value last set and the target say 200 W,
// and a warning names the GPU, the knob, 150 W and 200 W. A read-back
// that fails (both NVML calls; the enforced limit alone falls back on the
// limit set) is no failed change: applied, 150 W,
// "set, not read back" with the calls that failed.
func TestPowerLimitReadBackThroughTheTuner(t *testing.T) {
	for _, tc := range []struct {
		name        string
		readFails   []string // the read-back calls that fail
		to, reason  string
		set         tuner.Watts
		log, noWarn string
	}{
		{"clamped", nil, "200W", "asked 150W, the GPU holds 200W (read back)", 200,
			`msg="the GPU holds another value than the tuner set" gpu=GPU-`, ""},
		{"enforced limit not read: the limit set", []string{"GetEnforcedPowerLimit"}, "200W", "asked 150W, the GPU holds 200W (read back)", 200,
			`msg="the GPU holds another value than the tuner set" gpu=GPU-`, ""},
		{"read fails", []string{"GetEnforcedPowerLimit", "GetPowerManagementLimit"}, "150W", "set, not read back: GPU ", 150,
			"nvmlDeviceGetEnforcedPowerLimit: ERROR_UNKNOWN; nvmlDeviceGetPowerManagementLimit: ERROR_UNKNOWN", "the GPU holds another value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			d := f.devs[0]
			var held atomic.Uint32
			held.Store(700000)
			// constraints that allow 150 W, and a driver that holds 200 W at least
			d.GetPowerManagementLimitConstraintsFunc = func() (uint32, uint32, nvml.Return) { return 100000, 700000, nvml.SUCCESS }
			d.SetPowerManagementLimitFunc = func(mw uint32) nvml.Return { held.Store(max(mw, 200000)); return nvml.SUCCESS }
			d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return held.Load(), f.inject(0, "GetEnforcedPowerLimit") }
			d.GetPowerManagementLimitFunc = func() (uint32, nvml.Return) { return held.Load(), f.inject(0, "GetPowerManagementLimit") }
			for _, call := range tc.readFails {
				f.fail(0, call, nvml.ERROR_UNKNOWN)
			}
			act := tuner.Action{Target: tuner.Target{GPU: d.UUID, Knob: gpu.KnobPowerLimit}, Current: tuner.Watts(700), Want: tuner.Watts(150), Reason: "test"}
			tu, path, logs := powerTuner(t, f, act)
			snap := tunertest.Snapshot(t0, []gpu.Device{{UUID: d.UUID, Up: true, Mode: gpu.SharingExclusive}}, nil)
			ds, err := tu.RunOnce(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != 1 || ds[0].Outcome != tuner.OutcomeApplied || ds[0].To != tc.to || !strings.Contains(ds[0].Reason, tc.reason) {
				t.Fatalf("decisions %+v, want one applied to %s, %q", ds, tc.to, tc.reason)
			}
			if got := held.Load(); got != 200000 {
				t.Errorf("the GPU holds %d mW, want 200000", got)
			}
			origs, _, err := tuner.ReadJournal(path)
			if err != nil || len(origs) != 1 || origs[0].Value != tuner.Watts(700) || origs[0].Set != tc.set {
				t.Errorf("journal: %+v, %v; want the original 700W, last set %v", origs, err, tc.set)
			}
			if st := tu.Status(); len(st.Settings) != 1 || st.Settings[0].Target != tc.set {
				t.Errorf("settings %+v, want the target %v", st.Settings, tc.set)
			}
			out := logs.String()
			if !strings.Contains(out, tc.log) || (tc.noWarn != "" && strings.Contains(out, tc.noWarn)) {
				t.Errorf("log lacks %q (or has %q):\n%s", tc.log, tc.noWarn, out)
			}
			if tc.set == 200 && !strings.Contains(out, "knob=power_limit asked=150W got=200W") {
				t.Errorf("log does not name 150W and 200W:\n%s", out)
			}
		})
	}
}

// A GPU whose limit set (management limit) is 700 W while another
// limiter (a BMC's cap) enforces 500 W, the readings' 500 W: the tuner's
// original is 700 W and the restore sets 700 W back; 600 W set, which the
// limit set holds while 500 W is enforced, is held as asked (no
// mismatch), its reason naming the 500 W enforced.
func TestPowerOriginalThroughTheTuner(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	d := f.devs[0]
	var set atomic.Uint32
	set.Store(700000)
	var sets []uint32
	d.GetPowerManagementLimitConstraintsFunc = func() (uint32, uint32, nvml.Return) { return 100000, 700000, nvml.SUCCESS }
	d.SetPowerManagementLimitFunc = func(mw uint32) nvml.Return { sets = append(sets, mw); set.Store(mw); return nvml.SUCCESS }
	d.GetPowerManagementLimitFunc = func() (uint32, nvml.Return) { return set.Load(), nvml.SUCCESS }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return min(set.Load(), 500000), nvml.SUCCESS }
	act := tuner.Action{Target: tuner.Target{GPU: d.UUID, Knob: gpu.KnobPowerLimit}, Current: tuner.Watts(500), Want: tuner.Watts(600), Reason: "test"}
	tu, path, logs := powerTuner(t, f, act)
	snap := tunertest.Snapshot(t0, []gpu.Device{{UUID: d.UUID, Up: true, Mode: gpu.SharingExclusive}}, nil)
	ds, err := tu.RunOnce(context.Background(), snap)
	const held = "held as set; another limiter (a BMC's or DCGM's cap, a thermal or board limit) enforces 500W"
	if err != nil || len(ds) != 1 || ds[0].Outcome != tuner.OutcomeApplied || ds[0].To != "600W" || !strings.Contains(ds[0].Reason, held) {
		t.Fatalf("decisions %+v, %v; want one applied to 600W, %q", ds, err, held)
	}
	if strings.Contains(logs.String(), "the GPU holds another value") {
		t.Errorf("a set held as asked warned of as a mismatch:\n%s", logs.String())
	}
	origs, _, err := tuner.ReadJournal(path)
	if err != nil || len(origs) != 1 || origs[0].Value != tuner.Watts(700) || origs[0].Set != tuner.Watts(600) {
		t.Fatalf("journal: %+v, %v; want the original 700W, last set 600W", origs, err)
	}
	sets = nil
	if _, err := tu.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(sets) != 1 || sets[0] != 700000 {
		t.Errorf("restore set %v mW, want 700000", sets)
	}
}

// PowerLimitInForce reads the enforced limit (else the limit set), the
// limit set (0 where not read) and the default limit, in watts; a default
// that cannot be read is 0 (not known), which the tuner does not take for
// a default held.
func TestPowerLimitInForce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails []string
		want  gpu.PowerLimit
		err   string
	}{
		{"all read", nil, gpu.PowerLimit{InForceW: 250.5, SetW: 300, DefaultW: 700}, ""},
		{"enforced not read: the limit set", []string{"GetEnforcedPowerLimit"}, gpu.PowerLimit{InForceW: 300, SetW: 300, DefaultW: 700}, ""},
		{"limit set not read", []string{"GetPowerManagementLimit"}, gpu.PowerLimit{InForceW: 250.5, DefaultW: 700}, ""},
		{"default not read", []string{"GetPowerManagementDefaultLimit"}, gpu.PowerLimit{InForceW: 250.5, SetW: 300}, ""},
		{"neither limit read", []string{"GetEnforcedPowerLimit", "GetPowerManagementLimit"}, gpu.PowerLimit{},
			"nvmlDeviceGetEnforcedPowerLimit: ERROR_UNKNOWN; nvmlDeviceGetPowerManagementLimit: ERROR_UNKNOWN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			d := f.devs[0]
			d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 250500, f.inject(0, "GetEnforcedPowerLimit") }
			d.GetPowerManagementLimitFunc = func() (uint32, nvml.Return) { return 300000, f.inject(0, "GetPowerManagementLimit") }
			d.GetPowerManagementDefaultLimitFunc = func() (uint32, nvml.Return) {
				return 700000, f.inject(0, "GetPowerManagementDefaultLimit")
			}
			for _, call := range tc.fails {
				f.fail(0, call, nvml.ERROR_UNKNOWN)
			}
			got, err := f.backend().PowerLimitInForce(context.Background(), d.UUID)
			if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v, %v; want %+v, %q", got, err, tc.want, tc.err)
			}
		})
	}
}
