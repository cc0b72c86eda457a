package tuner

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// listingMover is a placement actuator with a capability list.
type listingMover struct {
	mover
	caps []gpu.Knob
}

func (l *listingMover) Capabilities(string) []gpu.Knob { return l.caps }

// hook is a rebalancing hook that lists no capabilities.
type hook struct{}

func (hook) Rebalance(context.Context, gpu.Plan) error { return nil }

// listingHook is a rebalancing hook that lists placement on every GPU.
type listingHook struct{ hook }

func (listingHook) Capabilities(string) []gpu.Knob { return []gpu.Knob{gpu.KnobPlacement} }

// A knob is unavailable on a GPU only where every backend of its
// mechanisms lists its capabilities and none lists it for that GPU, or no
// backend drives it; a backend that lists none leaves it available.
func TestKnobAvailability(t *testing.T) {
	clocksOn0 := &listing{caps: map[string][]gpu.Knob{"GPU-0": {gpu.KnobLockedClocks, gpu.KnobPowerLimit}}}
	tests := []struct {
		name      string
		backends  []any
		uuid      string
		knob      gpu.Knob
		driven    bool
		available bool
		why       string
	}{
		{"listed", []any{clocksOn0}, "GPU-0", gpu.KnobLockedClocks, true, true, ""},
		{"not listed", []any{clocksOn0}, "GPU-0", gpu.KnobVGPUScheduler, true, false,
			"not available on this GPU (its backends list locked_clocks, power_limit)"},
		// a backend that lists nothing for a GPU cannot read it now (a
		// GPU down, a call failed): unknown, not "no"
		{"nothing listed for the GPU", []any{clocksOn0}, "GPU-1", gpu.KnobLockedClocks, true, true, ""},
		{"backend lists no capabilities", []any{&recorder{}}, "GPU-0", gpu.KnobLockedClocks, true, true, ""},
		{"no backend drives it", []any{clocksOn0}, "GPU-0", gpu.KnobPauseDuty, false, false,
			"no backend of this host drives pause_duty"},
		// placement has two mechanisms: a mover, a rebalancing hook
		{"one mechanism's backend unknown", []any{&listingMover{}, hook{}}, "GPU-0", gpu.KnobPlacement, true, true, ""},
		{"one mechanism's backend lists it", []any{&listingMover{}, listingHook{}}, "GPU-0", gpu.KnobPlacement, true, true, ""},
		{"no mechanism's backend lists it", []any{&listingMover{caps: []gpu.Knob{gpu.KnobMIGLayout}}}, "GPU-0", gpu.KnobPlacement, true, false,
			"not available on this GPU (its backends list mig_layout)"},
		{"the hook does not list MIG layouts", []any{listingHook{}}, "GPU-0", gpu.KnobMIGLayout, true, false,
			"not available on this GPU (its backends list placement)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := knobAvailability(ActuatorsOf(tc.backends...), tc.uuid, tc.knob, nil, nil)
			if got.Knob != tc.knob || got.Driven != tc.driven || got.Available != tc.available || got.Why() != tc.why {
				t.Errorf("got %+v (%q), want driven %v, available %v (%q)", got, got.Why(), tc.driven, tc.available, tc.why)
			}
		})
	}
}

// A GPU's knobs are every knob of the table, in its order.
func TestKnobsAvailable(t *testing.T) {
	got := knobsAvailable(ActuatorsOf(&listing{caps: map[string][]gpu.Knob{"GPU-0": {gpu.KnobPowerLimit}}}), "GPU-0", nil)
	var knobs, avail []gpu.Knob
	for _, k := range got {
		knobs = append(knobs, k.Knob)
		if k.Available {
			avail = append(avail, k.Knob)
		}
	}
	if !slices.Equal(knobs, CountedKnobs) {
		t.Errorf("knobs %v, want the table's %v", knobs, CountedKnobs)
	}
	if want := []gpu.Knob{gpu.KnobPowerLimit}; !slices.Equal(avail, want) {
		t.Errorf("available %v, want %v", avail, want)
	}
}

// The status says, for each GPU of the latest round, the knobs its
// backends can turn there; the log says so at info level once per GPU,
// and again when they change.
func TestStatusKnobs(t *testing.T) {
	var buf strings.Builder
	logger := level.NewFilter(log.NewLogfmtLogger(log.NewSyncWriter(&buf)), level.AllowInfo())
	host := &listing{caps: map[string][]gpu.Knob{uuid0: {gpu.KnobLockedClocks, gpu.KnobPowerLimit}}}
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: fixed{}, Actuators: ActuatorsOf(host), Clock: clk, Mode: ModeRecommend, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	round := func() (string, map[gpu.Knob]KnobAvailability) {
		t.Helper()
		buf.Reset()
		clk.Advance(15 * time.Second)
		if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
			t.Fatal(err)
		}
		gs := tu.Status().GPUs
		if len(gs) != 1 || gs[0].GPU != uuid0 {
			t.Fatalf("GPUs %+v, want GPU-0", gs)
		}
		got := map[gpu.Knob]KnobAvailability{}
		for _, k := range gs[0].Knobs {
			got[k.Knob] = k
		}
		if len(got) != len(CountedKnobs) {
			t.Errorf("%d knobs in the status, want every one of the table's %d", len(got), len(CountedKnobs))
		}
		return buf.String(), got
	}
	const first = `msg="tuner knobs of GPU" gpu=0 uuid=GPU-0 available="locked_clocks power_limit" not_listed="mps_active_threads compute_timeslice vgpu_scheduler" no_backend="pause_duty placement mig_layout"`
	out, got := round()
	if !strings.Contains(out, "level=info "+first) {
		t.Errorf("first round's log lacks the GPU's knobs at info:\n%s", out)
	}
	if k := got[gpu.KnobPowerLimit]; !k.Available {
		t.Errorf("power_limit %+v, want available", k)
	}
	if k := got[gpu.KnobVGPUScheduler]; k.Available || k.Why() != "not available on this GPU (its backends list locked_clocks, power_limit)" {
		t.Errorf("vgpu_scheduler %+v (%q), want not available, its backends listing the clocks and power", k, k.Why())
	}
	if k := got[gpu.KnobPauseDuty]; k.Available || k.Driven {
		t.Errorf("pause_duty %+v, want no backend", k)
	}
	if out, _ := round(); strings.Contains(out, "tuner knobs") {
		t.Errorf("the same knobs logged again:\n%s", out)
	}
	host.caps[uuid0] = []gpu.Knob{gpu.KnobLockedClocks, gpu.KnobPowerLimit, gpu.KnobVGPUScheduler}
	out, got = round()
	if !strings.Contains(out, `available="vgpu_scheduler locked_clocks power_limit"`) {
		t.Errorf("changed knobs not logged:\n%s", out)
	}
	if !got[gpu.KnobVGPUScheduler].Available {
		t.Error("vgpu_scheduler not available once listed")
	}
}

// A change refused because its knob was not listed is asked for again
// once the Retry guard's wait is over, when the backend lists it again (a
// GPU read again): the list can change, so it is no "not supported",
// after which Retry never asks again.
func TestUnavailableKnobAskedAgain(t *testing.T) {
	power := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490), Reason: "test"}
	host := &listing{caps: map[string][]gpu.Knob{uuid0: {gpu.KnobLockedClocks}}}
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: fixed{power}, Guards: []Guard{&Retry{After: time.Minute}}, Actuators: ActuatorsOf(host), Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if ds, _ := tu.RunOnce(context.Background(), emptySnap(clk.Now())); len(ds) != 1 || ds[0].Outcome != OutcomeRefused {
		t.Fatalf("decisions %+v, want the power limit refused, not listed", ds)
	}
	host.caps[uuid0] = []gpu.Knob{gpu.KnobPowerLimit}
	for range 3 {
		clk.Advance(10 * time.Minute)
		if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
			t.Fatal(err)
		}
	}
	if len(host.Calls) == 0 || host.Calls[0] != "SetPowerLimit(GPU-0,490)" {
		t.Errorf("calls %q once the backend lists the knob again, want the power limit set", host.Calls)
	}
}

// countingHook is a rebalancing hook that lists placement alone (as one
// that refuses MIG layouts does) and counts the plans it is handed.
type countingHook struct {
	listingHook
	plans int
}

func (h *countingHook) Rebalance(context.Context, gpu.Plan) error { h.plans++; return nil }

// listingMIG is a MIG backend that lists the MIG layout on every GPU.
type listingMIG struct{ *migHost }

func (listingMIG) Capabilities(string) []gpu.Knob { return []gpu.Knob{gpu.KnobMIGLayout} }

// Where a host has a rebalancing hook, a plan goes to the hook alone: its
// list is the one that tells, whatever another backend lists.
func TestPlanCheckedAgainstTheHook(t *testing.T) {
	h := &countingHook{}
	mig := listingMIG{&migHost{}}
	tu, err := New(Options{Policy: relayoutOnce(uuid0), Actuators: ActuatorsOf(h, mig), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := tu.RunOnce(context.Background(), snapshot(t0, []gpu.Device{migDev(uuid0, 1)}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Outcome != OutcomeRefused || !strings.Contains(ds[0].Reason, "not available") || h.plans != 0 || len(mig.Calls) != 0 {
		t.Errorf("decisions %+v, %d plans to the hook, MIG calls %q: want the plan refused up front, untried", ds, h.plans, mig.Calls)
	}
}

// countingListing counts the lists it is asked for.
type countingListing struct {
	listing
	asked int
}

func (c *countingListing) Capabilities(uuid string) []gpu.Knob {
	c.asked++
	return c.listing.Capabilities(uuid)
}

// A round asks each backend for a GPU's knobs once (a list may cost
// driver calls under the backend's lock), however many knobs and actions
// it looks at.
func TestCapabilitiesAskedOnceARound(t *testing.T) {
	power := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490), Reason: "test"}
	clocks := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}, Current: ClockRange{}, Want: ClockRange{MinMHz: 1980, MaxMHz: 1980}, Reason: "test"}
	host := &countingListing{listing: listing{caps: map[string][]gpu.Knob{uuid0: {gpu.KnobPowerLimit}}}}
	tu, err := New(Options{Policy: fixed{power, clocks}, Actuators: ActuatorsOf(host), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), snapshot(t0, []gpu.Device{{UUID: uuid0, Up: true}}, nil)); err != nil {
		t.Fatal(err)
	}
	if host.asked != 1 {
		t.Errorf("the backend asked for GPU-0's knobs %d times in a round, want once", host.asked)
	}
}

// nvmlMIGOff is a MIG backend that lists what NVML lists on a GPU with
// MIG mode off: the clocks and the power limit, not the MIG layout.
type nvmlMIGOff struct{ *migHost }

func (nvmlMIGOff) Capabilities(string) []gpu.Knob {
	return []gpu.Knob{gpu.KnobLockedClocks, gpu.KnobPowerLimit}
}

// A MIG layout refused up front on a GPU whose reading says MIG mode is
// off says how to turn it on (NVML's own refusal did, before the tuner
// refused the change untried); one refused on a GPU in MIG mode does not.
func TestMIGLayoutRefusedWithMIGOff(t *testing.T) {
	for _, tc := range []struct {
		name   string
		migOn  bool
		hinted bool
	}{
		{"MIG mode off", false, true},
		{"MIG mode on, the layout not listed", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mig := nvmlMIGOff{&migHost{}}
			tu, err := New(Options{Policy: relayoutOnce(uuid0), Actuators: ActuatorsOf(mig), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			dev := gpu.Device{Index: 2, UUID: uuid0, Up: true, Mode: gpu.SharingTimeSlice}
			if tc.migOn {
				dev = migDev(uuid0, 1)
				dev.Index = 2
			}
			ds, err := tu.RunOnce(context.Background(), snapshot(t0, []gpu.Device{dev}, nil))
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != 1 || ds[0].Outcome != OutcomeRefused || len(mig.Calls) != 0 {
				t.Fatalf("decisions %+v, MIG calls %q: want the layout refused up front, untried", ds, mig.Calls)
			}
			const hint = "power_limit): MIG mode is off; enable it with `nvidia-smi -i 2 -mig 1`"
			if got := strings.Contains(ds[0].Reason, hint); got != tc.hinted {
				t.Errorf("reason %q: hint %q there %v, want %v", ds[0].Reason, hint, got, tc.hinted)
			}
			if !strings.Contains(ds[0].Reason, "refused, not tried: not available on this GPU (its backends list locked_clocks, power_limit)") {
				t.Errorf("reason %q lacks the backends' list", ds[0].Reason)
			}
		})
	}
}

// The policy decides on each GPU's knobs as the executor refuses a change
// by them and the status shows them (State.Knobs): a knob listed is
// available, one listed out is not, one no backend drives is not, and on
// a GPU its backends list nothing for, every knob they drive is (unknown
// is not "no"). The backends are asked once a GPU and round for all three.
func TestStateKnobs(t *testing.T) {
	const uuid1 = "GPU-1"
	power := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490), Reason: "test"}
	clocks := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}, Current: ClockRange{}, Want: ClockRange{MinMHz: 1980, MaxMHz: 1980}, Reason: "test"}
	var seen *State
	spy := deciderFunc(func(s *State) []Action { seen = s; return []Action{power, clocks} })
	host := &countingListing{listing: listing{caps: map[string][]gpu.Knob{uuid0: {gpu.KnobPowerLimit}}}}
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: spy, Actuators: ActuatorsOf(host), Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	devs := []gpu.Device{{Index: 0, UUID: uuid0, Up: true}, {Index: 1, UUID: uuid1, Up: true}}
	for round := 1; round <= 2; round++ {
		clk.Advance(15 * time.Second)
		if _, err := tu.RunOnce(context.Background(), snapshot(clk.Now(), devs, nil)); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			uuid string
			knob gpu.Knob
			want bool
		}{
			{uuid0, gpu.KnobPowerLimit, true},
			{uuid0, gpu.KnobLockedClocks, false},
			{uuid0, gpu.KnobPauseDuty, false},
			{uuid1, gpu.KnobLockedClocks, true},
			{uuid1, gpu.KnobPauseDuty, false},
		} {
			if got := seen.Available(c.uuid, c.knob); got != c.want {
				t.Errorf("round %d: %s available on %s %v, want %v", round, c.knob, c.uuid, got, c.want)
			}
		}
		if gs := tu.Status().GPUs; len(gs) != len(devs) {
			t.Fatalf("round %d: the status has %d GPUs, want %d", round, len(gs), len(devs))
		}
		for _, g := range tu.Status().GPUs {
			if len(g.Knobs) != len(CountedKnobs) || !reflect.DeepEqual(g.Knobs, seen.Knobs[g.GPU]) {
				t.Errorf("round %d: %s's knobs in the status %+v, the policy's %+v", round, g.GPU, g.Knobs, seen.Knobs[g.GPU])
			}
		}
		if want := 2 * round; host.asked != want {
			t.Errorf("after round %d the backend was asked %d times, want %d (once a GPU and round)", round, host.asked, want)
		}
	}
}

// A knob the operator has switched off (State.Drives false) is not
// available on any GPU, whatever its backends list: the policies turn to
// another remedy as for a knob listed out. A setting of it whose original
// the tuner keeps stays changeable, as for a knob listed out. A knob
// Drives says nothing of is as the backends' lists say.
func TestStateDisabledKnobs(t *testing.T) {
	kept := Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}
	s := &State{
		Drives: map[gpu.Knob]bool{gpu.KnobLockedClocks: false, gpu.KnobPowerLimit: false, gpu.KnobPauseDuty: false, gpu.KnobComputeTimeSlice: true},
		Knobs: map[string][]KnobAvailability{uuid0: {
			{Knob: gpu.KnobLockedClocks, Driven: true, Available: true},
			{Knob: gpu.KnobComputeTimeSlice, Driven: true, Available: true},
			{Knob: gpu.KnobVGPUScheduler, Driven: true},
		}},
		Originals: map[string]Value{kept.String(): Watts(700)},
	}
	for _, c := range []struct {
		uuid                  string
		knob                  gpu.Knob
		available, changeable bool
	}{
		{uuid0, gpu.KnobLockedClocks, false, false},   // disabled, listed
		{"GPU-1", gpu.KnobLockedClocks, false, false}, // disabled, nothing known of the GPU
		{uuid0, gpu.KnobPauseDuty, false, false},      // opt-in, not enabled
		{uuid0, gpu.KnobPowerLimit, false, true},      // disabled, its original kept
		{uuid0, gpu.KnobComputeTimeSlice, true, true}, // enabled, listed
		{uuid0, gpu.KnobVGPUScheduler, false, false},  // listed out
		{uuid0, gpu.KnobMPSActiveThreads, true, true}, // neither Drives nor the lists say
	} {
		if got := s.Available(c.uuid, c.knob); got != c.available {
			t.Errorf("%s available on %s %v, want %v", c.knob, c.uuid, got, c.available)
		}
		if got := s.Changeable(Target{GPU: c.uuid, Knob: c.knob}); got != c.changeable {
			t.Errorf("%s changeable on %s %v, want %v", c.knob, c.uuid, got, c.changeable)
		}
	}
}
