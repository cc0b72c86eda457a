package tuner

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A journal on a read-only file system is locked as a writable one is:
// while another process's tuner holds it (through another mount of the
// same file), a second open is refused, as on the writable mount; once
// it is let go, the open succeeds, read-only, and holds the lock itself.
// On NFS, whose flock is a byte-range lock, an exclusive lock needs a file
// opened for writing (flock(2)): the read-only open takes a shared one,
// which a writer's exclusive lock still excludes.
func TestJournalReadOnlyIsLocked(t *testing.T) {
	for _, fl := range []struct {
		name  string
		flock func(fd, how int) error
	}{{"local", syscall.Flock}, {"NFS", nfsFlock}} {
		t.Run(fl.name, func(t *testing.T) {
			flock = fl.flock
			defer func() { flock = syscall.Flock }()
			rw := t.TempDir()
			if err := writeJournal(t, filepath.Join(rw, "journal"), originalRec("GPU-1", 600)).Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(testutil.BindReadOnly(t, rw), "journal")
			holder := openJournal(t, filepath.Join(rw, "journal"))
			if j, err := OpenJournal(path); err == nil || !strings.Contains(err.Error(), "in use by another process") {
				t.Errorf("a read-only open of a journal another tuner holds: %v, want refused as in use", err)
				if j != nil {
					j.Close()
				}
			}
			holder.Close()
			j, err := OpenJournal(path)
			if err != nil {
				t.Fatalf("a read-only open of a journal nobody holds: %v", err)
			}
			defer j.Close()
			if st := j.Stats(); !strings.Contains(st.WriteError, "read-only") || len(j.Originals()) != 1 {
				t.Errorf("write error %q, %d originals; want the read-only file system named and 1", st.WriteError, len(j.Originals()))
			}
			if other, err := OpenJournal(filepath.Join(rw, "journal")); err == nil {
				other.Close()
				t.Error("a writable open of a journal held read-only succeeded: a journal has one holder")
			}
		})
	}
}

// nfsFlock is flock as NFS has it: an exclusive lock on a file opened
// read-only fails with EBADF.
func nfsFlock(fd, how int) error {
	mode, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFL, 0)
	if errno != 0 {
		return errno
	}
	if how&syscall.LOCK_EX != 0 && mode&syscall.O_ACCMODE == syscall.O_RDONLY {
		return syscall.EBADF
	}
	return syscall.Flock(fd, how)
}

// A start with the tuner off on a journal it cannot write thaws the
// paused tenants all the same (a tenant left frozen is the worse harm),
// and warns that the originals stay open, for the next start to thaw
// again; while another exporter's tuner holds the journal (through
// another mount of the same file), it thaws nothing.
func TestStartOffReadOnlyJournal(t *testing.T) {
	pause := Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 7},
		Tenant: "train", From: encodeValue(Duty(0)), PIDs: []uint32{7, 8}}
	for _, c := range []struct {
		name  string
		held  bool
		calls []string
		log   string
	}{
		{"nobody holds it", false, []string{"SetPauseDuty(GPU-0,train,[7 8],0)"}, "the next start thaws them again"},
		{"another tuner holds it", true, nil, "cannot be opened and locked"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rw := t.TempDir()
			if err := writeJournal(t, filepath.Join(rw, "journal"), pause).Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(testutil.BindReadOnly(t, rw), "journal")
			if c.held {
				j := openJournal(t, filepath.Join(rw, "journal"))
				defer j.Close()
			}
			rec := &pauseRecorder{}
			var logs strings.Builder
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := StartOff(ctx, path, gpu.NewManualClock(t0.Add(time.Hour)), func() (Actuators, error) { return ActuatorsOf(rec), nil }, log.NewLogfmtLogger(&logs))
			if c.held != (err != nil) {
				t.Errorf("error %v, want one: %v", err, c.held)
			}
			if !slices.Equal(rec.Calls, c.calls) {
				t.Errorf("calls %q, want %q", rec.Calls, c.calls)
			}
			if !strings.Contains(logs.String(), c.log) {
				t.Errorf("no %q in the log:\n%s", c.log, logs.String())
			}
			if origs, err := ReadJournalOriginals(path); err != nil || len(origs) != 1 {
				t.Errorf("%d open originals (%v), want the pause's, open", len(origs), err)
			}
		})
	}
}
