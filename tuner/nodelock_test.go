package tuner

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNodeLockSecondRefused: two tuners whose journals are in different
// directories take the one node lock; the second is refused, its error
// naming the lock and the holder's note (PID, namespace, journal), and the
// holder's note is left as it was. Before, nothing kept them apart.
func TestNodeLockSecondRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "tuner.lock") // directory created, as the default's
	first, err := acquireNodeLock(path, filepath.Dir(path), NodeLockHolder{Journal: "/var/lib/vgpu-exporter/tuner-journal.jsonl", Mode: "enforce", Started: t0})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	held := readFile(t, path)
	_, err = AcquireNodeLock(path, NodeLockHolder{Journal: "/var/lib/vgpu_exporter/tuner-journal.jsonl", Mode: "enforce", Started: t0.Add(time.Hour)})
	if err == nil {
		t.Fatal("a second tuner took the node lock its first holds")
	}
	for _, want := range []string{path, "held by", fmt.Sprintf("pid=%d ", os.Getpid()), "pid_namespace=", `journal="/var/lib/vgpu-exporter/tuner-journal.jsonl"`, "started=" + t0.UTC().Format(time.RFC3339)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if now := readFile(t, path); string(now) != string(held) {
		t.Errorf("the refused tuner changed the holder's note: %q, was %q", now, held)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := AcquireNodeLock(path, NodeLockHolder{Mode: "enforce", Started: t0})
	if err != nil {
		t.Fatalf("after the holder closed it: %v", err)
	}
	defer again.Close()
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), `journal="none"`) || strings.Count(string(b), "\n") != 2 {
		t.Errorf("the new holder's note: %q, want its own alone", b)
	}
}

// TestNodeLockFreedByDeath: a holder killed (SIGKILL, no cleanup of its
// own) frees the lock: the kernel releases a flock with the last file
// descriptor of its open file; a stale lock file stays and is taken over.
func TestNodeLockFreedByDeath(t *testing.T) {
	if p := os.Getenv("VGPU_TEST_NODE_LOCK"); p != "" {
		if _, err := AcquireNodeLock(p, NodeLockHolder{Journal: "child", Mode: "enforce", Started: t0}); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("held")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	path := filepath.Join(t.TempDir(), "tuner.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestNodeLockFreedByDeath$")
	cmd.Env = append(os.Environ(), "VGPU_TEST_NODE_LOCK="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "held\n" {
		t.Fatalf("holder: %q", line)
	}
	_, err = AcquireNodeLock(path, NodeLockHolder{Mode: "enforce", Started: t0})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid=%d ", cmd.Process.Pid)) || !strings.Contains(err.Error(), fmt.Sprintf("/proc/locks: pid %d here, its cgroup ", cmd.Process.Pid)) {
		t.Fatalf("while the holder lives: %v, want refused naming pid %d, as it wrote and as /proc/locks says", err, cmd.Process.Pid)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	l, err := AcquireNodeLock(path, NodeLockHolder{Mode: "enforce", Started: t0})
	if err != nil {
		t.Fatalf("after the holder died: %v", err)
	}
	l.Close()
}

// TestNodeLockRefusals: a lock path that cannot be created or is not a
// node lock's gives an error naming it, never hangs (a FIFO), and never
// writes a file that is not a node lock (another file given by mistake
// stays byte for byte); a file system without locks is refused, as a lock
// there would keep nobody out.
func TestNodeLockRefusals(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
		flock            error
	}{
		{"parent is a file", filepath.Join(file, "tuner.lock"), "the directory of " + filepath.Join(file, "tuner.lock") + ", " + file + ", is not a directory", nil},
		// the type in words: "(d---------)" read as a directory no one may open
		{"a directory", dir, dir + " is not a regular file (a directory), not opened", nil},
		{"a FIFO", fifo, fifo + " is not a regular file (a named pipe), not opened", nil},
		{"another file", file, file + " holds something other than a node lock", nil},
		{"no locks (NFS)", filepath.Join(dir, "nfs.lock"), "file system without locks", syscall.ENOLCK},
		{"lock error", filepath.Join(dir, "eio.lock"), "locking " + filepath.Join(dir, "eio.lock") + ": input/output error", syscall.EIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.flock != nil {
				flock = func(int, int) error { return tc.flock }
				defer func() { flock = syscall.Flock }()
			}
			l, err := AcquireNodeLock(tc.path, NodeLockHolder{Mode: "enforce", Started: t0})
			if err == nil {
				l.Close()
				t.Fatalf("taken, want an error with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want %q", err, tc.want)
			}
		})
	}
	if b, _ := os.ReadFile(file); string(b) != "root:x:0:0:root:/root:/bin/bash\n" {
		t.Errorf("a file not a node lock was written: %q", b)
	}
}

// TestNodeLockHostileNote: a note with terminal escapes (C0 and C1), a
// bidirectional override, bytes not UTF-8 and line breaks (a lock file
// written by another hand) reaches the error as printable text, its first
// line only.
func TestNodeLockHostileNote(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tuner.lock")
	first, err := AcquireNodeLock(path, NodeLockHolder{Mode: "enforce", Started: t0})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := first.write("pid=1 \x1b[2Jhost=x\rforged\u009b2J\u202egol\xff\nlevel=error msg=forged\n"); err != nil {
		t.Fatal(err)
	}
	_, err = AcquireNodeLock(path, NodeLockHolder{Mode: "enforce", Started: t0})
	if err == nil {
		t.Fatal("taken")
	}
	if s := err.Error(); strings.ContainsAny(s, "\x1b\r\n\u009b\u202e") || strings.Contains(s, "level=error") || !strings.Contains(s, `pid=1 \x1b[2Jhost=x\rforged\u009b2J\u202egol\xff`) {
		t.Errorf("error %q", s)
	}
}

// TestNodeLockNotInherited: a child the exporter runs (the pause
// watchdog, a hook) does not inherit the lock's file, so it cannot hold
// the lock past the exporter: once the holder closes it, it is free while
// the child still runs.
func TestNodeLockNotInherited(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tuner.lock")
	l, err := AcquireNodeLock(path, NodeLockHolder{Mode: "enforce", Started: t0})
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	l.Close()
	again, err := AcquireNodeLock(path, NodeLockHolder{Mode: "enforce", Started: t0})
	if err != nil {
		t.Fatalf("with the holder's child running: %v", err)
	}
	again.Close()
}
