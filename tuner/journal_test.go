package tuner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

func originalRec(gpuID string, w float64) Record {
	return Record{Time: t0, Event: EventOriginal, Target: Target{GPU: gpuID, Knob: gpu.KnobPowerLimit}, From: encodeValue(Watts(w))}
}

// openOrFail opens the journal at p within a few seconds: a journal that
// hangs the start is a failure, not a stuck test.
func openOrFail(t *testing.T, p string) (*Journal, error) {
	t.Helper()
	type res struct {
		j   *Journal
		err error
	}
	ch := make(chan res, 1)
	go func() {
		j, err := OpenJournal(p)
		ch <- res{j, err}
	}()
	select {
	case r := <-ch:
		return r.j, r.err
	case <-time.After(5 * time.Second):
		t.Fatalf("opening %s did not return in 5s", p)
		return nil, nil
	}
}

// tornJournal writes a journal at p of one original and a torn last
// record, torn.
func tornJournal(t *testing.T, p, torn string) {
	t.Helper()
	j := openJournal(t, p)
	if err := j.Append(originalRec("GPU-0", 700)); err != nil {
		t.Fatal(err)
	}
	j.Close()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(torn)
	f.Close()
}

// A torn last record (a crash or a full disk during the write) is cut off
// at the next start: the records appended after it are whole, and every
// later start reads them.
func TestJournalTornTailThenAppend(t *testing.T) {
	for _, torn := range []string{
		`{"time":"2026`, // the earlier format
		"J1 0000007b 1234",
		"J1 00000010 00000000 {\"ti", // length says more than is there
	} {
		t.Run(torn, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "journal")
			tornJournal(t, p, torn)
			for start := 1; start <= 3; start++ {
				j, err := OpenJournal(p)
				if err != nil {
					t.Fatalf("start %d: %v", start, err)
				}
				if err := j.Append(originalRec(fmt.Sprintf("GPU-%d", start), 600)); err != nil {
					t.Fatal(err)
				}
				if n := len(j.Originals()); n != start+1 {
					t.Errorf("start %d: %d originals, want %d", start, n, start+1)
				}
				j.Close()
			}
		})
	}
}

// The torn tail is said: counted in the stats, and cut off.
func TestJournalRecoveryIsCounted(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	good, _ := encodeRecord(originalRec("GPU-0", 700))
	if err := os.WriteFile(p, append(good, "J1 000"...), 0o600); err != nil {
		t.Fatal(err)
	}
	j := openJournal(t, p)
	defer j.Close()
	st := j.Stats()
	if st.TornBytes != 6 || st.Dropped["torn"] != 1 || st.Size != int64(len(good)) {
		t.Errorf("stats %+v, want 6 torn bytes, 1 torn record, size %d", st, len(good))
	}
	if fi, _ := os.Stat(p); fi.Size() != int64(len(good)) {
		t.Errorf("file of %d bytes, want %d", fi.Size(), len(good))
	}
}

// Records that do not hold what they must, or whose values are out of
// range, are dropped (counted) when read: they never reach a restore.
func TestJournalRecordsValidatedOnRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	lines := []string{
		`{"event":"original"}`,
		`{"event":"original","target":{"gpu":"GPU-1","knob":"mps_active_threads","pid":7}}`,
		`{"event":"original","target":{"gpu":"GPU-2","knob":"mps_active_threads","pid":7},"from":{"kind":"fraction","num":1e308}}`,
		`{"event":"original","target":{"gpu":"GPU-3","knob":"power_limit"},"from":{"kind":"watts","num":-5}}`,
		`{"event":"original","target":{"gpu":"GPU-4","knob":"compute_timeslice"},"from":{"kind":"timeslice","text":"forever"}}`,
		`{"event":"original","target":{"gpu":"GPU-5","knob":"locked_clocks"},"from":{"kind":"clocks","min_mhz":2000,"max_mhz":100}}`,
		`{"event":"original","target":{"gpu":"GPU-6","knob":"power_limit"},"from":{"kind":"watts","num":700},"pids":[7]}`,
		`{"event":"original","target":{"gpu":"GPU-7","knob":"pause_duty","pid":7},"from":{"kind":"duty","num":0},"pids":[7,0]}`,
		`{"event":"processes","target":{"gpu":"GPU-8","knob":"pause_duty","pid":7}}`,
		`{"time":"2026-01-01T00:00:00Z","event":"original","target":{"gpu":"GPU-0","knob":"power_limit"},"from":{"kind":"watts","num":700}}`,
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	j := openJournal(t, p)
	defer j.Close()
	origs := j.Originals()
	if len(origs) != 1 || origs[0].Target.GPU != "GPU-0" {
		t.Fatalf("originals %+v, want GPU-0's only", origs)
	}
	if n := j.Stats().Dropped["invalid"]; n != 9 {
		t.Errorf("%d records dropped as invalid, want 9", n)
	}
	if err := j.Append(Record{Event: EventOriginal, Target: Target{GPU: "GPU-9", Knob: gpu.KnobPowerLimit}, From: encodeValue(Watts(-5))}); err == nil {
		t.Error("an out-of-range value was written")
	}
}

// A journal line {"event":"original"} does not panic the tuner: it is
// dropped, and the start in enforce mode restores what is valid.
func TestJournalOriginalWithoutValueDoesNotPanic(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	if err := os.WriteFile(p, []byte(`{"event":"original"}`+"\n"+`{"event":"original","target":{"gpu":"GPU-0","knob":"power_limit"}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	j := openJournal(t, p)
	defer j.Close()
	rec := &recorder{}
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(rec), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
			t.Fatal(err)
		}
		if _, err := tu.Restore(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.Calls) != 0 {
		t.Errorf("calls %q, want none", rec.Calls)
	}
}

// Only a regular file is a journal: a FIFO or a device is refused at once
// (a FIFO would hang the start, /dev/full grow the process without bound).
func TestJournalRefusesNonRegularFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	for _, p := range []string{fifo, "/dev/full", "/dev/zero", t.TempDir()} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		j, err := openOrFail(t, p)
		if err == nil {
			j.Close()
			t.Errorf("%s accepted as a journal", p)
		}
	}
}

// A journal path that is no regular file is refused before it is opened,
// as the node lock's is: opening a device can act (a watchdog's arms it),
// and a FIFO's open wakes its reader.
func TestJournalFIFONotOpened(t *testing.T) {
	fifoNotOpened(t, func(fifo string) error {
		j, err := OpenJournal(fifo)
		if err == nil {
			j.Close()
		}
		return err
	})
}

// A line over the record bound is dropped (counted) in bounded memory, and
// a record over it is refused when written.
func TestJournalBoundedRecords(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	good := `{"time":"2026-01-01T00:00:00Z","event":"original","target":{"gpu":"GPU-0","knob":"power_limit"},"from":{"kind":"watts","num":700}}` + "\n"
	huge := `{"event":"planned","reason":"` + strings.Repeat("x", 32<<20) + `"}` + "\n"
	if err := os.WriteFile(p, []byte(huge+good), 0o600); err != nil {
		t.Fatal(err)
	}
	var j *Journal
	var err error
	n := testutil.Allocated(func() { j, err = OpenJournal(p) })
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if n > 4<<20 {
		t.Errorf("reading a 32 MiB line allocated %d bytes", n)
	}
	if len(j.Originals()) != 1 || j.Stats().Dropped["oversize"] != 1 {
		t.Errorf("originals %d, stats %+v", len(j.Originals()), j.Stats())
	}
	err = j.Append(Record{Event: string(OutcomePlanned), Target: Target{GPU: "GPU-0", Knob: gpu.KnobPowerLimit}, Tenant: strings.Repeat("t", MaxRecordBytes)})
	if err == nil {
		t.Error("a record over the bound was written")
	}
}

// The journal stays small: at start it is rewritten to its open originals,
// and while running it is compacted once it grows past its bound.
func TestJournalCompaction(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	var b strings.Builder
	b.WriteString(`{"time":"2026-01-01T00:00:00Z","event":"original","target":{"gpu":"GPU-0","knob":"power_limit"},"from":{"kind":"watts","num":700}}` + "\n")
	b.WriteString(`{"time":"2026-01-01T00:00:00Z","event":"original","target":{"gpu":"GPU-1","knob":"power_limit"},"from":{"kind":"watts","num":500}}` + "\n")
	b.WriteString(`{"event":"restored","target":{"gpu":"GPU-1","knob":"power_limit"}}` + "\n")
	line := `{"event":"planned","target":{"gpu":"GPU-0","knob":"power_limit"},"from":{"kind":"watts","num":700},"to":{"kind":"watts","num":490},"reason":"held back"}` + "\n"
	for b.Len() < 8<<20 {
		b.WriteString(line)
	}
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	j := openJournal(t, p)
	j.Close()
	fi, _ := os.Stat(p)
	if fi.Size() > 1024 {
		t.Errorf("journal of %d bytes after the start, want its one open original", fi.Size())
	}
	var err error
	if j, err = OpenJournalSize(p, 8<<10); err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := 0; i < 500; i++ {
		if err := j.Append(Record{Event: string(OutcomeGuarded), Target: Target{GPU: "GPU-0", Knob: gpu.KnobPowerLimit}, Reason: "held back"}); err != nil {
			t.Fatal(err)
		}
	}
	if fi, _ := os.Stat(p); fi.Size() > 8<<10 || j.Stats().Compactions == 0 {
		t.Errorf("journal of %d bytes after %d compactions, bound 8 KiB", fi.Size(), j.Stats().Compactions)
	}
	if origs := j.Originals(); len(origs) != 1 || origs[0].Value != Watts(700) {
		t.Errorf("originals after compaction %+v", origs)
	}
}

// busyRestarts is an MPS actuator whose client restart is busy (a restart
// still in progress) the first n times.
type busyRestarts struct {
	recorder
	n atomic.Int32
}

func (b *busyRestarts) RestartClient(ctx context.Context, uuid string, pid uint32, tenant string) error {
	if b.n.Add(-1) >= 0 {
		return fmt.Errorf("a restart is in progress: %w", gpu.ErrBusy)
	}
	return b.recorder.RestartClient(ctx, uuid, pid, tenant)
}

// A restore shortly after a change, while the client's restart is still
// in progress, waits for it (until the restore's deadline) instead of
// leaving the setting changed.
func TestRestoreWaitsForBusyActuator(t *testing.T) {
	act := &busyRestarts{}
	tu, err := New(Options{Policy: fixed([]Action{mpsAction(7, 1, 0.4)}), Actuators: ActuatorsOf(act), Clock: gpu.RealClock{}, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	act.n.Store(3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tu.Restore(ctx); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if s := tu.Status(); s.Unrestored != 0 || s.Counts.Restores != 1 {
		t.Errorf("unrestored %d, restores %d", s.Unrestored, s.Counts.Restores)
	}
	// Past the deadline, the failure is returned and the original stays
	// (the change decided from a snapshot sampled after the restore).
	if _, err := tu.RunOnce(context.Background(), emptySnap(time.Now())); err != nil {
		t.Fatal(err)
	}
	act.n.Store(1 << 30)
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := tu.Restore(ctx); !errors.Is(err, gpu.ErrBusy) || tu.Status().Unrestored != 1 {
		t.Errorf("restore past its deadline: %v, unrestored %d", err, tu.Status().Unrestored)
	}
}

// busyUntilExpired is busyRestarts behind an actuator that, as the NVML
// backend does, refuses a call whose context has expired before making it.
type busyUntilExpired struct{ busyRestarts }

func (b *busyUntilExpired) RestartClient(ctx context.Context, uuid string, pid uint32, tenant string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.busyRestarts.RestartClient(ctx, uuid, pid, tenant)
}

// A restore refused as busy until its deadline fails with the refusal's
// why, not only with the error of its last try, which runs on an expired
// context: "context deadline exceeded" alone tells an operator nothing of
// what held the GPU. (A refusal that lasts to the last try is told as it
// is: TestRestoreWaitsForBusyActuator.)
func TestRestoreBusyUntilDeadlineSaysWhy(t *testing.T) {
	act := &busyUntilExpired{}
	p := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, p)
	defer j.Close()
	tu, err := New(Options{Policy: fixed([]Action{mpsAction(7, 1, 0.4)}), Actuators: ActuatorsOf(act), Journal: j, Clock: gpu.RealClock{}, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	act.n.Store(1 << 30)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	d, err := tu.Restore(ctx)
	const told = "refused as busy until the restore stopped waiting: restart client: a restart is in progress: refused while in use"
	if err == nil || !strings.Contains(err.Error(), told) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("restore's error %v: want the busy refusal told beside the deadline", err)
	}
	if want := "restore failed: restart client: context deadline exceeded (" + told + ")"; len(d) != 1 || d[0].Outcome != OutcomeFailed || !strings.Contains(d[0].Reason, want) {
		t.Errorf("decisions %+v: want one failed, its reason holding %q", d, want)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"event":"restore_failed"`) || !strings.Contains(string(data), told) {
		t.Errorf("the journal does not tell the refusal:\n%s", data)
	}
	if tu.Status().Unrestored != 1 {
		t.Errorf("unrestored %d, want 1 (left for the next start)", tu.Status().Unrestored)
	}
}

// A journal that cannot be written stops the tuner from acting, not from
// deciding; restores go on, and it acts again once a write succeeds.
func TestUnwritableJournalStopsActing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, p)
	defer j.Close()
	rec := &recorder{}
	clk := gpu.NewManualClock(t0)
	acts := []Action{{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490)}}
	tu, err := New(Options{Policy: fixed(acts), Actuators: ActuatorsOf(rec), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	failWrites(t)
	d, _ := tu.RunOnce(context.Background(), emptySnap(t0))
	if len(rec.Calls) != 0 || len(d) != 1 || d[0].Outcome != OutcomeRecommended || !strings.Contains(d[0].Reason, "journal cannot be written") {
		t.Fatalf("with an unwritable journal: calls %q, decisions %+v", rec.Calls, d)
	}
	if s := tu.Status(); s.Journal == nil || s.Journal.WriteError == "" || s.Counts.JournalErrors == 0 {
		t.Errorf("status does not say the journal failed: %+v", s.Journal)
	}
	writeFile = (*os.File).Write
	if d, _ := tu.RunOnce(context.Background(), emptySnap(t0)); len(d) != 1 || d[0].Outcome != OutcomeApplied {
		t.Fatalf("journal writable again: decisions %+v", d)
	}
	if s := tu.Status(); s.Journal.WriteError != "" {
		t.Errorf("write error %q after a write succeeded", s.Journal.WriteError)
	}
}

// A journal on a file system mounted read-only (a disk error remounts it
// so) is read and served from, not a failed start: its originals are
// there to be restored, every write fails until the file system is
// writable again, and the first write then cuts the torn tail off first.
func TestJournalOnReadOnlyFileSystem(t *testing.T) {
	dir := t.TempDir()
	if os.Geteuid() != 0 || exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).Run() != nil {
		t.Skip("no tmpfs to remount read-only (needs root)")
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	remount := func(opt string) {
		t.Helper()
		if out, err := exec.Command("mount", "-o", "remount,"+opt, dir).CombinedOutput(); err != nil {
			t.Fatalf("remount %s: %v: %s", opt, err, out)
		}
	}
	p := filepath.Join(dir, "journal")
	tornJournal(t, p, "J1 0000")
	remount("ro")
	for _, missing := range []bool{false, true} {
		path := p
		if missing {
			path = filepath.Join(dir, "none")
		}
		j, err := OpenJournal(path)
		if err != nil {
			t.Fatalf("a journal on a read-only file system (exists %v) failed the start: %v", !missing, err)
		}
		if st := j.Stats(); !strings.Contains(st.WriteError, "read-only") {
			t.Errorf("exists %v: write error %q, want the read-only file system named", !missing, st.WriteError)
		}
		if err := j.Append(originalRec("GPU-1", 600)); err == nil {
			t.Errorf("exists %v: a write to a read-only file system succeeded", !missing)
		}
		if n := len(j.Originals()); !missing && n != 1 {
			t.Errorf("%d originals read, want 1", n)
		}
		j.Close()
	}
	j := openJournal(t, p)
	defer j.Close()
	remount("rw")
	if err := j.Append(originalRec("GPU-1", 600)); err != nil {
		t.Fatalf("the file system writable again: %v", err)
	}
	if st := j.Stats(); st.WriteError != "" {
		t.Errorf("write error %q after a write succeeded", st.WriteError)
	}
	j2 := reopen(t, j, p)
	if st := j2.Stats(); len(j2.Originals()) != 2 || st.TornBytes != 0 {
		t.Errorf("after the writes: %d originals, %d torn bytes; want 2 and 0", len(j2.Originals()), st.TornBytes)
	}
}

// A journal has one writer: a second exporter pointed at the same file
// (two units, two pools on one node) is refused at open, before and
// after a compaction of the first, which would otherwise go on writing
// to the file the second one's compaction replaced, its originals lost.
func TestJournalOneWriter(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	j, err := OpenJournalSize(p, 512)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Append(Record{Time: t0, Event: string(OutcomePlanned), Target: Target{GPU: "GPU-0", Knob: gpu.KnobPowerLimit}}); err != nil {
		t.Fatal(err)
	}
	if j2, err := OpenJournal(p); err == nil || !strings.Contains(err.Error(), "in use") {
		if err == nil {
			j2.Close()
		}
		t.Fatalf("a second writer of the journal: %v, want it refused as in use", err)
	}
	for i := range 8 { // past 512 bytes: compacted
		if err := j.Append(originalRec(fmt.Sprintf("GPU-%d", i), 600)); err != nil {
			t.Fatal(err)
		}
	}
	if j.Stats().Compactions == 0 {
		t.Fatal("no compaction")
	}
	if j2, err := OpenJournal(p); err == nil {
		j2.Close()
		t.Fatal("a second writer of the journal accepted after a compaction")
	}
	if err := j.Append(originalRec("GPU-9", 600)); err != nil {
		t.Fatal(err)
	}
	j2 := reopen(t, j, p)
	if n := len(j2.Originals()); n != 9 {
		t.Errorf("%d originals after reopening, want 9", n)
	}
}

// A file system without locks (NFS without its lock service) does not
// fail the start: the journal is used unlocked there.
func TestJournalWithoutLocks(t *testing.T) {
	for _, e := range []error{syscall.ENOLCK, syscall.EOPNOTSUPP} {
		flock = func(int, int) error { return e }
		j, err := OpenJournal(filepath.Join(t.TempDir(), "journal"))
		flock = syscall.Flock
		if err != nil {
			t.Fatalf("%v from flock: %v", e, err)
		}
		if err := j.Append(originalRec("GPU-0", 700)); err != nil {
			t.Errorf("%v from flock: %v", e, err)
		}
		j.Close()
	}
}

// A journal used after Close fails, naming its path, and takes no file
// or lock again: a second Close is nil. Before, a compaction after Close
// wrote the file again and locked it (a second exporter was then refused),
// a second Close failed, and the other uses failed with the closed file's
// own error ("file already closed").
func TestJournalUseAfterClose(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, p)
	if err := j.Append(originalRec("GPU-0", 700)); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct {
		name string
		use  func() error
	}{
		{"Append", func() error { return j.Append(originalRec("GPU-1", 600)) }},
		{"Compact", j.Compact},
		{"Relink", func() error { _, err := j.Relink(); return err }},
		{"Probe", j.Probe},
	} {
		if err := u.use(); err == nil || !strings.Contains(err.Error(), "used after Close") || !strings.Contains(err.Error(), p) {
			t.Errorf("%s after Close: %v, want an error naming %s and saying it is used after Close", u.name, err, p)
		}
	}
	if err := j.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	other, err := OpenJournal(p) // no lock taken again
	if err != nil {
		t.Fatalf("a second exporter after Close: %v", err)
	}
	defer other.Close()
	if o := other.Originals(); len(o) != 1 || o[0].Target.GPU != "GPU-0" {
		t.Errorf("the journal after Close holds %v, want GPU-0's original alone", o)
	}
}
