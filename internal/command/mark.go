package command

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// markVar is the environment variable that marks the processes of one
// run: the program and all it starts inherit it.
const markVar = "VGPU_COMMAND_RUN"

var runs atomic.Uint64

// newMark returns a KEY=VALUE entry unique to one run of this process.
func newMark() string {
	return fmt.Sprintf("%s=%d.%d.%d", markVar, os.Getpid(), time.Now().UnixNano(), runs.Add(1))
}
