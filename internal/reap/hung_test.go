package reap

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// One Start whose exec does not return (a program on a hung mount) holds
// the start lock: the reaper passes rather than wait for it, so that every
// other Start goes on (a waiting writer would hold them all behind it).
func TestHungStartHoldsNoOtherStart(t *testing.T) {
	starting.RLock() // a Start blocked in cmd.Start
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Loop(ctx, nil, func(Reaped) {}) }()
	nudge <- struct{}{} // the reaper looks while the Start is under way
	time.Sleep(100 * time.Millisecond)
	ran := make(chan error, 1)
	go func() { ran <- Run(exec.Command("/bin/true")) }()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("/bin/true: %v", err)
		}
	case <-time.After(30 * time.Second): // a hang guard, not a bound
		t.Errorf("a program could not start while another's exec hung: every Start waits behind it")
	}
	starting.RUnlock()
	cancel()
	<-done
}
