package mps

// The daemon's replies and the restart hook's output, as the Controller
// reads them: outside input, checked and bounded.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command"
)

// percentage turns a fraction (0-1] into the whole percentage sent to the
// daemon (at least 1).
func percentage(f float64) (int, error) {
	if !(f > 0 && f <= 1) {
		return 0, fmt.Errorf("MPS active-thread fraction %v outside (0, 1]", f)
	}
	return gpu.MPSPercent(f), nil
}

// errReply is a daemon reply that is not what the command answers.
var errReply = errors.New("unexpected reply")

// parsePIDs parses a list of PIDs, one or more per line (the reply of
// get_server_list and get_client_list); an empty reply is an empty list.
func parsePIDs(out string) ([]uint32, error) {
	var pids []uint32
	for _, f := range strings.Fields(out) {
		n, err := strconv.ParseUint(f, 10, 32)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%w %q: want PIDs", errReply, command.Excerpt([]byte(out), 128))
		}
		pids = append(pids, uint32(n))
	}
	return pids, nil
}

// parsePercentage parses a percentage reply such as "100.0" (0, 100].
func parsePercentage(out string) (float64, error) {
	f := strings.Fields(out)
	if len(f) != 1 {
		return 0, fmt.Errorf("%w %q: want one percentage", errReply, command.Excerpt([]byte(out), 128))
	}
	p, err := strconv.ParseFloat(strings.TrimSuffix(f[0], "%"), 64)
	if err != nil || !(p > 0 && p <= 100) {
		return 0, fmt.Errorf("%w %q: want a percentage in (0, 100]", errReply, command.Excerpt([]byte(out), 128))
	}
	return p, nil
}

// refused reports whether a daemon reply is an error message rather than
// an answer.
func refused(out string) bool {
	l := strings.ToLower(out)
	for _, w := range []string{"error", "invalid", "fail", "unknown", "not found", "cannot", "unable", "usage"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// maxPID is the largest PID Linux gives (pid_max's ceiling, 2^22).
const maxPID = 1 << 22

// successorPID reads the restart hook's answer: its last non-empty line of
// stdout, exactly "pid=N" (N decimal, 1 to 2^22), names the successor. Any
// other last line (a bare number, as curl's HTTP status would be) names
// none, and so does output that filled the size limit, whose last line may
// have been cut.
func successorPID(out []byte) (uint32, bool) {
	if len(out) >= command.DefaultMaxOutput {
		return 0, false
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	digits, ok := strings.CutPrefix(strings.TrimSpace(lines[len(lines)-1]), "pid=")
	if !ok || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 32)
	if err != nil || n == 0 || n > maxPID {
		return 0, false
	}
	return uint32(n), true
}
