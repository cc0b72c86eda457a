package command

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
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

// errStuck is a read not made, or not waited for: it did not end by its
// deadline, an earlier read of the process's has not ended past its own,
// or maxStuck reads have not.
var errStuck = errors.New("procfs read not answered in time")

// A read of /proc/PID/environ reads the process's memory under its mmap
// lock: for a process whose lock is held (one stuck in a wedged driver,
// the very case where a GPU tool's run times out; or a page of its
// environment on a file system that never answers) the read blocks, and
// cannot be interrupted. Cancel runs the search and os/exec's Wait waits
// for Cancel, so a read waited for without bound would hold Run for good.
// So each read of a process's file runs in a goroutine of its own, waited
// for at most the reader's timeout; past that the process is passed over,
// and the goroutine is left to end when the read does. No read of a
// process is started while an earlier one of its has run past its
// deadline, nor any while maxStuck have: the goroutines left blocked are
// at most maxStuck, and one per search under way.

// procReader reads processes' procfs files with a deadline each.
type procReader struct {
	// read reads at most limit bytes of process pid's file name.
	read    func(pid int, name string, limit int64) ([]byte, error)
	timeout time.Duration
	max     int // reads left blocked past their deadline, at most

	mu    sync.Mutex
	stuck map[int]int // the reads of each process past their deadline, not ended
	n     int         // the sum of stuck
}

// procs is the reader of the searches (tests replace it).
var procs = newProcReader(readProcFile, readTimeout, maxStuck)

func newProcReader(read func(int, string, int64) ([]byte, error), timeout time.Duration, max int) *procReader {
	return &procReader{read: read, timeout: timeout, max: max, stuck: map[int]int{}}
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

// readCall is one read under way.
type readCall struct {
	done chan struct{} // closed once the read has ended, b and err set
	b    []byte
	err  error
	late bool // given up at its deadline: counted in stuck
}

// bounded reads at most limit bytes of process pid's file name, or fails
// with errStuck where the read does not end by the reader's timeout, or
// is not started (an earlier read of the process's, or max reads, not
// ended past their deadline).
func (r *procReader) bounded(pid int, name string, limit int64) ([]byte, error) {
	r.mu.Lock()
	if r.stuck[pid] > 0 || r.n >= r.max {
		r.mu.Unlock()
		return nil, errStuck
	}
	r.mu.Unlock()
	c := &readCall{done: make(chan struct{})}
	read := r.read
	go func() {
		b, err := read(pid, name, limit)
		r.mu.Lock()
		defer r.mu.Unlock()
		if c.late {
			r.n--
			if r.stuck[pid]--; r.stuck[pid] <= 0 {
				delete(r.stuck, pid)
			}
		}
		c.b, c.err = b, err
		close(c.done)
	}()
	t := time.NewTimer(r.timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return c.b, c.err
	case <-t.C:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-c.done: // ended as the deadline passed
		return c.b, c.err
	default:
	}
	c.late = true
	r.stuck[pid]++
	r.n++
	return nil, errStuck
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
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 { // state (3) ... starttime (22)
		return 0, false
	}
	s, err := strconv.ParseUint(string(f[19]), 10, 64)
	return s, err == nil
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
