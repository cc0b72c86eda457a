package command

import (
	"crypto/rand"
	"fmt"
	"os"
	"sync/atomic"
)

// markVar is the environment variable that marks the processes of one
// run: the program and all it starts inherit it.
const markVar = "VGPU_COMMAND_RUN"

var (
	runs    atomic.Uint64
	process = rand.Text() // tells this process's marks from an earlier one's
)

// newMark returns a KEY=VALUE entry unique to one run.
func newMark() string {
	return fmt.Sprintf("%s=%d.%s.%d", markVar, os.Getpid(), process, runs.Add(1))
}
