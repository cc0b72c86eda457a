package tuner

import (
	"slices"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
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

// Under a server at 50%, batch's client, capped from its original 100%
// to 30%, is given back as 80% (held as the server's 50%, the very state
// of the original) by a change whose hook runs at exit: the exit closes
// the original as restored, and its decision says what the client runs
// at, 50%, with the original it stands for, not a cap of 100% it never
// runs at. (Before, it read 30% -> 100%.)
func TestExitHeldGiveBackSaysWhatRuns(t *testing.T) {
	r := newHookRun(t)
	r.tu.mu.Lock()
	r.tu.o.MPSStates = serverAt50{}
	r.tu.mu.Unlock()
	capped := capBatch
	capped.Want = Fraction(0.3)
	r.round(t, capped)
	r.host.waitStarted(t)
	r.host.release <- nil
	waitHookEnded(t, r.tu)
	if d := r.round(t); !slices.Equal(outcomes(d), []string{"mps_active_threads applied"}) {
		t.Fatalf("round after the cap's hook: %v, want it applied", outcomes(d))
	}
	back := capBatch
	back.Current, back.Want = Fraction(0.3), Fraction(0.8)
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
	if got := d[i]; got.From != "30%" || got.To != "50%" || !strings.Contains(got.Reason, "original 100%") || !strings.Contains(got.Reason, "server") {
		t.Errorf("the close's decision: from %q to %q, reason %q; want 30%% -> 50%%, the reason naming the original 100%% held by the server", got.From, got.To, got.Reason)
	}
	if o := r.j.Originals(); len(o) != 0 {
		t.Errorf("journaled originals %+v after the restore at exit, want none", o)
	}
}
