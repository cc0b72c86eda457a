package tuner

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// deferredRun is a tuner in enforce mode at a start an hour after t0,
// over host, with embed's MPS original of PID 10 journaled with id (cap
// 100%), deciding policy every round.
func deferredRun(t *testing.T, host *idClients, id Identity, policy Decider) (*Tuner, *Journal, *gpu.ManualClock) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal")
	j := reopen(t, writeJournal(t, path, mpsOriginal(10, id)), path)
	clk := gpu.NewManualClock(t0.Add(time.Hour))
	tu, err := New(Options{Policy: policy, Actuators: ActuatorsOf(host), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	return tu, j, clk
}

// roundAt runs a round on snap at its time.
func roundAt(t *testing.T, tu *Tuner, clk *gpu.ManualClock, snap *tenant.Snapshot) []Decision {
	t.Helper()
	clk.Set(snap.Time)
	d, err := tu.RunOnce(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A restore made in a round (the start's, deferred till a snapshot lists
// the client; or the start's own, in the first round where nobody called
// Recover) restarts the client; the round's policy, deciding from the
// same snapshot (the client's cap before the restore), does not change
// it in that round: the next round's does. Before, the client was
// restarted twice in one round, restored and then capped from 100%.
func TestRestoreInRoundHoldsItsTarget(t *testing.T) {
	at := t0.Add(time.Hour)
	for _, c := range []struct {
		name    string
		recover bool // Recover on a snapshot without PID 10
	}{
		{"deferred till listed", true},
		{"the start's, in the first round", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			host := &idClients{boot: testBoot, starts: map[uint32]uint64{10: 500, 8: 50}}
			tu, _, clk := deferredRun(t, host, Identity{Boot: testBoot, Starts: []uint64{500}}, fixed{mpsAction(10, 1, 0.5)})
			if c.recover {
				if _, err := tu.Recover(context.Background(), tenantSnap(at, proc{8, "batch"})); err != nil {
					t.Fatal(err)
				}
			}
			d := roundAt(t, tu, clk, tenantSnap(at.Add(30*time.Second), proc{10, "embed"}, proc{8, "batch"}))
			if got, want := outcomes(d), []string{"mps_active_threads restored"}; !slices.Equal(got, want) {
				t.Errorf("round that restores: %v (%+v), want %v", got, d, want)
			}
			if got, want := restartsOf(host.Calls), []string{"RestartClient(GPU-0,10)"}; !slices.Equal(got, want) {
				t.Errorf("restarts %q after the round that restores, want %q", got, want)
			}
			d = roundAt(t, tu, clk, tenantSnap(at.Add(45*time.Second), proc{10, "embed"}, proc{8, "batch"}))
			if got, want := outcomes(d), []string{"mps_active_threads applied"}; !slices.Equal(got, want) {
				t.Errorf("next round: %v (%+v), want the policy's change", got, d)
			}
			if n := len(restartsOf(host.Calls)); n != 2 {
				t.Errorf("%d restarts after the next round, want 2", n)
			}
		})
	}
}
