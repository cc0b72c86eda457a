package tuner

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A GPU gone from the readings (not enumerated at this start) lists no
// process, as one read down does: its MPS original is left open, not
// closed as "process gone" (the client may run once the GPU is back).
func TestRecoverGPUAbsentLeavesOriginalOpen(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	j, err := OpenJournal(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 7},
		Tenant: "embed", From: encodeValue(Fraction(1))}); err != nil {
		t.Fatal(err)
	}
	j = reopen(t, j, p)
	rec := &recorder{}
	tu, _ := newTestTuner(t, ModeEnforce, rec, nil, j)
	// the first snapshot reads another GPU only: uuid0 is missing
	snap := snapshot(t0, []gpu.Device{{UUID: "GPU-other", Up: true, Mode: gpu.SharingMPS}}, nil)
	_, err = tu.Recover(context.Background(), snap)
	if len(j.Originals()) != 1 {
		t.Errorf("GPU absent from the readings: original closed (%d open, err %v, calls %q); a GPU read down leaves it open", len(j.Originals()), err, rec.Calls)
	}
}
