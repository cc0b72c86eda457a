package tuner

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

func TestBurn(t *testing.T) {
	for _, tc := range []struct {
		att, q, want float64
	}{
		{1, 0.99, 0},
		{0.99, 0.99, 1},
		{0.95, 0.99, 5},
		{0.9944, 0.99, 0.56},
		{0.5, 1, 500}, // the budget is floored at 0.1%
	} {
		if got := Burn(tc.att, tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Burn(%v, %v) = %v, want %v", tc.att, tc.q, got, tc.want)
		}
	}
}

// roundSnap is one MPS GPU with tenant chat (latency, p99) on it, and GPU 1
// with nobody on it.
func roundSnap() *tenant.Snapshot {
	s := snapshot(t0, []gpu.Device{{UUID: uuid0, Index: 0, Up: true, Mode: gpu.SharingMPS}, {UUID: "GPU-1", Index: 1, Up: true, Mode: gpu.SharingTimeSlice}},
		[]tenant.Usage{{Tenant: "chat", UUID: uuid0}})
	s.SLOs = []tenant.SLOStatus{{Tenant: "chat", Status: latency.Status{SourceUp: true, SourceRead: true, Measured: true, Quantile: 0.99, GoodKnown: true}}}
	return s
}

// Each GPU's line says what the round did there, or why it held.
func TestGPURounds(t *testing.T) {
	burn := func(b float64) []TenantBurn {
		return []TenantBurn{{Tenant: "chat", Window: time.Minute, Requests: 100, Quantile: 0.99, Burn: b, Known: true}}
	}
	mps := mpsAction(7, 1, 0.5)
	held := mps
	held.Held = "dwell: mps_active_threads changed 15s ago, next change allowed in 5s"
	dec := func(o Outcome, guard, reason string) Decision {
		return Decision{GPU: uuid0, Tenant: "embed", Knob: gpu.KnobMPSActiveThreads, From: "100%", To: "50%", Outcome: o, Guard: guard, Reason: reason}
	}
	for _, tc := range []struct {
		name     string
		mode     Mode
		killed   bool
		burns    []TenantBurn
		actions  []Action
		held     []Action
		out      []Decision
		kind     RoundKind
		why      string
		guard    string
		holding  bool
		gpu1Kind RoundKind
	}{
		{name: "within budget", mode: ModeEnforce, burns: burn(0.4), kind: RoundWithinBudget, holding: true,
			why: "every SLO on this GPU is within budget over the last 1m0s (highest burn: chat 0.40x)"},
		{name: "over budget, nothing proposed", mode: ModeEnforce, burns: burn(3), kind: RoundNoChange, holding: true,
			why: "chat burns its error budget 3.00x over the last 1m0s, but the policy proposed no change this round"},
		{name: "no requests", mode: ModeEnforce, burns: []TenantBurn{{Tenant: "chat", Window: time.Minute}}, kind: RoundNoSignal, holding: true,
			why: "no latency tenant on this GPU ended a request"},
		{name: "window just started", mode: ModeEnforce, burns: []TenantBurn{{Tenant: "chat"}}, kind: RoundNoSignal, holding: true,
			why: "no SLO signal yet: the tuner's window starts at its first reading"},
		{name: "applied", mode: ModeEnforce, burns: burn(3), actions: []Action{mps}, out: []Decision{dec(OutcomeApplied, "", "chat violates its SLO")},
			kind: RoundActing, why: "changed mps_active_threads of embed 100% → 50%"},
		{name: "guarded", mode: ModeEnforce, burns: burn(3), actions: []Action{mps},
			out:  []Decision{dec(OutcomeGuarded, GuardDwell, "chat violates its SLO; refused by dwell: changed 15s ago; dwell 20s")},
			kind: RoundGuarded, guard: GuardDwell, holding: true,
			why: "the dwell guard refused mps_active_threads of embed 100% → 50%: changed 15s ago; dwell 20s"},
		{name: "held for the dwell", mode: ModeEnforce, burns: burn(3), held: []Action{held}, kind: RoundHeld, holding: true,
			why: "dwell: mps_active_threads changed 15s ago, next change allowed in 5s (held back: mps_active_threads of embed 100% → 50%)"},
		{name: "held, recommend", mode: ModeRecommend, burns: burn(3), held: []Action{held}, kind: RoundRecommend, holding: true, gpu1Kind: RoundRecommend,
			why: "the tuner changes nothing on it; dwell: mps_active_threads changed 15s ago"},
		{name: "held and guarded: the refusal", mode: ModeEnforce, burns: burn(3), actions: []Action{mps}, held: []Action{held},
			out:  []Decision{dec(OutcomeGuarded, GuardRate, "x; refused by rate: over")},
			kind: RoundGuarded, guard: GuardRate, holding: true, why: "the rate guard refused"},
		{name: "actuator failed", mode: ModeEnforce, burns: burn(3), actions: []Action{mps}, out: []Decision{dec(OutcomeFailed, "", "boom")},
			kind: RoundFailed, holding: true, why: "the actuator failed mps_active_threads of embed 100% → 50%: boom"},
		{name: "asked already, waiting", mode: ModeEnforce, burns: burn(3), actions: []Action{mps}, kind: RoundWaiting, holding: true,
			why: "was asked for already and is waiting"},
		{name: "kill switch", mode: ModeEnforce, killed: true, burns: burn(3), actions: []Action{mps},
			out:  []Decision{dec(OutcomeGuarded, GuardKillSwitch, "x; refused by kill_switch: kill switch engaged")},
			kind: RoundKillSwitch, holding: true, why: "the kill switch is on", gpu1Kind: RoundKillSwitch},
		{name: "recommend, recommended", mode: ModeRecommend, burns: burn(3), actions: []Action{mps}, out: []Decision{dec(OutcomeRecommended, "", "x")},
			kind: RoundRecommend, holding: true, gpu1Kind: RoundRecommend,
			why: "the GPU is in recommend mode, the tuner changes nothing on it; it recommends mps_active_threads of embed 100% → 50%"},
		{name: "recommend, within budget", mode: ModeRecommend, burns: burn(0.2), kind: RoundRecommend, holding: true, gpu1Kind: RoundRecommend,
			why: "the GPU is in recommend mode, the tuner changes nothing on it; every SLO on this GPU is within budget"},
		{name: "recommend, guarded", mode: ModeRecommend, burns: burn(3), actions: []Action{mps},
			out:  []Decision{dec(OutcomeGuarded, GuardDeadBand, "x; refused by dead_band: a 1% step")},
			kind: RoundRecommend, guard: GuardDeadBand, holding: true, gpu1Kind: RoundRecommend,
			why: "recommend mode, the tuner changes nothing on it; the dead_band guard refused mps_active_threads of embed 100% → 50%: a 1% step"},
		{name: "off", mode: ModeOff, burns: burn(3), kind: RoundOff, holding: true, why: "the tuner is off on this GPU", gpu1Kind: RoundOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := gpuRounds(roundInput{snap: roundSnap(), burns: tc.burns, modeOf: func(string, int) Mode { return tc.mode },
				killed: tc.killed, actions: tc.actions, held: tc.held, out: tc.out})
			if len(rs) != 2 {
				t.Fatalf("%d GPU lines, want 2: %+v", len(rs), rs)
			}
			r := rs[0]
			if r.Kind != tc.kind || !strings.Contains(r.Why, tc.why) || r.Guard != tc.guard || r.Holding() != tc.holding || r.Mode != tc.mode {
				t.Errorf("GPU 0: %+v (holding %v), want kind %s, why containing %q, guard %q, holding %v", r, r.Holding(), tc.kind, tc.why, tc.guard, tc.holding)
			}
			// GPU 1 has no latency tenant and no decision.
			want := tc.gpu1Kind
			if want == "" {
				want = RoundNoSignal
			}
			if rs[1].GPUIndex != 1 || rs[1].Kind != want {
				t.Errorf("GPU 1: %+v, want kind %s", rs[1], want)
			}
		})
	}
}

// A latency tenant whose SLO the policy cannot judge (its source down or
// not read yet, its requests below min_throughput) is why the GPU holds,
// whatever burn its source's last minute still shows; a source not read yet
// is not said to be down.
func TestGPURoundUnjudged(t *testing.T) {
	burns := []TenantBurn{{Tenant: "chat", Window: time.Minute, Requests: 1050, Quantile: 0.99, Burn: 3.33, Known: true}}
	for _, tc := range []struct {
		name  string
		class gpu.TenantClass
		st    latency.Status
		floor float64
		kind  RoundKind
		why   string
	}{
		{"source down", gpu.ClassLatency, latency.Status{SourceRead: true, Quantile: 0.99, GoodKnown: true}, 0, RoundNoSignal,
			"chat's latency source is down: holding"},
		{"source not read yet", gpu.ClassLatency, latency.Status{Quantile: 0.99, GoodKnown: true}, 0, RoundNoSignal,
			"chat's latency source has not been read yet: holding"},
		{"read once: a baseline, no window yet", gpu.ClassLatency, latency.Status{SourceUp: true, SourceRead: true, Quantile: 0.99, GoodKnown: true}, 0, RoundNoSignal,
			"chat's latency source has no window yet"},
		{"below min_throughput", gpu.ClassLatency, latency.Status{SourceUp: true, SourceRead: true, Measured: true, Quantile: 0.99, GoodKnown: true, Window: 30 * time.Second, WindowRequests: 30}, 5, RoundNoSignal,
			"chat's requests come below its SLO's min_throughput (1/s over its 30s window, floor 5/s): holding"},
		{"at min_throughput: the burn", gpu.ClassLatency, latency.Status{SourceUp: true, SourceRead: true, Measured: true, Quantile: 0.99, GoodKnown: true, Window: 30 * time.Second, WindowRequests: 150}, 5, RoundNoChange,
			"chat burns its error budget 3.33x"},
		{"not a latency tenant: the burn", gpu.ClassBatch, latency.Status{Quantile: 0.99, GoodKnown: true}, 0, RoundNoChange,
			"chat burns its error budget 3.33x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := roundSnap()
			snap.Usage[0].Class = tc.class
			snap.SLOs[0].Status, snap.SLOs[0].MinThroughput = tc.st, tc.floor
			r := gpuRounds(roundInput{snap: snap, burns: burns, modeOf: func(string, int) Mode { return ModeEnforce }})[0]
			if r.Kind != tc.kind || !strings.Contains(r.Why, tc.why) {
				t.Errorf("%+v, want kind %s, why containing %q", r, tc.kind, tc.why)
			}
		})
	}
}

// A GPU's round says the journal holds its change back by the executor's
// mark (Tuner.noteJournalHeld), not by a phrase of the decision's reason:
// a reason worded otherwise still says so, and a policy's reason quoting
// the phrase does not.
func TestGPURoundHeldByJournal(t *testing.T) {
	held := Decision{GPU: uuid0, Tenant: "embed", Knob: gpu.KnobMPSActiveThreads, From: "100%", To: "50%", Outcome: OutcomeRecommended,
		Reason: "chat violates its SLO; no change while the journal is down"}
	quoting := held
	quoting.Reason = "a policy says: " + journalHeld
	for _, tc := range []struct {
		name string
		d    Decision
		mark bool
	}{
		{"held, reworded", held, true},
		{"a reason quoting the phrase", quoting, false},
	} {
		r := gpuRounds(roundInput{snap: roundSnap(), modeOf: func(string, int) Mode { return ModeEnforce }, actions: []Action{mpsAction(7, 1, 0.5)}, out: []Decision{tc.d},
			journalHeld: map[string]bool{uuid0: tc.mark}})[0]
		if r.Kind != RoundRecommend || strings.HasSuffix(r.Why, " ("+journalHeld+")") != tc.mark {
			t.Errorf("%s: %+v, want the journal named %v", tc.name, r, tc.mark)
		}
	}
}

// A GPU that could not be read says so.
func TestGPURoundDown(t *testing.T) {
	s := snapshot(t0, []gpu.Device{{UUID: uuid0, Err: "lost"}}, nil)
	rs := gpuRounds(roundInput{snap: s, modeOf: func(string, int) Mode { return ModeEnforce }})
	if len(rs) != 1 || rs[0].Kind != RoundDown || rs[0].Why != "the GPU could not be read: lost" {
		t.Errorf("%+v", rs)
	}
}

// The fast window's figures: burn from attainment and quantile, unknown
// without requests, and none while the latency source is down (what the
// window holds is from before it went) or not read yet (not said to be
// down).
func TestTenantBurns(t *testing.T) {
	s := roundSnap()
	s.SLOs = append(s.SLOs, tenant.SLOStatus{Tenant: "api", Status: latency.Status{SourceUp: true, SourceRead: true, Measured: true, Quantile: 0.9, GoodKnown: true}},
		tenant.SLOStatus{Tenant: "nobuckets", Status: latency.Status{SourceUp: true, SourceRead: true, Measured: true, Quantile: 0.9}},
		tenant.SLOStatus{Tenant: "gone", Status: latency.Status{SourceRead: true, Quantile: 0.99, GoodKnown: true}},
		tenant.SLOStatus{Tenant: "new", Status: latency.Status{Quantile: 0.99, GoodKnown: true}})
	got := tenantBurns(s, map[string]FastSLO{"chat": {Over: time.Minute, Total: 200, Good: 190}, "api": {Over: 30 * time.Second},
		"gone": {Over: time.Minute, Total: 100, Good: 50}, "new": {}})
	if len(got) != 4 || got[0].Tenant != "api" || got[0].Known || got[0].SourceDown || got[0].SourceNotRead || got[0].Window != 30*time.Second ||
		got[1].Tenant != "chat" || !got[1].Known || got[1].SourceDown || got[1].SourceNotRead || math.Abs(got[1].Burn-5) > 1e-9 || got[1].Attainment != 0.95 || got[1].Requests != 200 ||
		got[2].Tenant != "gone" || got[2].Known || !got[2].SourceDown || got[2].SourceNotRead || got[2].Burn != 0 ||
		got[3].Tenant != "new" || got[3].Known || got[3].SourceDown || !got[3].SourceNotRead {
		t.Errorf("%+v", got)
	}
}

// The ring keeps the newest points, oldest first, and the copies it hands
// out do not change when it moves on.
func TestRoundRing(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 10} {
		r := newRoundRing(4)
		for i := range n {
			r.add(RoundPoint{At: t0.Add(time.Duration(i) * time.Second)})
		}
		got := r.points()
		want := min(n, 4)
		if len(got) != want {
			t.Fatalf("%d added: %d points, want %d", n, len(got), want)
		}
		for i, p := range got {
			if at := t0.Add(time.Duration(n-want+i) * time.Second); !p.At.Equal(at) {
				t.Errorf("%d added: point %d at %s, want %s", n, i, p.At, at)
			}
		}
		if n > 0 {
			r.add(RoundPoint{At: t0.Add(time.Hour)})
			if !got[len(got)-1].At.Equal(t0.Add(time.Duration(n-1) * time.Second)) {
				t.Errorf("%d added: a handed-out copy changed", n)
			}
		}
	}
}

func TestNumeric(t *testing.T) {
	for _, tc := range []struct {
		v    Value
		want float64
		ok   bool
	}{
		{Fraction(0.25), 0.25, true},
		{Watts(500), 500, true},
		{Watts(0), 0, false},
		{Level(gpu.TimeSliceShort), 0, true},
		{Level(gpu.TimeSliceLong), 3, true},
		{Level("bogus"), 0, false},
		{ClockRange{MinMHz: 1000, MaxMHz: 1980}, 1980, true},
		{ClockRange{}, 0, true},
		{Scheduler{Policy: gpu.VGPUPolicyFixedShare}, 2, true},
		{Layout("1g.10gb"), 0, false},
	} {
		if got, ok := Numeric(tc.v); got != tc.want || ok != tc.ok {
			t.Errorf("Numeric(%v) = %v, %v; want %v, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

// The tuner's status carries each round's burns, GPU lines and history,
// at the times of its injected clock, bounded at HistoryPoints.
func TestStatusHistory(t *testing.T) {
	limit, frac := 500.0, 0.4
	act := &recorder{}
	tu, clk := newTestTuner(t, ModeEnforce, act, nil, nil)
	good := 0.0
	for i := range HistoryPoints + 10 {
		clk.Advance(15 * time.Second)
		good += 99
		s := snapshot(clk.Now(), []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, PowerLimitW: &limit,
			ComputeTimeSlice: gpu.TimeSliceDefault, Processes: []gpu.Process{mpsProc(7, &frac)}}},
			[]tenant.Usage{{Tenant: "chat", UUID: uuid0}, {Tenant: "batch", UUID: uuid0, PIDs: []uint32{7}}})
		s.SLOs = []tenant.SLOStatus{{Tenant: "chat", Status: latency.Status{SourceUp: true, SourceRead: true, Measured: true, Quantile: 0.9, GoodKnown: true,
			RequestsTotal: float64(100 * (i + 1)), GoodRequestsTotal: good}}}
		if _, err := tu.RunOnce(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	st := tu.Status()
	if len(st.History) != HistoryPoints {
		t.Fatalf("%d history points, want %d", len(st.History), HistoryPoints)
	}
	first, last := st.History[0], st.History[len(st.History)-1]
	if !last.At.Equal(clk.Now()) || !first.At.Equal(clk.Now().Add(-(HistoryPoints-1)*15*time.Second)) {
		t.Errorf("history from %s to %s", first.At, last.At)
	}
	mps := SettingKey{GPU: uuid0, Tenant: "batch", Knob: gpu.KnobMPSActiveThreads, PID: 7}
	power := SettingKey{GPU: uuid0, Knob: gpu.KnobPowerLimit}
	if math.Abs(last.Burn["chat"]-0.1) > 1e-9 || last.Values[mps] != 0.4 || last.Values[power] != 500 || len(last.Values) != 2 {
		t.Errorf("last point %+v", last)
	}
	if len(st.Burns) != 1 || st.FastWindow != time.Minute || st.Burns[0].Window != time.Minute {
		t.Errorf("burns %+v over %v", st.Burns, st.FastWindow)
	}
	if len(st.GPUs) != 1 || st.GPUs[0].Kind != RoundWithinBudget {
		t.Errorf("GPU lines %+v", st.GPUs)
	}
}

// An unwatched tuner (a policy run offline) decides as a watched one does
// and keeps no status of its rounds: Status stays the one New published,
// and the latest decisions, which only the status shows, are not kept.
func TestUnwatchedKeepsNoStatus(t *testing.T) {
	limit, frac := 500.0, 0.4
	run := func(unwatched bool) ([]Decision, *Status, int) {
		clk := gpu.NewManualClock(t0)
		tu, err := New(Options{Policy: fixed([]Action{mpsAction(7, 0.4, 0.3)}), Actuators: ActuatorsOf(&recorder{}),
			Clock: clk, Mode: ModeEnforce, Unwatched: unwatched})
		if err != nil {
			t.Fatal(err)
		}
		var all []Decision
		for range 3 {
			clk.Advance(15 * time.Second)
			s := snapshot(clk.Now(), []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, PowerLimitW: &limit,
				Processes: []gpu.Process{mpsProc(7, &frac)}}},
				[]tenant.Usage{{Tenant: "batch", UUID: uuid0, PIDs: []uint32{7}}})
			d, err := tu.RunOnce(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, d...)
		}
		return all, tu.Status(), len(tu.recent)
	}
	watchedD, watched, watchedRecent := run(false)
	unwatchedD, unwatched, unwatchedRecent := run(true)
	if len(watchedD) == 0 || !reflect.DeepEqual(watchedD, unwatchedD) {
		t.Errorf("decisions watched %+v, unwatched %+v: want the same, and some", watchedD, unwatchedD)
	}
	if len(watched.History) != 3 || watched.LastRun.IsZero() || len(watched.Settings) == 0 {
		t.Errorf("watched status: %d history points, last run %s, settings %+v", len(watched.History), watched.LastRun, watched.Settings)
	}
	if unwatched == nil || len(unwatched.History) != 0 || !unwatched.LastRun.IsZero() || len(unwatched.Settings) != 0 {
		t.Errorf("unwatched status %+v, want the one New published", unwatched)
	}
	if watchedRecent != len(watchedD) || unwatchedRecent != 0 {
		t.Errorf("latest decisions kept: watched %d, unwatched %d; want %d and none", watchedRecent, unwatchedRecent, len(watchedD))
	}
}
