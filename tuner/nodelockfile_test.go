package tuner

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNodeLockFileOwnersAlone: the lock's path is never followed through a
// symbolic link (one planted there would have a tuner running as root
// create, or write its note in, the file it names), a lock file another
// user owns is refused (that user could hold it), and the lock file is
// its owner's alone, whatever the umask or the mode an earlier start left
// (a file others may open they may flock, keeping every tuner out).
func TestNodeLockFileOwnersAlone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir, path string) (check func(t *testing.T))
		want  string // the error, "" for taken
	}{
		{"new file", func(*testing.T, string, string) func(*testing.T) { return nil }, ""},
		{"left readable by others", func(t *testing.T, _, path string) func(*testing.T) {
			if err := os.WriteFile(path, []byte(nodeLockHeader+"pid=1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, 0o666); err != nil {
				t.Fatal(err)
			}
			return nil
		}, ""},
		{"symbolic link to a missing file", func(t *testing.T, dir, path string) func(*testing.T) {
			target := filepath.Join(dir, "cron.d-entry")
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
			return func(t *testing.T) {
				if _, err := os.Lstat(target); err == nil {
					t.Errorf("the link's target %s was created", target)
				}
			}
		}, "is a symbolic link, not followed"},
		{"symbolic link to an empty file", func(t *testing.T, dir, path string) func(*testing.T) {
			target := filepath.Join(dir, "empty")
			if err := os.WriteFile(target, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
			return func(t *testing.T) {
				if fi, err := os.Stat(target); err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0o644 {
					t.Errorf("the link's target was written or changed: %v, %v", fi, err)
				}
			}
		}, "is a symbolic link, not followed"},
		{"another user's", func(t *testing.T, _, path string) func(*testing.T) {
			if os.Geteuid() != 0 {
				t.Skip("chown needs root")
			}
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(path, 4242, 4242); err != nil {
				t.Fatal(err)
			}
			return nil
		}, "is owned by uid 4242"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "tuner.lock")
			check := tc.setup(t, dir, path)
			l, err := AcquireNodeLock(path, NodeLockHolder{Mode: "enforce", Started: t0})
			if check != nil {
				check(t)
			}
			if tc.want != "" {
				if err == nil {
					l.Close()
					t.Fatalf("taken, want an error with %q", tc.want)
				}
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %q, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("lock file %v (%v), want mode 0600", fi, err)
			}
		})
	}
}

// TestNodeLockDirectoryNotWritable: an install upgraded from a version
// without the lock, its unit file kept (systemd's ProtectSystem=strict
// leaves /run read-only but for the unit's RuntimeDirectory), is refused
// with an error saying where the directory comes from; other errors are
// not given that line.
func TestNodeLockDirectoryNotWritable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		hint bool
	}{
		{"read-only /run", &os.PathError{Op: "mkdir", Path: "/run/vgpu-exporter", Err: syscall.EROFS}, true},
		{"not root's", &os.PathError{Op: "mkdir", Path: "/run/vgpu-exporter", Err: syscall.EACCES}, true},
		{"no space", &os.PathError{Op: "mkdir", Path: "/run/vgpu-exporter", Err: syscall.ENOSPC}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mkdirAll = func(string, os.FileMode) error { return tc.err }
			defer func() { mkdirAll = os.MkdirAll }()
			path := DefaultNodeLock // its directory is made (here, fails to be)
			l, err := AcquireNodeLock(path, NodeLockHolder{Mode: "enforce", Started: t0})
			if err == nil {
				l.Close()
				t.Fatal("taken")
			}
			s := err.Error()
			if !strings.Contains(s, "creating the directory of "+path+": "+tc.err.Error()) ||
				strings.Contains(s, "tuner-enforce.conf's RuntimeDirectory=vgpu-exporter") != tc.hint {
				t.Errorf("error %q, the line on the directory's source: %v", s, tc.hint)
			}
		})
	}
}

// TestNodeLockDirectoryNotMade: of the lock's directories only the
// default's is made, as systemd's RuntimeDirectory makes it; another
// path's missing directory is refused, naming the path, and not made: a
// mistyped --tuner.node-lock made a second lock of its own, which kept no
// other tuner out. An existing directory is used.
func TestNodeLockDirectoryNotMade(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "rnu", "vgpu-exporter", "tuner.lock"),
			"the directory of " + filepath.Join(dir, "rnu", "vgpu-exporter", "tuner.lock") + ", " + filepath.Join(dir, "rnu", "vgpu-exporter") + ", is not there: of the lock's directories only the default's, /run/vgpu-exporter, is made"},
		{"there", filepath.Join(dir, "tuner.lock"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := AcquireNodeLock(tc.path, NodeLockHolder{Mode: "enforce", Started: t0})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				l.Close()
				return
			}
			if err == nil {
				l.Close()
				t.Fatal("taken")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
			if _, err := os.Lstat(filepath.Join(dir, "rnu")); err == nil {
				t.Errorf("%s made", filepath.Join(dir, "rnu"))
			}
		})
	}
}

// TestNodeLockFIFONotOpened: a path that is no regular file is refused
// before it is opened (opening a device can act: a watchdog's arms it); a
// FIFO's reader, waiting for a writer, is not woken.
func TestNodeLockFIFONotOpened(t *testing.T) {
	fifoNotOpened(t, func(fifo string) error {
		_, err := AcquireNodeLock(fifo, NodeLockHolder{Mode: "enforce", Started: t0})
		return err
	})
}

// fifoNotOpened checks that open refuses a FIFO, "is not a regular file",
// without opening it: a reader waiting on it is not woken.
func fifoNotOpened(t *testing.T, open func(path string) error) {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	woken := make(chan struct{})
	go func() {
		if f, err := os.Open(fifo); err == nil { // blocks until a writer opens it
			f.Close()
		}
		close(woken)
	}()
	time.Sleep(50 * time.Millisecond) // the reader waits
	if err := open(fifo); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("error %v", err)
	}
	select {
	case <-woken:
		t.Error("the FIFO was opened")
	case <-time.After(200 * time.Millisecond):
	}
	if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil { // the reader goes (ENXIO where it went)
		w.Close()
	}
	<-woken
}

// TestNodeLockSameInstant: tuners starting at once, the file not there
// yet, create one file between them, and one alone takes it; the others
// are refused as by a holder (none writes its note over the holder's).
func TestNodeLockSameInstant(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "tuner.lock")
	const n = 8
	start := make(chan struct{})
	type result struct {
		l   *NodeLock
		err error
	}
	out := make(chan result, n)
	for range n {
		go func() {
			<-start
			l, err := acquireNodeLock(path, filepath.Dir(path), NodeLockHolder{Mode: "enforce", Started: t0})
			out <- result{l, err}
		}()
	}
	close(start)
	var held []*NodeLock
	for range n {
		r := <-out
		switch {
		case r.err == nil:
			held = append(held, r.l)
		case !strings.Contains(r.err.Error(), "is held by the tuner of another exporter"):
			t.Errorf("refused otherwise: %v", r.err)
		}
	}
	if len(held) != 1 {
		t.Errorf("%d tuners took the lock, want 1", len(held))
	}
	for _, l := range held {
		l.Close()
	}
}
