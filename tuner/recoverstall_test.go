package tuner

import (
	"context"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// stuckPower is a power actuator whose call hangs, whatever its context,
// until the test releases it (a driver call that does not return).
type stuckPower struct {
	called, release chan struct{}
}

func (s *stuckPower) LockClocks(context.Context, string, gpu.ClockLock) error { return nil }
func (s *stuckPower) SetPowerLimit(context.Context, string, float64) error {
	s.called <- struct{}{}
	<-s.release
	return nil
}

// The restore at start publishes the time it started before it calls an
// actuator: one that hangs past the restore's deadline leaves
// vgpu_tuner_last_run_timestamp_seconds served at the start, so that
// VGPUTunerRoundsStalled can fire (before, nothing was published until the
// restore returned: the series was absent, and the alert could not fire).
func TestRecoverPublishesBeforeItsRestore(t *testing.T) {
	j := crashedJournal(t, originalRec("GPU-a", 700))
	act := &stuckPower{called: make(chan struct{}, 1), release: make(chan struct{})}
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(act), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_, _ = tu.Recover(ctx, snapshot(t0, twoGPUs(false), nil))
	}()
	select {
	case <-act.called:
	case <-time.After(time.Minute):
		t.Fatal("the restore at start did not call the actuator")
	}
	if got := tu.Status().LastRun; !got.Equal(t0) {
		t.Errorf("last run %v while the restore at start hangs, want its start %v", got, t0)
	}
	close(act.release)
	<-ended
}
