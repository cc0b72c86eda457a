package tuner

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A GPU whose limit set is 700 W while another limiter (a BMC's cap)
// enforces 500 W, the readings carrying 500 W: the original journaled
// before the tuner's first change, and set back at exit, is the limit set
// (700 W), not the reading; a set the limit set holds while the cap
// enforces less is held as asked, its reason naming the limit enforced,
// and no mismatch is warned of. An actuator that reads no limit set keeps
// the reading as the original, with a warning.
func TestPowerOriginalIsLimitSet(t *testing.T) {
	for _, tc := range []struct {
		name       string
		want       Watts
		setRead    bool   // the actuator reads the limit set
		orig       Watts  // the original journaled and set back
		to, reason string // the decision's To, and what its reason says ("" for the action's alone)
		warn       string // a warning's words, "" for none
	}{
		{"lowered under the cap", 400, true, 700, "400W", "", ""},
		{"raised over the cap", 600, true, 700, "600W",
			"held as set; another limiter (a BMC's or DCGM's cap, a thermal or board limit) enforces 500W", ""},
		{"limit set not read", 400, false, 500, "400W", "",
			"tuner keeps the power limit read as the original: the limit set could not be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			host := &clampingGPU{defW: 700, limitW: 700, capW: 500}
			var act gpu.ClockPowerActuator = host
			if !tc.setRead {
				act = &noSetRead{host}
			}
			path := filepath.Join(t.TempDir(), "journal")
			j := openJournal(t, path)
			defer j.Close()
			a := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(500), Want: tc.want, Reason: "test"}
			tu, err := New(Options{Policy: fixed{a}, Actuators: ActuatorsOf(act), Journal: j, Clock: gpu.NewManualClock(t0),
				Mode: ModeEnforce, Logger: log.NewLogfmtLogger(log.NewSyncWriter(&logs))})
			if err != nil {
				t.Fatal(err)
			}
			ds, err := tu.RunOnce(context.Background(), emptySnap(t0))
			if err != nil || len(ds) != 1 || ds[0].Outcome != OutcomeApplied || ds[0].To != tc.to {
				t.Fatalf("decisions %+v, %v; want one applied to %s", ds, err, tc.to)
			}
			if (tc.reason == "" && ds[0].Reason != "test") || !strings.Contains(ds[0].Reason, tc.reason) {
				t.Errorf("reason %q, want %q", ds[0].Reason, tc.reason)
			}
			out := strings.ReplaceAll(logs.String(), `"`, "")
			if n := strings.Count(out, "level=warn"); (tc.warn == "") != (n == 0) || !strings.Contains(out, tc.warn) {
				t.Errorf("%d warnings, want %q:\n%s", n, tc.warn, out)
			}
			origs, _, err := ReadJournal(path)
			if err != nil || len(origs) != 1 || origs[0].Value != tc.orig {
				t.Fatalf("journal: %+v, %v; want the original %v", origs, err, tc.orig)
			}
			host.Calls = nil
			if _, err := tu.Restore(context.Background()); err != nil {
				t.Fatal(err)
			}
			if want := "SetPowerLimit(GPU-0," + strings.TrimSuffix(tc.orig.String(), "W") + ")"; len(host.Calls) != 1 || host.Calls[0] != want {
				t.Errorf("restore calls %q, want %s", host.Calls, want)
			}
		})
	}
}

// noSetRead is a power actuator that reads back no limit set (a reader
// that reports SetW 0).
type noSetRead struct{ *clampingGPU }

func (n *noSetRead) PowerLimitInForce(ctx context.Context, uuid string) (gpu.PowerLimit, error) {
	pl, err := n.clampingGPU.PowerLimitInForce(ctx, uuid)
	pl.SetW = 0
	return pl, err
}
