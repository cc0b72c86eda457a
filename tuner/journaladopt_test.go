package tuner

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// replacedJournalTuner is a tuner in enforce whose policy lowers GPU-0's
// power limit from 680 W, its journal at the path returned, logging to
// logs.
func replacedJournalTuner(t *testing.T, act any, policy fixed, logs *lockedBuffer) (*Tuner, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, p)
	t.Cleanup(func() { j.Close() })
	tu, err := New(Options{Policy: policy, Actuators: ActuatorsOf(act), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce, Logger: log.NewLogfmtLogger(logs)})
	if err != nil {
		t.Fatal(err)
	}
	return tu, p
}

// putJournal renames a journal holding GPU's power limit original over
// the one at p.
func putJournal(t *testing.T, p, gpu string) {
	t.Helper()
	put := filepath.Join(filepath.Dir(p), "put-"+gpu)
	openWithOriginal(t, put, gpu).Close()
	if err := os.Rename(put, p); err != nil {
		t.Fatal(err)
	}
}

// journalOriginalsAt reads the originals of the journal at p, failing the
// test where p is not there (ReadJournalOriginals reads a missing journal
// as one without originals) or cannot be read.
func journalOriginalsAt(t *testing.T, p string) []Original {
	t.Helper()
	if _, err := os.Lstat(p); err != nil {
		t.Fatalf("the journal at %s: %v", p, err)
	}
	o, err := ReadJournalOriginals(p)
	if err != nil {
		t.Fatalf("reading the journal at %s: %v", p, err)
	}
	return o
}

func lowerPower(gpus ...string) fixed {
	var f fixed
	for _, g := range gpus {
		f = append(f, Action{Target: Target{GPU: g, Knob: gpu.KnobPowerLimit}, Current: Watts(680), Want: Watts(600), Reason: "test"})
	}
	return f
}

// A journal renamed over this one after the last round: the restore at
// exit adopts its originals first and sets them back, as its log says.
// (They were adopted only after the restore, left for the next start.)
func TestReplacedJournalAtExitSetBack(t *testing.T) {
	rec := &recorder{}
	var logs lockedBuffer
	tu, p := replacedJournalTuner(t, rec, lowerPower(uuid0), &logs)
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	putJournal(t, p, "GPU-9")
	if _, err := tu.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rec.Calls, "SetPowerLimit(GPU-9,700)") {
		t.Errorf("GPU-9's kept original not set back at exit: calls %q", rec.Calls)
	}
	if o := journalOriginalsAt(t, p); len(o) != 0 {
		t.Errorf("journal originals after the exit %+v, want none", o)
	}
	if !strings.Contains(logs.String(), "set back at exit as this run's own") {
		t.Errorf("log %q, want the kept originals said set back at exit", logs.String())
	}
}

// renamingPower puts a journal holding GPU-9's original at the journal's
// path on its first call of the GPU first names.
type renamingPower struct {
	recorder
	first string
	put   func()
	done  bool
}

func (r *renamingPower) SetPowerLimit(ctx context.Context, uuid string, w float64) error {
	if uuid == r.first && !r.done {
		r.done = true
		r.put()
	}
	return r.recorder.SetPowerLimit(ctx, uuid, w)
}

// A journal renamed over this one within a round: the write that rewrites
// it (Journal.Append) has its kept originals adopted at once, so that a
// change of GPU-9 in the same round keeps the journal's 700 W, not the
// value it found; renamed in the restore at exit, the kept original is
// left for the next start, and the log says so.
func TestRelinkedByAWriteAdoptedAtOnce(t *testing.T) {
	t.Run("round", func(t *testing.T) {
		rec := &renamingPower{first: uuid0}
		var logs lockedBuffer
		tu, p := replacedJournalTuner(t, rec, lowerPower(uuid0, "GPU-9"), &logs)
		rec.put = func() { putJournal(t, p, "GPU-9") }
		if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
			t.Fatal(err)
		}
		o, err := ReadJournalOriginals(p)
		if err != nil {
			t.Fatal(err)
		}
		tu.mu.Lock()
		held := tu.originals["GPU-9/power_limit"]
		tu.mu.Unlock()
		for _, jo := range o {
			if jo.Target.GPU == "GPU-9" && (held.Value == nil || held.Value.Distance(jo.Value) > 1e-9) {
				t.Errorf("GPU-9's original: the tuner holds %v, the journal %v", held.Value, jo.Value)
			}
		}
	})
	t.Run("its own original's write", func(t *testing.T) {
		rec := &readingPower{}
		var logs lockedBuffer
		tu, p := replacedJournalTuner(t, rec, lowerPower("GPU-9"), &logs)
		rec.put = func() { putJournal(t, p, "GPU-9") }
		if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
			t.Fatal(err)
		}
		tu.mu.Lock()
		held := tu.originals["GPU-9/power_limit"]
		tu.mu.Unlock()
		if held.Value == nil || held.Value.Distance(Watts(700)) > 1e-9 {
			t.Errorf("GPU-9's original: the tuner holds %v, the journal 700W", held.Value)
		}
	})
	t.Run("exit", func(t *testing.T) {
		rec := &renamingPower{first: uuid0}
		var logs lockedBuffer
		tu, p := replacedJournalTuner(t, rec, lowerPower(uuid0), &logs)
		rec.put = func() {}
		if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
			t.Fatal(err)
		}
		rec.done = false
		rec.put = func() { putJournal(t, p, "GPU-9") }
		if _, err := tu.Restore(context.Background()); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(rec.Calls, "SetPowerLimit(GPU-9,700)") {
			t.Errorf("GPU-9's original, put during the exit's restore, set back: calls %q", rec.Calls)
		}
		if o := journalOriginalsAt(t, p); len(o) != 1 || o[0].Target.GPU != "GPU-9" {
			t.Errorf("journal originals after the exit %+v, want GPU-9's", o)
		}
		if !strings.Contains(logs.String(), "kept for the next start") || strings.Contains(logs.String(), "set back at exit as this run's own") {
			t.Errorf("log %q, want the kept original said kept for the next start", logs.String())
		}
	})
}

// readingPower reads a power limit set of 680 W, putting a journal at the
// path as it reads (between the round's relink and the original's write).
type readingPower struct {
	recorder
	put func()
}

func (r *readingPower) PowerLimitInForce(context.Context, string) (gpu.PowerLimit, error) {
	r.put()
	return gpu.PowerLimit{SetW: 680, InForceW: 680}, nil
}
