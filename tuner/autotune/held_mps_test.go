package autotune

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// wholePercent holds a fraction as the MPS controller does: the whole
// percentage it sends.
type wholePercent struct{}

func (wholePercent) HeldFraction(_ string, _ uint32, f float64) float64 {
	return math.Round(f*100) / 100
}

// TestCapHeldAtTheActuatorsResolution: embed's cap at its share.min,
// 0.125, is held by the MPS controller as 13%: in force at 0.13, it is
// not asked again (before, every round restarted the client for it). An
// actuator that holds any fraction (the simulator's, no MPSResolver) is
// asked for 0.125 from 0.13, as before.
func TestCapHeldAtTheActuatorsResolution(t *testing.T) {
	tests := []struct {
		name     string
		resolver tuner.MPSResolver
		want     string
	}{
		{"whole percentages: 0.125 held as 0.13", wholePercent{}, ""},
		{"any fraction: 0.13 is not 0.125", nil, "GPU-0/mps_active_threads/pid2=12.5%"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := scene{mode: gpu.SharingMPS, embedCap: gpu.Float(0.13), fast: tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97}, p99: 2}.state()
			st.Snapshot.Tenants[1].ShareMin = 0.125
			st.MPSResolver = tc.resolver
			var got []string
			for _, a := range New().Decide(st) {
				got = append(got, a.Target.String()+"="+a.Want.String())
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("actions %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCapNeverZero: a violation beside a tenant whose share.min is 0 caps
// it at most to the smallest whole percentage MPS takes (1%), with which
// it still progresses; before, the reservation rose to the whole GPU and
// the policy asked a cap of 0%, which the bounds guard refuses. At 1% the
// cap is at its bound: nothing more is asked.
func TestCapNeverZero(t *testing.T) {
	violating := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97} // burn 3
	tests := []struct {
		name string
		cap  float64
		want string
	}{
		{"capped to 5%: down to 1%, not 0%", 0.05, "GPU-0/mps_active_threads/pid2=1%"},
		{"capped to 1%: at its bound", 0.01, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := scene{mode: gpu.SharingMPS, embedCap: gpu.Float(tc.cap), fast: violating, p99: 2}.state()
			st.Snapshot.Tenants[1].ShareMin = 0
			var got []string
			for _, a := range New().Decide(st) {
				got = append(got, a.Target.String()+"="+a.Want.String())
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("actions %q, want %q", got, tc.want)
			}
		})
	}
}
