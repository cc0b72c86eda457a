package tuner

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/vgpu-exporter/vgpu_exporter/internal/cgroupfile"
)

// procLocks is the kernel's table of locks, and procSelfCgroup this
// process's own cgroup file, whose hierarchies the kernel lists for every
// process (tests replace them).
var procLocks, procSelfCgroup = "/proc/locks", "/proc/self/cgroup"

// lockHolderPID is the PID that the table of locks r (/proc/locks) gives
// the holder of a flock on the file fi, as this process's PID namespace
// sees it; 0 where none is listed or the holder is not visible from here
// (the kernel lists it as 0: a pod's tuner seen from another pod).
func lockHolderPID(r io.Reader, fi os.FileInfo) int {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	dev := uint64(st.Dev)
	major := (dev>>8)&0xfff | (dev>>32)&^uint64(0xfff)
	minor := dev&0xff | (dev>>12)&^uint64(0xff)
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, st.Ino)
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 17046 fe:00:9978365 0 EOF"; a waiter's
		// line has "->" after the number.
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != want {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil && pid > 0 {
			return pid
		}
	}
	return 0
}

// kernelHolder is what the kernel says of the holder of the lock on f: its
// PID from /proc/locks and that PID's cgroup (a pod's, seen from the
// host: its UID), or "" where it says nothing visible from here.
func kernelHolder(f *os.File) string {
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	locks, err := os.Open(procLocks)
	if err != nil {
		return ""
	}
	pid := lockHolderPID(locks, fi)
	locks.Close()
	if pid == 0 {
		return ""
	}
	cg := "?"
	if b, err := readBounded(fmt.Sprintf("/proc/%d/cgroup", pid), 64<<10); err == nil {
		cg = unifiedCgroup(b, cgroupfile.NewHost(procSelfCgroup))
	}
	return fmt.Sprintf("; %s: pid %d here, its cgroup %s", procLocks, pid, cg)
}

// unifiedCgroup is, for a message, the path of the unified hierarchy's
// line ("0::") of a /proc/PID/cgroup file, quoted ("" without one). A
// file cgroupfile.Lines refuses (a hierarchy listed twice: a line forged
// by a cgroup name with a line break in it, which the holder may have
// named its own cgroup), or host (nil: none) does (hierarchies the kernel
// lists for no process: a "0::" line where no cgroup2 is mounted, forged
// the same way), shows no path, only that it was refused: the holder
// cannot pass for another pod's process or unit.
func unifiedCgroup(b []byte, host *cgroupfile.Host) string {
	cg, err := cgroupfile.Unified(b, host)
	if err != nil {
		return fmt.Sprintf("unknown (its cgroup file refused: %v)", err)
	}
	return strconv.Quote(cg)
}

// readBounded reads at most max bytes of the file at path.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}
