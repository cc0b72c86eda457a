package command

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// killMarked kills every process whose environment holds the entry mark:
// a run's descendants, also those that left its process group. A process
// found may have forked before it was killed, so the search is repeated
// until it finds nothing (a killed process forks no more), five times at
// most. Processes whose environment cannot be read (another user's,
// without the privilege) or that cleared their environment are not found.
func killMarked(mark string) {
	for range 5 {
		if killMarkedOnce([]byte(mark)) == 0 {
			return
		}
	}
}

func killMarkedOnce(mark []byte) int {
	d, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	found := 0
	for _, n := range names {
		p, err := strconv.Atoi(n)
		if err != nil || !marked(p, mark) {
			continue
		}
		// FindProcess holds a pidfd, which pins the process: checked again
		// once held, the PID cannot have passed to another process.
		proc, err := os.FindProcess(p)
		if err != nil {
			continue
		}
		if marked(p, mark) {
			found++
			_ = proc.Signal(syscall.SIGKILL)
		}
		_ = proc.Release()
	}
	return found
}

// marked reports whether process p's environment has the entry mark.
func marked(p int, mark []byte) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/environ")
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
