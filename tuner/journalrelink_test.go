package tuner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A journal whose path is removed or replaced while the exporter runs (a
// cleanup of its directory, a backup renamed over it, a mv) is written
// again at its path from the originals held, at the next round, and the
// records after it go there: a crash then leaves them for the next start.
// Before, every record went on to the file no name reached any more, and
// a start after a crash found no original (or another file's) and left
// every change made. A path the journal cannot be written at again (a
// directory put there, a file another exporter holds) keeps the tuner from
// acting, with an error naming the path, and is never written over.
func TestJournalRemovedOrReplacedWrittenAgain(t *testing.T) {
	tests := []struct {
		name    string
		replace func(t *testing.T, p string) // what happens to the path
		err     string                       // "" where it is written again
		kept    string                       // what is at the path after the round, where not written again
	}{
		{name: "removed", replace: func(t *testing.T, p string) { os.Remove(p) }},
		{name: "moved away", replace: func(t *testing.T, p string) { os.Rename(p, p+".old") }},
		{name: "replaced by another file", replace: func(t *testing.T, p string) {
			writeOver(t, p, []byte("J1 old backup\n"))
		}},
		{name: "replaced by a named pipe", replace: func(t *testing.T, p string) {
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Skip(err)
			}
		}},
		{name: "replaced by a symbolic link", replace: func(t *testing.T, p string) {
			other := filepath.Join(filepath.Dir(p), "elsewhere")
			if err := os.WriteFile(other, []byte("someone's data\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Remove(p)
			if err := os.Symlink(other, p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "replaced by a directory", err: "was replaced by a directory while in use", replace: func(t *testing.T, p string) {
			os.Remove(p)
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "replaced by another exporter's journal", err: "in use by another process", kept: "the other's", replace: func(t *testing.T, p string) {
			os.Remove(p)
			other := openJournal(t, p) // a second exporter, started once the file was gone
			t.Cleanup(func() { other.Close() })
			if err := other.Append(originalRec("GPU-9", 300)); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "journal")
			j, tu, clk, out := journalTuner(t, p, 0) // GPU-0's original journaled
			tc.replace(t, p)
			if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
				t.Fatal(err)
			}
			werr := tu.journal(originalRec("GPU-1", 600))
			if tc.err != "" {
				if werr == nil || !strings.Contains(werr.Error(), tc.err) || !strings.Contains(werr.Error(), p) {
					t.Fatalf("a write after the round: %v, want an error naming %s and saying %q", werr, p, tc.err)
				}
				if s := tu.Status(); s.Journal == nil || s.Journal.WriteError == "" {
					t.Errorf("the journal served writable: %+v", s.Journal)
				}
				if strings.Count(out.String(), "cannot be written where a start reads it") != 1 {
					t.Errorf("the error is not logged once:\n%s", out)
				}
				if tc.kept != "" {
					if o, err := ReadJournalOriginals(p); err != nil || len(o) != 1 || o[0].Target.GPU != "GPU-9" {
						t.Errorf("%s journal holds %v (%v) after the round, want its own original alone", tc.kept, o, err)
					}
				}
				return
			}
			if werr != nil {
				t.Fatalf("a write after the round: %v", werr)
			}
			if !strings.Contains(out.String(), "written again from the originals held") {
				t.Errorf("no warning says the journal was written again:\n%s", out)
			}
			if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("%s after the round: %v %v, want the journal", p, fi, err)
			}
			j.Close() // (a crash: the next start reads the path)
			o, err := ReadJournalOriginals(p)
			if err != nil || len(o) != 2 || o[0].Target.GPU != "GPU-0" || o[1].Target.GPU != "GPU-1" {
				t.Errorf("a start after a crash reads %v (%v), want the originals of GPU-0 and GPU-1", o, err)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "elsewhere")); err == nil && string(b) != "someone's data\n" {
				t.Errorf("the file a link put at the path named was written: %q", b)
			}
		})
	}
}

// writeOver puts a new file with b at p, as a backup put back does.
func writeOver(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
}

// A journal path removed and then found by a write (before the round)
// is written again by the write, and the tuner says so as the write
// returns (Tuner.journal): the warning is logged once, as for one found
// by the round. Before, the
// write rewrote it silently and the round found the file as it should be.
func TestJournalRewrittenByAWriteLogged(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	_, tu, clk, out := journalTuner(t, p, 0) // GPU-0's original journaled
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := tu.journal(originalRec("GPU-1", 600)); err != nil {
		t.Fatalf("a write after the path was removed: %v", err)
	}
	for range 2 {
		if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
			t.Fatal(err)
		}
	}
	checkRewrittenOnce(t, out, p, "a write", 2)
}

// A file renamed over the journal is held locked by the check of its lock
// until the journal is written over it: another exporter started in that
// gap is refused it, rather than having its journal replaced under it.
// Before, the lock was let go before the rename, and the other exporter's
// journal, opened in the gap, was renamed over: the path named a file it
// did not hold, and its next record found it in use.
func TestJournalReplacingFileHeldUntilWrittenOver(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	x := openWithOriginal(t, p, "GPU-0")
	writeOver(t, p, nil) // an empty file renamed over it
	var other *Journal
	beforeRename = func(string, string) {
		beforeRename = func(string, string) {}
		if o, err := OpenJournal(p); err == nil { // another exporter, started now
			other = o
			t.Cleanup(func() { o.Close() })
		}
	}
	t.Cleanup(func() { beforeRename = func(string, string) {} })
	if _, err := x.Relink(); err != nil {
		t.Fatal(err)
	}
	if other != nil {
		_, err := other.Relink()
		t.Errorf("another exporter locked %s as it was about to be written over, and lost it (its next check: %v)", p, err)
	}
	if o, err := ReadJournalOriginals(p); err != nil || len(o) != 1 || o[0].Target.GPU != "GPU-0" {
		t.Errorf("the path holds %v (%v), want GPU-0's original", o, err)
	}
}

// A journal removed is written again at its path only where the path is
// still free: another exporter's journal created there in between (it
// found the path free too) is not replaced, and this one stops acting,
// its error naming the path. Before, the rename replaced the other's
// journal: both believed they held the path, and the other's records went
// on to a file no name reached.
func TestJournalRemovedWrittenAgainOnlyWhereFree(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	x := openWithOriginal(t, p, "GPU-0")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	var other *Journal
	beforeRename = func(string, string) {
		beforeRename = func(string, string) {}
		other = openWithOriginal(t, p, "GPU-9") // another exporter, started now
	}
	t.Cleanup(func() { beforeRename = func(string, string) {} })
	if _, err := x.Relink(); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "put there") {
		t.Errorf("the relink over another's new journal: %v, want an error naming %s, saying a file was put there", err, p)
	}
	if r, err := other.Relink(); err != nil || r.Replaced {
		t.Errorf("the other exporter's check: %+v, %v; want its journal where it is", r, err)
	}
	if o, err := ReadJournalOriginals(p); err != nil || len(o) != 1 || o[0].Target.GPU != "GPU-9" {
		t.Errorf("the path holds %v (%v), want the other's GPU-9 original", o, err)
	}
	if left, _ := filepath.Glob(p + ".tmp*"); len(left) > 0 {
		t.Errorf("temporary files left beside the journal: %v", left)
	}
}

// A file renamed over the journal is read before the journal is written
// over it: a journal (one put there on purpose, another run's) has the
// originals it holds and this process does not kept beside this process's
// own, set back at exit as its own, a target both hold keeping this
// process's, and the warning says how many; its bad records are counted
// as dropped. A file that is not a journal is left as it is, and the
// tuner stops acting, naming the path. Before, either was written over
// from memory unread: the originals in it were lost without a word.
func TestJournalReplacingFileRead(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "journal")
	j, tu, clk, out := journalTuner(t, p, 0) // GPU-0's original, 700 W
	// the start's restore made: GPU-9's original, kept, is set back at exit
	if _, err := tu.Recover(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	put := filepath.Join(dir, "put")
	pj := openWithOriginal(t, put, "GPU-9")
	if err := pj.Append(originalRec("GPU-0", 100)); err != nil {
		t.Fatal(err)
	}
	pj.Close()
	f, err := os.OpenFile(put, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("J1 spoiled\n")
	f.Close()
	if err := os.Rename(put, p); err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
		t.Fatal(err)
	}
	o, err := ReadJournalOriginals(p)
	if err != nil || len(o) != 2 || o[0].Target.GPU != "GPU-0" || o[0].Value != Watts(700) || o[1].Target.GPU != "GPU-9" {
		t.Errorf("the path holds %v (%v), want GPU-0's original of this process (700 W) and GPU-9's of the file put there", o, err)
	}
	if !strings.Contains(out.String(), "originals this process did not hold") || !strings.Contains(out.String(), "kept=1") {
		t.Errorf("no warning says 1 original of the file put there was kept:\n%s", out)
	}
	if n := j.Stats().Dropped["corrupt"]; n != 1 {
		t.Errorf("%d records of the file put there counted as corrupt, want 1", n)
	}

	passwd := []byte("root:x:0:0:root:/root:/bin/bash\n")
	writeOver(t, p, passwd)
	if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != string(passwd) {
		t.Errorf("a file that is not a journal, put at the path, holds %q (%v) after the round, want it left as it is", b, err)
	}
	if err := tu.journal(originalRec("GPU-1", 600)); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not a tuner journal") {
		t.Errorf("a write with a file that is not a journal at the path: %v, want an error naming %s", err, p)
	}
}

// The originals of a journal renamed over this one stay held once the
// journal is written again with them, though the directory's sync after
// it fails (it is tried again before the next record): a later compaction
// writes them again, and the next check says they were kept. Before, a
// failed sync let them go from memory, and the next compaction left them
// out of the file they were in.
func TestJournalReplacingFileKeptThroughFailedDirectorySync(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "journal")
	x := openWithOriginal(t, p, "GPU-0")
	put := filepath.Join(dir, "put")
	openWithOriginal(t, put, "GPU-9").Close()
	if err := os.Rename(put, p); err != nil {
		t.Fatal(err)
	}
	syncs := recordDirSyncs(t)
	syncs.err = syscall.EIO
	if _, err := x.Relink(); err == nil {
		t.Error("a relink whose directory sync failed succeeded")
	}
	syncs.err = nil
	if err := x.Append(originalRec("GPU-1", 600)); err != nil {
		t.Fatal(err)
	}
	if r, err := x.Relink(); err != nil || r.Kept != 1 {
		t.Errorf("the relink after: %+v, %v; want GPU-9's original said kept", r, err)
	}
	if err := x.Compact(); err != nil {
		t.Fatal(err)
	}
	if o, err := ReadJournalOriginals(p); err != nil || len(o) != 3 {
		t.Errorf("the path holds %v (%v), want the originals of GPU-0, GPU-1 and GPU-9", o, err)
	}
}

// A journal removed while in use is written again at exit and that is
// logged: no round follows the exit to say it. Removed before the exit,
// it is written again as the exit's restore begins; removed after the
// restore's last write (here the record of a restore that failed), only
// the check of the path at the end of the exit finds it, and writes it
// again with the original left for the next start. Before, the rewrite at
// exit was not logged; without that last check, the journal stayed gone,
// and the original left for the next start with it.
func TestJournalRewrittenAtExitLogged(t *testing.T) {
	for _, tc := range []struct {
		name string
		// removeAfter: the record of the exit's restore after whose write
		// the path is removed ("": before the exit)
		removeAfter string
		failRestore bool
		open        int // originals at the path after the exit
	}{
		{name: "removed before the exit", open: 0},
		{name: "removed after the exit's last write", removeAfter: EventRestoreFailed, failRestore: true, open: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "journal")
			j := openJournal(t, p)
			defer j.Close()
			out := &strings.Builder{}
			rec := &recorder{}
			power := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490)}
			tu, err := New(Options{Policy: fixed{power}, Actuators: ActuatorsOf(rec), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce,
				Logger: log.NewLogfmtLogger(log.NewSyncWriter(out))})
			if err != nil {
				t.Fatal(err)
			}
			if ds, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil || len(ds) != 1 || ds[0].Outcome != OutcomeApplied {
				t.Fatalf("decisions %+v (%v), want the power limit applied", ds, err)
			}
			if tc.failRestore {
				rec.Errs = map[string]error{"SetPowerLimit": errors.New("refused")}
			}
			if tc.removeAfter == "" {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			} else {
				removeAfterWriteOf(t, p, tc.removeAfter)
			}
			if _, err := tu.Restore(context.Background()); (err != nil) != tc.failRestore {
				t.Fatalf("restore at exit: %v, want failed %v", err, tc.failRestore)
			}
			checkRewrittenOnce(t, out, p, "the exit", tc.open)
		})
	}
}

// removeAfterWriteOf removes the journal at p right after the journal's
// write of the first record of event, as another process could.
func removeAfterWriteOf(t *testing.T, p, event string) {
	t.Helper()
	done := false
	writeFile = func(f *os.File, b []byte) (int, error) {
		n, err := f.Write(b)
		if !done && bytes.Contains(b, []byte(`"event":"`+event+`"`)) {
			done = true
			if rerr := os.Remove(p); rerr != nil {
				t.Errorf("removing %s after the write of %s: %v", p, event, rerr)
			}
		}
		return n, err
	}
	t.Cleanup(func() { writeFile = (*os.File).Write })
}

// The originals of a journal renamed over this one are this run's to set
// back: a later change of the same target keeps the kept original (not
// the value this run found), and the exit sets that back and closes it.
// Before, they stayed in the journal alone: the change journaled GPU-9's
// 500 W as its original in memory, the exit set 500 W back and closed
// the original, and the 700 W the file put there held was lost.
func TestJournalReplacingFileOriginalsAdopted(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "journal")
	j := openJournal(t, p)
	defer j.Close()
	rec := &recorder{}
	clk := gpu.NewManualClock(t0)
	power := func(gpuID string, from, to float64) fixed {
		return fixed{{Target: Target{GPU: gpuID, Knob: gpu.KnobPowerLimit}, Current: Watts(from), Want: Watts(to), Reason: "test"}}
	}
	tu, err := New(Options{Policy: power(uuid0, 700, 600), Actuators: ActuatorsOf(rec), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	round := func(p fixed) []string {
		t.Helper()
		tu.o.Policy = p
		clk.Advance(15 * time.Second)
		d, err := tu.RunOnce(context.Background(), emptySnap(clk.Now()))
		if err != nil {
			t.Fatal(err)
		}
		return outcomes(d)
	}
	if got := round(power(uuid0, 700, 600)); !slices.Equal(got, []string{"power_limit applied"}) {
		t.Fatalf("round changing GPU-0's limit: %v", got)
	}
	put := filepath.Join(dir, "put")
	openWithOriginal(t, put, "GPU-9").Close() // GPU-9's original, 700 W
	if err := os.Rename(put, p); err != nil {
		t.Fatal(err)
	}
	round(nil)
	if e := tu.Status().Exit; e.AtExit != 2 {
		t.Errorf("exit restores %+v after the relink, want GPU-0's and GPU-9's set back at exit", e)
	}
	if got := round(power("GPU-9", 500, 400)); !slices.Equal(got, []string{"power_limit applied"}) {
		t.Fatalf("round changing GPU-9's limit: %v", got)
	}
	if _, err := tu.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rec.Calls, "SetPowerLimit(GPU-9,700)") {
		t.Errorf("calls %q, want GPU-9's kept original, 700 W, set back at exit", rec.Calls)
	}
	if o, err := ReadJournalOriginals(p); err != nil || len(o) != 0 {
		t.Errorf("the path holds %v (%v) after the exit, want every original closed", o, err)
	}
}

// A file that is not a journal, put at the path, is read once: the
// rounds and writes after it find the same file, of the same size,
// modification time and change time, and do not read it again (a large
// file was read in full at every round and every write); once it
// changes, it is read again, even where written in place with its size
// and modification time put back (touch -r, cp -p): its change time,
// which no user sets, moved. (That rewrite was not read again, the
// journal written there left refused.)
func TestJournalForeignFileNotReadAgainUntilChanged(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "journal")
	j := openWithOriginal(t, p, "GPU-0")
	other := filepath.Join(dir, "other")
	openWithOriginal(t, other, "GPU-9").Close()
	journal, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	foreign := append(bytes.Repeat([]byte("x"), len(journal)-1), '\n')
	writeOver(t, p, foreign)
	if _, err := j.Relink(); err == nil || !strings.Contains(err.Error(), "not a tuner journal") {
		t.Fatalf("relink over a file that is not a journal: %v, want it refused", err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	found := j.foreign
	if _, err := j.Relink(); err == nil || !strings.Contains(err.Error(), "not a tuner journal") || j.foreign != found {
		t.Errorf("relink over the same file unchanged: %v, want the refusal again without reading it", err)
	}
	// (a file's times move by the kernel's tick)
	time.Sleep(20 * time.Millisecond)
	if err := os.WriteFile(p, journal, 0o600); err != nil { // (in place: the same file)
		t.Fatal(err)
	}
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil { // (touch -r, cp -p)
		t.Fatal(err)
	}
	if r, err := j.Relink(); err != nil || r.Kept != 1 {
		t.Errorf("relink over the file written in place, its size and modification time put back: %+v, %v; want it read (its change time moved), GPU-9's original kept", r, err)
	}
}

// checkRewrittenOnce fails the test unless out logs the journal's rewrite
// at p (made by by) once, and p then holds want open originals.
func checkRewrittenOnce(t *testing.T, out fmt.Stringer, p, by string, want int) {
	t.Helper()
	if n := strings.Count(out.String(), "written again from the originals held"); n != 1 {
		t.Errorf("the rewrite by %s is logged %d times, want once:\n%s", by, n, out)
	}
	if o := journalOriginalsAt(t, p); len(o) != want {
		t.Errorf("the path holds %v, want %d open originals", o, want)
	}
}
