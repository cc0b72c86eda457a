package tuner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// fileRecorder is an actuator that appends its calls to a file, so that a
// process killed with SIGKILL leaves them behind.
type fileRecorder struct {
	recorder
	path string
}

func (f *fileRecorder) flush() {
	_ = os.WriteFile(f.path, []byte(strings.Join(f.Calls, "\n")), 0o600)
}

// crashHelper runs in a child process: it changes two settings in enforce
// mode with a journal, says so, and waits to be killed.
func crashHelper() {
	j, err := OpenJournal(os.Getenv("TUNER_CRASH_JOURNAL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	rec := &fileRecorder{path: os.Getenv("TUNER_CRASH_CALLS")}
	acts := []Action{mpsAction(7, 1, 0.4), {Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490)}}
	tu, err := New(Options{Policy: fixed(acts), Actuators: ActuatorsOf(rec), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		os.Exit(3)
	}
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
		os.Exit(3)
	}
	rec.flush()
	_ = os.WriteFile(os.Getenv("TUNER_CRASH_READY"), []byte("ok"), 0o600)
	select {} // until SIGKILL: no restore runs
}

// A process killed (kill -9) between a change and its restore leaves the
// originals in the journal; the next start in enforce mode restores them
// before deciding anything.
func TestCrashRestore(t *testing.T) {
	if os.Getenv("TUNER_CRASH_HELPER") == "1" {
		crashHelper()
		return
	}
	dir := t.TempDir()
	journal, calls, ready := filepath.Join(dir, "journal.jsonl"), filepath.Join(dir, "calls"), filepath.Join(dir, "ready")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashRestore$")
	cmd.Env = append(os.Environ(), "TUNER_CRASH_HELPER=1", "TUNER_CRASH_JOURNAL="+journal, "TUNER_CRASH_CALLS="+calls, "TUNER_CRASH_READY="+ready)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("helper never applied its changes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ProcessState.Success() {
		t.Fatalf("helper ended with %v, want killed", err)
	}
	applied, _ := os.ReadFile(calls)
	if !strings.Contains(string(applied), "SetPowerLimit(GPU-0,490)") || !strings.Contains(string(applied), "SetMPSActiveThreads(GPU-0,7,0.4000)") {
		t.Fatalf("the helper did not change the settings: %q", applied)
	}

	// The next start.
	j := openJournal(t, journal)
	defer j.Close()
	if n := len(j.Originals()); n != 2 {
		t.Fatalf("%d open originals in the journal after the crash, want 2", n)
	}
	rec := &recorder{}
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(rec), Journal: j, Clock: gpu.NewManualClock(t0.Add(time.Hour)), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	want := []string{"SetMPSActiveThreads(GPU-0,7,1.0000)", "RestartClient(GPU-0,7)", "SetPowerLimit(GPU-0,700)"}
	if !slices.Equal(rec.Calls, want) {
		t.Errorf("restore calls %q, want %q", rec.Calls, want)
	}
	if n := len(j.Originals()); n != 0 || tu.Status().Counts.Restores != 2 {
		t.Errorf("after the restore: %d open originals, %d restores", n, tu.Status().Counts.Restores)
	}
	// Restored once only.
	rec.Calls = nil
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0.Add(2*time.Hour))); err != nil || len(rec.Calls) != 0 {
		t.Errorf("second round: calls %q, err %v", rec.Calls, err)
	}
}
