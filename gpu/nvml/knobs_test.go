package nvml

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/tunertest"
)

// The tuner asks every GPU's knobs every round, holding its own lock. They
// were asked of the driver under the backend's lock, waited for without
// bound: a sample stuck in a driver call (here GPU 3's power) held every
// round, and with it every decision, revert and the kill switch. The
// knobs are those the last sample found, served without the lock: the
// round ends while the sample is stuck.
func TestKnobsWhileSampleStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, dgxh100.New())
		b := f.backend()
		sample(t, b)
		u0 := f.devs[0].UUID
		want := []gpu.Knob{gpu.KnobLockedClocks, gpu.KnobPowerLimit}
		if got := b.Capabilities(u0); !slices.Equal(got, want) {
			t.Fatalf("knobs %v, want %v", got, want)
		}
		tu, _, _ := tunerOn(t, b, onePolicy{})
		hang := make(chan struct{})
		f.devs[3].GetPowerUsageFunc = func() (uint32, nvml.Return) {
			<-hang
			return 300000, nvml.SUCCESS
		}
		sampled := sampleAsync(t, b)
		synctest.Wait()
		round := make(chan error, 1)
		go func() {
			_, err := tu.RunOnce(context.Background(), tunertest.Snapshot(t0, []gpu.Device{{UUID: u0, Up: true, Mode: gpu.SharingExclusive}}, nil))
			round <- err
		}()
		synctest.Wait()
		select {
		case err := <-round:
			if err != nil {
				t.Errorf("round: %v", err)
			}
			if got := b.Capabilities(u0); !slices.Equal(got, want) {
				t.Errorf("knobs while the sample is stuck %v, want the last sample's %v", got, want)
			}
		default:
			t.Error("the tuner's round waits for a sample stuck in a driver call")
			close(hang)
			<-round
			hang = nil
		}
		if hang != nil {
			close(hang)
		}
		<-sampled
	})
}

// Whether NVML gives a GPU's power limit range is asked in the samples
// until it answers that it does (the power limit listed) or that it does
// not (NOT_SUPPORTED: not listed, not asked again); another answer lists
// nothing that sample and is asked again at the next.
func TestPowerLimitKnobAsked(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []nvml.Return // of the samples in turn (the last one repeated)
		listed  []bool        // the power limit listed after each of 3 samples
		asked   int
	}{
		{"given", []nvml.Return{nvml.SUCCESS}, []bool{true, true, true}, 1},
		{"not supported", []nvml.Return{nvml.ERROR_NOT_SUPPORTED}, []bool{false, false, false}, 1},
		{"refused, then given", []nvml.Return{nvml.ERROR_NO_PERMISSION, nvml.ERROR_UNKNOWN, nvml.SUCCESS}, []bool{false, false, true}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			d := f.devs[0]
			n := 0
			d.GetPowerManagementLimitConstraintsFunc = func() (uint32, uint32, nvml.Return) {
				n++
				return 200000, 700000, tc.answers[min(n, len(tc.answers))-1]
			}
			b := f.backend()
			for i, want := range tc.listed {
				sample(t, b)
				if got := slices.Contains(b.Capabilities(d.UUID), gpu.KnobPowerLimit); got != want {
					t.Errorf("sample %d: power limit listed %v, want %v", i+1, got, want)
				}
			}
			if n != tc.asked {
				t.Errorf("asked %d times, want %d", n, tc.asked)
			}
		})
	}
}
