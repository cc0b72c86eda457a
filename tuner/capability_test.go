package tuner

import (
	"context"
	"slices"
	"testing"

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
		{"listed on another GPU only", []any{clocksOn0}, "GPU-1", gpu.KnobLockedClocks, true, false,
			"not available on this GPU (its backends list no knob there)"},
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
			got := knobAvailability(ActuatorsOf(tc.backends...), tc.uuid, tc.knob)
			if got.Knob != tc.knob || got.Driven != tc.driven || got.Available != tc.available || got.Why() != tc.why {
				t.Errorf("got %+v (%q), want driven %v, available %v (%q)", got, got.Why(), tc.driven, tc.available, tc.why)
			}
		})
	}
}

// A GPU's knobs are every knob of the table, in its order.
func TestKnobsAvailable(t *testing.T) {
	got := knobsAvailable(ActuatorsOf(&listing{caps: map[string][]gpu.Knob{"GPU-0": {gpu.KnobPowerLimit}}}), "GPU-0")
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
