package tuner

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// forgetfulSuccessors is an MPS host whose restart hook names a successor
// (PID+1) and answers at once, and which forgets a successor a minute
// after the restart that named it, as the MPS controller does (it keeps
// the successors it noted for forgetAfter).
type forgetfulSuccessors struct {
	clk  *gpu.ManualClock
	mu   sync.Mutex
	succ map[uint32]time.Time
}

func (h *forgetfulSuccessors) RunsHooks() bool { return true }

func (h *forgetfulSuccessors) SetMPSActiveThreads(context.Context, string, uint32, float64) error {
	return nil
}

func (h *forgetfulSuccessors) RestartClient(_ context.Context, _ string, pid uint32, _ string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.succ[pid] = h.clk.Now()
	return nil
}

func (h *forgetfulSuccessors) Successor(_ string, pid uint32) (uint32, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.succ[pid]
	if !ok || h.clk.Now().Sub(at) >= time.Minute {
		return 0, false
	}
	return pid + 1, true
}

// The successor a restart hook named is asked for when the hook returns,
// as it was when the round ran the hook, not at the round that settles
// it: with a tuner interval longer than the controller keeps successors
// (a minute), the one asked at the settling round was forgotten, and the
// cap followed no successor the hook had named. (Before, the original stayed
// on the old PID, as if the hook had named none.)
func TestHookSuccessorAskedAtItsReturn(t *testing.T) {
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	t.Cleanup(func() { j.Close() })
	clk := gpu.NewManualClock(t0)
	host := &forgetfulSuccessors{clk: clk, succ: map[uint32]time.Time{}}
	tu, err := New(Options{Policy: fixed([]Action{capBatch}), Actuators: ActuatorsOf(host), Journal: j, Clock: clk, Mode: ModeEnforce, Guards: budgets()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := tu.RunOnce(ctx, tenantSnap(clk.Now(), proc{8, "batch"})); err != nil {
		t.Fatal(err)
	}
	waitHookEnded(t, tu)
	clk.Advance(90 * time.Second) // the next round, a 90 s interval on
	tu.o.Policy = fixed(nil)
	// the hook stopped 8 and started 9 (the one it named) and 10
	ds, err := tu.RunOnce(ctx, tenantSnap(clk.Now(), proc{9, "batch"}, proc{10, "batch"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(ds); len(got) != 1 || got[0] != "mps_active_threads applied" {
		t.Fatalf("settling round: %q, want the restart applied", got)
	}
	tu.mu.Lock()
	defer tu.mu.Unlock()
	named := Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 9}.String()
	if _, ok := tu.originals[named]; !ok {
		var keys []string
		for k := range tu.originals {
			keys = append(keys, k)
		}
		for k := range tu.watches {
			keys = append(keys, "watch "+k)
		}
		t.Errorf("originals and watches %q, want the original moved to the named successor %s", keys, named)
	}
}
