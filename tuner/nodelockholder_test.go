package tuner

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/cgroupfile"
)

// statInfo is a FileInfo of the device and inode given.
type statInfo struct {
	fs.FileInfo
	st syscall.Stat_t
}

func (s statInfo) Sys() any { return &s.st }

// TestLockHolderPID: the holder of a flock on the file is read from
// /proc/locks by the file's device and inode; a waiter's line, a POSIX
// lock, another file's, a holder listed as 0 (not visible from this PID
// namespace) and lines cut short name none.
func TestLockHolderPID(t *testing.T) {
	fi := statInfo{st: syscall.Stat_t{Dev: 0xfe00, Ino: 9978365}} // fe:00
	for _, tc := range []struct {
		name, locks string
		want        int
	}{
		{"holder", "1: FLOCK  ADVISORY  WRITE 17046 fe:00:9978365 0 EOF\n", 17046},
		{"among others", "1: POSIX  ADVISORY  WRITE 11 fe:00:9978365 0 EOF\n2: FLOCK  ADVISORY  WRITE 12 fe:00:42 0 EOF\n3: FLOCK  ADVISORY  WRITE 13 fe:00:9978365 0 EOF\n", 13},
		{"a waiter", "1: -> FLOCK  ADVISORY  WRITE 14 fe:00:9978365 0 EOF\n", 0},
		{"not visible", "1: FLOCK  ADVISORY  WRITE 0 fe:00:9978365 0 EOF\n", 0},
		{"another device", "1: FLOCK  ADVISORY  WRITE 15 08:01:9978365 0 EOF\n", 0},
		{"cut short", "1: FLOCK  ADVISORY  WRITE 16\n", 0},
		{"empty", "", 0},
	} {
		if got := lockHolderPID(strings.NewReader(tc.locks), fi); got != tc.want {
			t.Errorf("%s: pid %d, want %d", tc.name, got, tc.want)
		}
	}
	// a large device number (major 259, minor 300: NVMe partitions)
	big := statInfo{st: syscall.Stat_t{Dev: 259<<8 | (300 & 0xff) | (300&^0xff)<<12, Ino: 7}}
	if got := lockHolderPID(strings.NewReader("1: FLOCK  ADVISORY  WRITE 21 103:12c:7 0 EOF\n"), big); got != 21 {
		t.Errorf("major 259, minor 300: pid %d, want 21", got)
	}
}

// TestNodeLockKernelHolder: the refused start's error names the holder as
// /proc/locks gives it, with its cgroup, beside the note it wrote (which
// a holder that has not written it yet, or a stale one, lacks).
func TestNodeLockKernelHolder(t *testing.T) {
	path := t.TempDir() + "/tuner.lock"
	l, err := AcquireNodeLock(path, NodeLockHolder{Mode: "enforce", Started: t0})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.write(""); err != nil { // as a holder that has just locked it
		t.Fatal(err)
	}
	_, err = AcquireNodeLock(path, NodeLockHolder{Mode: "enforce", Started: t0.Add(time.Minute)})
	cg, _ := readBounded("/proc/self/cgroup", 1<<16)
	want := fmt.Sprintf("/proc/locks: pid %d here", os.Getpid()) + ", its cgroup " + unifiedCgroup(cg, nil)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "no note of its holder") {
		t.Errorf("error %v, want %q and no note", err, want)
	}
}

// TestUnifiedCgroupForged: the holder's cgroup in the refused start's
// error is the unified line's path, quoted; a file with a line forged by
// a cgroup name with a line break in it (a holder in a delegated subtree
// may name its cgroup "x\n0::/kubepods/pod<another's UID>/...") shows no
// path at all, neither the forged one nor its own.
func TestUnifiedCgroupForged(t *testing.T) {
	const other = "/kubepods/pod0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5/c"
	for _, tc := range []struct {
		name, file, want, not string
	}{
		{"v2", "0::/system.slice/tuner.service\n", `"/system.slice/tuner.service"`, ""},
		{"hybrid", "4:memory:/user.slice\n0::/system.slice/tuner.service\n", `"/system.slice/tuner.service"`, ""},
		{"v1 only", "4:memory:/user.slice\n", `""`, ""},
		{"a forged unified line", "0::/user.slice/x\n0::" + other + "\n", "refused", "/kubepods"},
		{"a forged line after v1 ones", "4:memory:/user.slice/x\n0::" + other + "\n4:memory:/y\n", "refused", "/kubepods"},
		{"a forged line with no hierarchy", "0::/user.slice/x\nits cgroup /kubepods\n", "refused", "/user.slice"},
	} {
		got := unifiedCgroup([]byte(tc.file), nil)
		if !strings.Contains(got, tc.want) || tc.not != "" && strings.Contains(got, tc.not) {
			t.Errorf("%s: %s, want %s and not %q", tc.name, got, tc.want, tc.not)
		}
	}
}

// TestUnifiedCgroupForgedOnHost: where no cgroup2 is mounted (this
// process's own file lists no "0::"), a holder's "0::" line, listed last
// as the kernel lists the unified one, is a cgroup name's (a kernel before
// 4.13, a delegated name=systemd subtree): refused, its path never shown
// as the holder's (only within the forged line the refusal quotes); a
// hybrid host's shows it, and a legacy host's honest file shows none.
func TestUnifiedCgroupForgedOnHost(t *testing.T) {
	const (
		other  = "/kubepods/pod0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5/c"
		legacy = "4:memory:/\n1:name=systemd:/system.slice/vgpu-exporter.service\n"
		hybrid = legacy + "0::/system.slice/vgpu-exporter.service\n"
		holder = "4:memory:/user.slice\n1:name=systemd:/user.slice/x\n"
	)
	for _, tc := range []struct {
		name, self, file, want, not string
	}{
		{"a unified line on a legacy host", legacy, holder + "0::" + other + "\n", "unknown (its cgroup file refused: ", strconv.Quote(other)},
		{"a hierarchy the host lacks", legacy, holder + "99:fake:" + other + "\n", "unknown (its cgroup file refused: ", "/kubepods"},
		{"a legacy host's honest file", legacy, holder, `""`, ""},
		{"a hybrid host's honest file", hybrid, holder + "0::" + other + "\n", strconv.Quote(other), "refused"},
	} {
		self := filepath.Join(t.TempDir(), "cgroup")
		if err := os.WriteFile(self, []byte(tc.self), 0o644); err != nil {
			t.Fatal(err)
		}
		got := unifiedCgroup([]byte(tc.file), cgroupfile.NewHost(self))
		if !strings.Contains(got, tc.want) || tc.not != "" && strings.Contains(got, tc.not) {
			t.Errorf("%s: %s, want %s and not %q", tc.name, got, tc.want, tc.not)
		}
	}
}

// TestNodeLockKernelHolderOnHost: the holder's cgroup in the refused
// start's error is checked against this process's own cgroup file: where
// the holder's lists hierarchies the own file does not, it shows refused,
// not its path.
func TestNodeLockKernelHolderOnHost(t *testing.T) {
	self := filepath.Join(t.TempDir(), "cgroup")
	if err := os.WriteFile(self, []byte("99:fake:/\n"), 0o644); err != nil { // no process's but this fake host's
		t.Fatal(err)
	}
	defer func(old string) { procSelfCgroup = old }(procSelfCgroup)
	procSelfCgroup = self
	path := t.TempDir() + "/tuner.lock"
	l, err := AcquireNodeLock(path, NodeLockHolder{Mode: "enforce", Started: t0})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = AcquireNodeLock(path, NodeLockHolder{Mode: "enforce", Started: t0.Add(time.Minute)})
	want := fmt.Sprintf("/proc/locks: pid %d here, its cgroup unknown (its cgroup file refused: ", os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), self) {
		t.Errorf("error %v, want %q naming %s", err, want, self)
	}
}

// FuzzLockHolderPID: any table of locks is read without a panic; a PID
// found is the positive number of a line of it that lists a flock on the
// file (not a waiter's, not another file's); a holder's line put first is
// the one found, whatever follows.
func FuzzLockHolderPID(f *testing.F) {
	f.Add("1: FLOCK  ADVISORY  WRITE 17046 fe:00:9978365 0 EOF\n")
	f.Add("1: -> FLOCK ADVISORY WRITE x fe:00:9978365\n")
	f.Add("1: FLOCK  ADVISORY  WRITE 12 fe:00:42 0 EOF\n2: FLOCK  ADVISORY  WRITE +013 fe:00:9978365 0 EOF\n")
	fi := statInfo{st: syscall.Stat_t{Dev: 0xfe00, Ino: 9978365}}
	f.Fuzz(func(t *testing.T, s string) {
		pid := lockHolderPID(strings.NewReader(s), fi)
		listed := pid == 0
		for l := range strings.SplitSeq(s, "\n") {
			if f := strings.Fields(l); !listed && len(f) >= 6 && f[1] == "FLOCK" && f[5] == "fe:00:9978365" {
				n, err := strconv.Atoi(f[4])
				listed = err == nil && n == pid
			}
		}
		if pid < 0 || !listed {
			t.Fatalf("pid %d, listed by no holder's line of the file in %q", pid, s)
		}
		if got := lockHolderPID(strings.NewReader("1: FLOCK  ADVISORY  WRITE 42 fe:00:9978365 0 EOF\n"+s), fi); got != 42 {
			t.Fatalf("the holder listed first: pid %d, want 42, with %q after it", got, s)
		}
	})
}
