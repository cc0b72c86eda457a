package nvml

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/rebalance"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/tunertest"
)

// A MIG instance whose GPU instance NVML does not give (without root
// nvmlDeviceGetGpuInstanceById is refused; as root it may fail once) has
// its profile's name built from the MIG device's slices and memory, which
// carry no variant: a 3g.71gb+gfx instance reads as 3g.71gb, a
// 1g.24gb+gfx one as 1g.24gb, the plain profile's name. No relayout is
// planned from such a reading: the slow loop planned one from the names
// read, and ConfigureMIG either refused a name the GPU has no profile of
// (3g.71gb) or set the plain profiles where the variants were (the
// graphics of both instances lost, the layout read after named as
// planned); a failure in the round of the plan did the same as root.
func TestMIGRelayoutNotPlannedFromBuiltNames(t *testing.T) {
	for _, tc := range []struct {
		name    string
		layout  []int          // the GPU's GPU instance profiles, by index
		refused func(int) bool // whether GetGpuInstanceById is refused in round i
		want    []string       // the MIG layout decisions
	}{
		{"no root, a profile only its variant has", []int{nvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX},
			func(int) bool { return true }, nil},
		{"no root, variants of plain profiles", []int{nvml.GPU_INSTANCE_PROFILE_2_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX},
			func(int) bool { return true }, nil},
		{"root, a failure in one round", []int{nvml.GPU_INSTANCE_PROFILE_2_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX},
			func(i int) bool { return i == 2 }, []string{"[2g.48gb+gfx, 1g.24gb+gfx]->[1g.24gb+gfx, 2g.48gb+gfx] applied"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, rtxProServer(t))
			f.enableMIG(0, tc.layout...)
			b := f.backend()
			host := &tunertest.MIGHost{}
			planner := rebalance.Default()
			planner.CoolDown, planner.Hold = time.Minute, time.Minute
			tu, err := tuner.New(tuner.Options{Policy: onePolicy(nil), Clock: f.clock, Mode: tuner.ModeEnforce,
				Actuators: tuner.ActuatorsOf(b, host), Rebalance: planner, Guards: tuner.DefaultGuards(nil, nil)})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			note := func(i int, decs []tuner.Decision) {
				for _, d := range decs {
					if d.Knob == gpu.KnobMIGLayout {
						got = append(got, fmt.Sprintf("%s->%s %s", d.From, d.To, d.Outcome))
						t.Logf("round %d: %s->%s %s: %s", i, d.From, d.To, d.Outcome, d.Reason)
					}
				}
			}
			for i := range 10 {
				if tc.refused(i) {
					f.fail(0, "GetGpuInstanceById", nvml.ERROR_NO_PERMISSION)
				} else {
					f.fail(0, "GetGpuInstanceById", nvml.SUCCESS)
				}
				snap, _ := relayoutSnapshot(t, b, f.clock.Now(), float64(48000*(i+1)))
				decs, err := tu.RunOnce(context.Background(), snap)
				if err != nil {
					t.Fatal(err)
				}
				note(i, decs)
				f.clock.Advance(time.Second)
				note(i, tu.Progress(context.Background()))
				f.clock.Advance(time.Minute - time.Second)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("MIG layout decisions %q, want %q", got, tc.want)
			}
			// The GPU's instances keep their variants, whatever their order.
			name := func(index int) string {
				for _, p := range rtxProProfiles {
					if p.index == index {
						return p.want
					}
				}
				return fmt.Sprint(index)
			}
			var have, want []string
			for _, gi := range sortedGIs(f.devs[0]) {
				have = append(have, name(int(gi.Info.ProfileId)))
			}
			for _, index := range tc.layout {
				want = append(want, name(index))
			}
			slices.Sort(have)
			if slices.Sort(want); !slices.Equal(have, want) {
				t.Errorf("GPU instance profiles after %v, want %v", have, want)
			}
		})
	}
}
