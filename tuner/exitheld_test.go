package tuner

import (
	"slices"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/mps"
)

// serverAt50 is an MPS controller whose server runs at 50%: a client's
// fraction is held at most at that.
type serverAt50 struct{}

func (serverAt50) ClientStates() []gpu.MPSClientState { return nil }
func (serverAt50) HeldFraction(_ string, _ uint32, f float64) float64 {
	return min(f, 0.5)
}
func (serverAt50) CachedHeldFraction(_ string, _ uint32, f float64) float64 {
	return min(f, 0.5)
}

// A change giving batch's client cap back, whose hook runs at exit, sets
// its original back as the MPS controller holds them (a whole percentage,
// at most the server's cap): the exit closes the original as restored,
// and its decision says what the client runs at, with the original it
// stands for, and why: under a server at 50%, a cap given back as 80%
// from an original of 100% runs at the server's 50% (before, it read
// 30% -> 100%); with no server cap known, an original of 12.5% given
// back runs at 13%, the whole percentage sent, not a server's cap
// (before, the reason said the server held it).
func TestExitHeldGiveBackSaysWhatRuns(t *testing.T) {
	for _, tc := range []struct {
		name        string
		states      MPSStateSource
		original    Fraction
		back        Fraction
		to          string
		says, never string
	}{
		{"under a server at 50%", serverAt50{}, 1, 0.8, "50%", "as its MPS server's cap holds it, the state of its original 100%", "whole percentage"},
		{"no server cap, an original of 12.5%", mps.New(mps.Options{}), 0.125, 0.125, "13%", "a whole percentage, the change's 12.5% as 13%, as a restore of its original 12.5% would be", "server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newHookRun(t)
			r.tu.mu.Lock()
			r.tu.o.MPSStates = tc.states
			r.tu.mu.Unlock()
			capped := capBatch
			capped.Current, capped.Want = tc.original, Fraction(0.3)
			r.round(t, capped)
			r.host.waitStarted(t)
			r.host.release <- nil
			waitHookEnded(t, r.tu)
			if d := r.round(t); !slices.Equal(outcomes(d), []string{"mps_active_threads applied"}) {
				t.Fatalf("round after the cap's hook: %v, want it applied", outcomes(d))
			}
			back := capBatch
			back.Current, back.Want = Fraction(0.3), tc.back
			r.host.blockNext()
			r.round(t, back, power)
			r.host.waitStarted(t)
			d, _ := r.restoreReleasing(t, isPower)
			i := slices.IndexFunc(d, func(d Decision) bool {
				return d.Knob == gpu.KnobMPSActiveThreads && d.Outcome == OutcomeRestored
			})
			if i < 0 {
				t.Fatalf("restore at exit: %+v, want batch's original closed as restored", d)
			}
			if got := d[i]; got.From != "30%" || got.To != tc.to || !strings.Contains(got.Reason, tc.says) || strings.Contains(got.Reason, tc.never) {
				t.Errorf("the close's decision: from %q to %q, reason %q; want 30%% -> %s, the reason saying %q and not %q", got.From, got.To, got.Reason, tc.to, tc.says, tc.never)
			}
			if o := r.j.Originals(); len(o) != 0 {
				t.Errorf("journaled originals %+v after the restore at exit, want none", o)
			}
		})
	}
}
