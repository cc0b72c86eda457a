package command

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/procread"
)

// readTimeout bounds each read of a process's procfs file in a search.
const readTimeout = time.Second

// maxStuck bounds the reads left blocked past their deadline: once that
// many have not ended, a search reads no more (the process group is still
// killed).
const maxStuck = 16

// maxStat bounds a read of /proc/PID/stat (one line of some fifty
// numbers and a command name of at most 15 bytes); maxEnviron a read of
// /proc/PID/environ (execve takes at most a quarter of the stack limit
// for arguments and environment: 2 MiB by default). A mark past
// maxEnviron is not seen.
const (
	maxStat    = 1 << 16
	maxEnviron = 4 << 20
)

// A read of /proc/PID/environ reads the process's memory under its mmap
// lock: for a process whose lock is held (one stuck in a wedged driver,
// the very case where a GPU tool's run times out; or a page of its
// environment on a file system that never answers) the read blocks, and
// cannot be interrupted. Cancel runs the search and os/exec's Wait waits
// for Cancel, so a read waited for without bound would hold Run for good.
// So each read of a process's file is a procread.Reader's: waited for at
// most readTimeout, past which the process is passed over, and not made
// while an earlier read of the process's has run past its deadline, nor
// while maxStuck have: the goroutines left blocked are at most maxStuck,
// and one per search under way. Reads do not join: the check of a
// process's environment once its PID is pinned must read it anew.

// procReader reads processes' procfs files with a deadline each.
type procReader struct {
	// read reads at most limit bytes of process pid's file name.
	read  func(pid int, name string, limit int64) ([]byte, error)
	reads *procread.Reader
}

// procs is the reader of the searches (tests replace it).
var procs = newProcReader(readProcFile, readTimeout, maxStuck)

func newProcReader(read func(int, string, int64) ([]byte, error), timeout time.Duration, max int) *procReader {
	return &procReader{read: read, reads: procread.New(procread.Options{Timeout: timeout, MaxStuck: max})}
}

// readProcFile reads at most limit bytes of /proc/PID/name.
func readProcFile(pid int, name string, limit int64) ([]byte, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/" + name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// bounded reads at most limit bytes of process pid's file name, or fails
// with procread.ErrStuck where the read does not end by the reader's
// timeout, or is not started (an earlier read of the process's, or max
// reads, not ended past their deadline).
func (r *procReader) bounded(pid int, name string, limit int64) ([]byte, error) {
	read := r.read
	return r.reads.Read(pid, name, func() ([]byte, error) { return read(pid, name, limit) })
}

// startTime returns process pid's start time (field 22 of /proc/PID/stat,
// in clock ticks since boot); false where it cannot be read in time.
// /proc/PID/stat does not read the process's memory, but is read as
// carefully.
func (r *procReader) startTime(pid int) (uint64, bool) {
	b, err := r.bounded(pid, "stat", maxStat)
	if err != nil {
		return 0, false
	}
	s, ok := procread.StartTime(b)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// marked reports whether process pid's environment has the entry mark;
// false where it cannot be read in time.
func (r *procReader) marked(pid int, mark []byte) bool {
	env, err := r.bounded(pid, "environ", maxEnviron)
	if err != nil {
		return false
	}
	for e := range bytes.SplitSeq(env, []byte{0}) {
		if bytes.Equal(e, mark) {
			return true
		}
	}
	return false
}

// runStart returns the start time of a run's program, read while it is
// still running (before it is killed): its descendants started no
// earlier. 0 (every process) where it cannot be read or the PID may no
// longer be the program's.
func runStart(program *os.Process) uint64 {
	s, ok := procs.startTime(program.Pid)
	// The process's pidfd pins it: a signal 0 that reaches it after the
	// read says the PID was the program's when read.
	if !ok || program.Signal(syscall.Signal(0)) != nil {
		return 0
	}
	return s
}

// killMarked kills every process started since the run's program
// (runStart's since) whose environment holds the entry mark: a run's
// descendants, also those that left its process group. A process found
// may have forked before it was killed, so the search is repeated until
// it finds nothing (a killed process forks no more), five times at most.
// Processes whose environment cannot be read (another user's, without the
// privilege; one whose read is stuck) or that cleared their environment
// are not found.
func killMarked(mark string, since uint64) {
	for range 5 {
		if killMarkedOnce([]byte(mark), since) == 0 {
			return
		}
	}
}

func killMarkedOnce(mark []byte, since uint64) int {
	d, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	r := procs
	found := 0
	for _, n := range names {
		p, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		// /proc/PID/stat first: only a process started since the program
		// has its environment read
		if s, ok := r.startTime(p); !ok || s < since || !r.marked(p, mark) {
			continue
		}
		// FindProcess holds a pidfd, which pins the process: checked again
		// once held, the PID cannot have passed to another process.
		proc, err := os.FindProcess(p)
		if err != nil {
			continue
		}
		if r.marked(p, mark) {
			found++
			_ = proc.Signal(syscall.SIGKILL)
		}
		_ = proc.Release()
	}
	return found
}
