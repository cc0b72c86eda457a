package tuner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// clampingGPU is recorder with a power limit read back: the GPU holds a
// limit set at no less than minW (0 restores defW, where known), another
// limiter enforces no more than capW (where not 0), and a read fails with
// readErr.
type clampingGPU struct {
	recorder
	minW, defW, limitW, capW float64
	readErr                  error
}

func (c *clampingGPU) SetPowerLimit(ctx context.Context, uuid string, w float64) error {
	if err := c.recorder.SetPowerLimit(ctx, uuid, w); err != nil {
		return err
	}
	switch {
	case w == 0 && c.defW > 0:
		c.limitW = c.defW
	case w == 0: // (a default not known: the limit held stays)
	default:
		c.limitW = max(w, c.minW)
	}
	return nil
}

func (c *clampingGPU) PowerLimitInForce(context.Context, string) (gpu.PowerLimit, error) {
	enforced := c.limitW
	if c.capW > 0 {
		enforced = min(enforced, c.capW)
	}
	return gpu.PowerLimit{InForceW: enforced, SetW: c.limitW, DefaultW: c.defW}, c.readErr
}

// A power limit is read back after it is set: one the GPU holds otherwise
// is the value the decision, the journal (the restore's "last set") and
// the target hold, the reason and a warning (once per distinct mismatch)
// name what was asked and what the GPU has; a read-back that fails leaves
// the change applied, "set, not read back" (and the original, not read
// either, is the reading's, with a warning). The original set back at
// exit is the one before the change either way.
func TestPowerLimitReadBack(t *testing.T) {
	const mismatch = "the GPU holds another value than the tuner set"
	for _, tc := range []struct {
		name       string
		want       Watts
		readErr    error
		to, reason string // the decision's To, and what its reason says
		set        Watts  // the journal's value last set, after the third round
		warn       string // the first warning's words, "" for none
		warns      int    // the warnings after three rounds
	}{
		{"clamped", 150, nil, "200W", "asked 150W, the GPU holds 200W (read back)", 250,
			mismatch + " gpu=GPU-0 knob=power_limit asked=150W got=200W", 2},
		{"as asked", 450, nil, "450W", "", 450, "", 0},
		{"default as asked", 0, nil, "default", "", 0, "", 0},
		{"read fails", 150, errors.New("nvmlDeviceGetEnforcedPowerLimit: ERROR_UNKNOWN"), "150W",
			"set, not read back: nvmlDeviceGetEnforcedPowerLimit: ERROR_UNKNOWN", 150,
			"tuner set a value it could not read back gpu=GPU-0 knob=power_limit asked=150W", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			host := &clampingGPU{minW: 200, defW: 700, limitW: 700, readErr: tc.readErr}
			path := filepath.Join(t.TempDir(), "journal")
			j := openJournal(t, path)
			defer j.Close()
			act := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: tc.want, Reason: "test"}
			clk := gpu.NewManualClock(t0)
			tu, err := New(Options{Policy: fixed{act}, Actuators: ActuatorsOf(host), Journal: j, Clock: clk, Mode: ModeEnforce,
				Logger: log.NewLogfmtLogger(log.NewSyncWriter(&logs))})
			if err != nil {
				t.Fatal(err)
			}
			for round := range 2 { // the same mismatch a second time: no second warning
				clk.Advance(time.Minute)
				ds, err := tu.RunOnce(context.Background(), emptySnap(clk.Now()))
				if err != nil {
					t.Fatal(err)
				}
				if len(ds) != 1 || ds[0].Outcome != OutcomeApplied || ds[0].To != tc.to {
					t.Fatalf("round %d: decisions %+v, want one applied to %s", round, ds, tc.to)
				}
				if tc.reason != "" && !strings.Contains(ds[0].Reason, tc.reason) {
					t.Errorf("round %d: reason %q lacks %q", round, ds[0].Reason, tc.reason)
				}
				if tc.reason == "" && ds[0].Reason != "test" {
					t.Errorf("round %d: reason %q, want the action's alone", round, ds[0].Reason)
				}
			}
			if tc.warn != "" && !strings.Contains(strings.ReplaceAll(logs.String(), `"`, ""), "msg="+tc.warn) {
				t.Errorf("log lacks %q:\n%s", tc.warn, logs.String())
			}
			host.minW = 250 // another mismatch (clamped): warned too
			clk.Advance(time.Minute)
			if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(logs.String(), "level=warn"); n != tc.warns {
				t.Errorf("%d warnings, want %d:\n%s", n, tc.warns, logs.String())
			}
			origs, _, err := ReadJournal(path)
			if err != nil || len(origs) != 1 {
				t.Fatalf("journal: %v, %v", origs, err)
			}
			if origs[0].Value != Watts(700) || origs[0].Set != tc.set {
				t.Errorf("journal: original %v, last set %v; want 700W, %v", origs[0].Value, origs[0].Set, tc.set)
			}
			st := tu.Status()
			if len(st.Settings) != 1 || st.Settings[0].Target != tc.set {
				t.Errorf("settings %+v, want the target %v", st.Settings, tc.set)
			}
			host.Calls = nil
			ds, err := tu.Restore(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(host.Calls) != 1 || host.Calls[0] != "SetPowerLimit(GPU-0,700)" || len(ds) != 1 || !strings.HasPrefix(ds[0].From, tc.set.String()) {
				t.Errorf("restore: calls %q, decisions %+v; want 700W set back from %v", host.Calls, ds, tc.set)
			}
		})
	}
}

// A restore is read back too: an original the GPU no longer takes (100 W,
// below what it holds now) is set back and closed, the decision and the
// journal's reason saying what the GPU holds.
func TestRestoreReadBack(t *testing.T) {
	host := &clampingGPU{minW: 200, defW: 700, limitW: 100}
	path := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, path)
	defer j.Close()
	act := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(100), Want: Watts(300), Reason: "test"}
	tu, err := New(Options{Policy: fixed{act}, Actuators: ActuatorsOf(host), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if ds, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil || len(ds) != 1 || ds[0].To != "300W" {
		t.Fatalf("round: %+v, %v", ds, err)
	}
	ds, err := tu.Restore(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const why = "asked 100W, the GPU holds 200W (read back)"
	if len(ds) != 1 || ds[0].Outcome != OutcomeRestored || ds[0].To != "200W" || !strings.Contains(ds[0].Reason, why) {
		t.Errorf("restore decisions %+v, want restored to 200W, %q", ds, why)
	}
	if n := len(j.Originals()); n != 0 {
		t.Errorf("%d originals open after the restore", n)
	}
	data, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(data), why) {
		t.Errorf("journal lacks %q: %v\n%s", why, err, data)
	}
}

// The guards learn the value asked, not the one read back: the baselines'
// retry, having asked for 150 W that the GPU holds at 200 W, does not ask
// for 150 W again before its wait, where taught 200 W it would ask for
// 150 W every round.
func TestReadBackGuardsLearnAsked(t *testing.T) {
	host := &clampingGPU{minW: 200, defW: 700, limitW: 700}
	act := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(150), Reason: "test"}
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: fixed{act}, Guards: []Guard{&Retry{After: time.Hour}}, Actuators: ActuatorsOf(host),
		Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		clk.Advance(time.Minute)
		ds, err := tu.RunOnce(context.Background(), emptySnap(clk.Now()))
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 && (len(ds) != 1 || ds[0].To != "200W") {
			t.Fatalf("first round: decisions %+v, want one applied, read back as 200W", ds)
		}
		if round > 0 && len(ds) != 0 {
			t.Errorf("round %d: decisions %+v, want none (retry: 150W asked already)", round, ds)
		}
	}
	if len(host.Calls) != 1 {
		t.Errorf("actuator calls %q, want the one set of 150W", host.Calls)
	}
}

// A mismatch is warned of again once the GPU held a limit as asked in
// between (150 W held at 200 W, 450 W as asked, 150 W at 200 W again:
// two warnings); a default limit asked of a GPU whose default is not
// known is "set, not read back", not a limit held other than asked.
func TestReadBackWarnings(t *testing.T) {
	var logs strings.Builder
	host := &clampingGPU{minW: 200, defW: 700, limitW: 700}
	asks := []Watts{150, 450, 150, 0}
	round := 0
	policy := deciderFunc(func(*State) []Action {
		return []Action{{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: asks[round], Reason: "test"}}
	})
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: policy, Actuators: ActuatorsOf(host), Clock: clk, Mode: ModeEnforce,
		Logger: log.NewLogfmtLogger(log.NewSyncWriter(&logs))})
	if err != nil {
		t.Fatal(err)
	}
	var last Decision
	for round = range asks {
		if asks[round] == 0 {
			host.defW = 0 // (set: the GPU keeps the limit it holds; read: no default)
		}
		clk.Advance(time.Minute)
		ds, err := tu.RunOnce(context.Background(), emptySnap(clk.Now()))
		if err != nil || len(ds) != 1 {
			t.Fatalf("round %d: %+v, %v", round, ds, err)
		}
		last = ds[0]
	}
	if n := strings.Count(logs.String(), "the GPU holds another value than the tuner set"); n != 2 {
		t.Errorf("%d mismatch warnings, want 2:\n%s", n, logs.String())
	}
	const unread = "set, not read back: the GPU's default power limit is not known"
	if last.To != "default" || !strings.Contains(last.Reason, unread) {
		t.Errorf("default asked, its value unknown: decision %+v, want to default, %q", last, unread)
	}
}

// A rollback's limit is read back too: 100 W set back after the clock
// lock of the same plan failed, the GPU holding 200 W, is rolled back to
// 200 W, its reason saying what was asked.
func TestRollbackReadBack(t *testing.T) {
	host := &clampingGPU{minW: 200, defW: 700, limitW: 100}
	host.Errs = map[string]error{"LockClocks": errors.New("nvmlDeviceSetGpuLockedClocks: ERROR_UNKNOWN")}
	pow := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(100), Want: Watts(300), Reason: "test"}
	clk := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}, Current: ClockRange{}, Want: ClockRange{MinMHz: 1000, MaxMHz: 1500}, Reason: "test"}
	tu, err := New(Options{Policy: fixed{pow, clk}, Actuators: ActuatorsOf(host), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := tu.RunOnce(context.Background(), emptySnap(t0))
	if err != nil {
		t.Fatal(err)
	}
	const why = "asked 100W, the GPU holds 200W (read back)"
	if len(ds) != 3 || ds[2].Outcome != OutcomeRolledBack || ds[2].To != "200W" || !strings.Contains(ds[2].Reason, why) {
		t.Errorf("decisions %+v, want the power limit rolled back to 200W, %q", ds, why)
	}
}
