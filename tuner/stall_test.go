package tuner

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// hangingPower is recorder whose SetPowerLimit does not return until
// release is closed, as a driver call that hangs.
type hangingPower struct {
	recorder
	release chan struct{}
	// entered, where set (buffered), is told as a call begins to hang
	entered chan struct{}
}

func (h *hangingPower) SetPowerLimit(context.Context, string, float64) error {
	if h.entered != nil {
		select {
		case h.entered <- struct{}{}:
		default:
		}
	}
	<-h.release
	return nil
}

// hangs waits until a call of h hangs.
func hangs(t *testing.T, h *hangingPower) {
	t.Helper()
	select {
	case <-h.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no call began")
	}
}

// lockedBuffer is a log writer the round's watch may write from its own
// goroutine while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A round held by an actuator call that does not return is logged, once it
// has run stallAfter, with the call it waits on; its end is logged when the
// call returns. A round that ends in time logs neither.
func TestRoundStallLogsTheCall(t *testing.T) {
	power := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490), Reason: "test"}
	var logs lockedBuffer
	host := &hangingPower{release: make(chan struct{})}
	tu, err := New(Options{Policy: fixed{power}, Actuators: ActuatorsOf(host), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce, Logger: log.NewLogfmtLogger(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	tu.stallAfter = 20 * time.Millisecond
	done := make(chan error)
	go func() {
		_, err := tu.RunOnce(context.Background(), emptySnap(t0))
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), `msg="tuner round has not ended`) {
		if time.Now().After(deadline) {
			t.Fatalf("no line for a round held by a call; log:\n%s", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if want := `call="set power_limit of GPU GPU-0 to 490W"`; !strings.Contains(logs.String(), want) {
		t.Errorf("the line does not name the call (%s):\n%s", want, logs.String())
	}
	close(host.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `msg="tuner round ended after stalling"`) {
		t.Errorf("no line at the end of the stalled round; log:\n%s", logs.String())
	}

	var quiet lockedBuffer
	tu2, err := New(Options{Policy: fixed{power}, Actuators: ActuatorsOf(&recorder{}), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce, Logger: log.NewLogfmtLogger(&quiet)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu2.RunOnce(context.Background(), emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(quiet.String(), "stall") || strings.Contains(quiet.String(), "has not ended") {
		t.Errorf("a round in time logged a stall:\n%s", quiet.String())
	}
}

// The start's restore (Recover, of what an earlier run left open) held by
// an actuator call that does not return is logged as a round is, naming
// the call: it holds the rounds as one does (VGPUTunerRoundsStalled).
// Before, it was not watched, and nothing named the call.
func TestRecoverStallLogsTheCall(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	openWithOriginal(t, p, uuid0).Close() // GPU-0's original, 700 W
	j := openJournal(t, p)
	defer j.Close()
	var logs lockedBuffer
	host := &hangingPower{release: make(chan struct{})}
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(host), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce, Logger: log.NewLogfmtLogger(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	tu.stallAfter = 20 * time.Millisecond
	done := make(chan error)
	go func() {
		_, err := tu.Recover(context.Background(), emptySnap(t0))
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), `msg="tuner round has not ended`) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(host.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := `call="set power_limit of GPU GPU-0 to 700W"`; !strings.Contains(logs.String(), want) {
		t.Errorf("no line names the call the start's restore waits on (%s):\n%s", want, logs.String())
	}
}
