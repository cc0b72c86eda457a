package sim

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// persistent returns a Persistent keeping its settings in a temporary
// directory, and the settings file's path.
func persistent(t *testing.T) (*Persistent, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "settings.json")
	p, err := Persist(mustNew(t, pauseSc(t, "mps"), Options{}), path)
	if err != nil {
		t.Fatal(err)
	}
	return p, path
}

// within runs f and returns its error, failing the test when f has not
// returned after 5 s; unblock then releases what f is blocked on.
func within(t *testing.T, what string, f func() error, unblock func()) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		unblock()
		t.Fatalf("%s still blocked after 5s", what)
		return nil
	}
}

// openFIFO opens the FIFO's other end without blocking, releasing a
// blocked open of it.
func openFIFO(path string, flag int) func() {
	return func() {
		if f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}
}

// TestPersistWriteRefusesTempNotRegular: a FIFO where the settings file's
// temporary file goes used to block the write for good, holding the lock
// (the tuner's change, and its restore at exit, hung); it is refused,
// naming it, and the setting is not made.
func TestPersistWriteRefusesTempNotRegular(t *testing.T) {
	for _, kind := range []string{"a FIFO", "a directory"} {
		t.Run(kind, func(t *testing.T) {
			p, path := persistent(t)
			tmp := path + ".tmp"
			if kind == "a FIFO" {
				if err := syscall.Mkfifo(tmp, 0o600); err != nil {
					t.Skipf("no FIFO here: %v", err)
				}
			} else if err := os.Mkdir(tmp, 0o700); err != nil {
				t.Fatal(err)
			}
			uuid := p.sc.GPUs[0].UUID
			before := p.gpus[0].powerLimit
			err := within(t, "SetPowerLimit", func() error {
				return p.SetPowerLimit(context.Background(), uuid, 500)
			}, openFIFO(tmp, os.O_RDONLY))
			if err == nil || !strings.Contains(err.Error(), tmp) || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("SetPowerLimit with %s at %s: %v, want an error naming it, not a regular file", kind, tmp, err)
			}
			if got := p.gpus[0].powerLimit; got != before {
				t.Errorf("power limit %g after the refused write, want %g", got, before)
			}
			// The lock is free: the next change is not blocked behind it.
			if fi, err := os.Lstat(tmp); err != nil || fi.Mode().IsRegular() {
				t.Errorf("%s: %v, %v; want it left as it was", tmp, fi, err)
			}
		})
	}
}

// A stale temporary file (a crash between the write and the rename) is
// replaced, and a symbolic link there is replaced, not followed.
func TestPersistWriteReplacesStaleTemp(t *testing.T) {
	p, path := persistent(t)
	tmp := path + ".tmp"
	target := filepath.Join(filepath.Dir(path), "target")
	if err := os.WriteFile(target, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	uuid := p.sc.GPUs[0].UUID
	if err := p.SetPowerLimit(context.Background(), uuid, 500); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "kept" {
		t.Errorf("the link's target holds %q, %v; want it untouched", b, err)
	}
	set, err := ReadPersisted(path)
	if err != nil || len(set) != 1 || set[0].Current.Num != 500 {
		t.Errorf("settings %+v, %v; want the power limit of 500 W", set, err)
	}
	if err := os.WriteFile(tmp, []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.SetPowerLimit(context.Background(), uuid, 400); err != nil {
		t.Fatal(err)
	}
	if set, err := ReadPersisted(path); err != nil || len(set) != 1 || set[0].Current.Num != 400 {
		t.Errorf("settings %+v, %v; want the power limit of 400 W", set, err)
	}
}

// TestRestartClientRefusesHangNotRegular: a FIFO at the ".hang" file used
// to block RestartClient for good, its context ignored; it is refused,
// naming it.
func TestRestartClientRefusesHangNotRegular(t *testing.T) {
	p, path := persistent(t)
	hang := path + ".hang"
	if err := syscall.Mkfifo(hang, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := within(t, "RestartClient", func() error {
		return p.RestartClient(ctx, p.sc.GPUs[0].UUID, 1, "a")
	}, openFIFO(hang, os.O_WRONLY))
	if err == nil || !strings.Contains(err.Error(), hang) || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("RestartClient with a FIFO at %s: %v, want an error naming it, not a regular file", hang, err)
	}
}

// A ".hang" file holding a duration holds the restart until its context
// ends.
func TestRestartClientHangKeepsToContext(t *testing.T) {
	p, path := persistent(t)
	if err := os.WriteFile(path+".hang", []byte("1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := within(t, "RestartClient", func() error {
		return p.RestartClient(ctx, p.sc.GPUs[0].UUID, 1, "a")
	}, cancel)
	if err != context.DeadlineExceeded {
		t.Errorf("RestartClient held by .hang: %v, want its context's deadline", err)
	}
}

// TestRestartClientRefusesBadHang: a ".hang" file that holds no duration
// (garbage, an empty file, a negative duration) fails the restart at once,
// naming the file and what it holds; it held the restart an hour,
// silently. The restart's context is ended already, so that the wait the
// old code made returns at once, with the context's error.
func TestRestartClientRefusesBadHang(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"garbage", "soon\n", `"soon" is not a duration such as 2s`},
		{"empty", "", `"" is not a duration such as 2s`},
		{"negative", "-5s", `"-5s" is not a duration such as 2s`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, path := persistent(t)
			hang := path + ".hang"
			if err := os.WriteFile(hang, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := p.RestartClient(ctx, p.sc.GPUs[0].UUID, 1, "a")
			if err == nil || !strings.Contains(err.Error(), hang) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("RestartClient with %q in %s: %v, want an error naming it and %q", tc.content, hang, err, tc.want)
			}
		})
	}
}
