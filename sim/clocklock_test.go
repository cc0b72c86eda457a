package sim

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestClockLockProblems: a clock lock is refused with what is wrong with
// it, in a scenario (at its line) and by LockClocks. Before, [1500, 800]
// and a lone min: 1500 (read as [1500, 0]) were both said to be "outside
// [345, 1980]", which they are not.
func TestClockLockProblems(t *testing.T) {
	for _, c := range []struct {
		name     string
		min, max uint32
		want     string // "" when it locks
	}{
		{"one value", 1980, 1980, ""},
		{"a range", 800, 1500, ""},
		{"min above max", 1500, 800, "locked clocks [1500, 800] MHz: min is above max"},
		{"min alone", 1500, 0, "locked clocks [1500, 0] MHz: give both min and max"},
		{"max alone", 0, 800, "locked clocks [0, 800] MHz: give both min and max"},
		{"over the top", 2000, 2000, "locked clocks [2000, 2000] MHz outside [345, 1980]"},
		{"under idle", 100, 1980, "locked clocks [100, 1980] MHz outside [345, 1980]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lock := "{"
			if c.min != 0 {
				lock += "min: " + itoa(c.min)
			}
			if c.max != 0 {
				if c.min != 0 {
					lock += ", "
				}
				lock += "max: " + itoa(c.max)
			}
			lock += "}"
			_, err := ParseScenario("x.yaml", []byte("gpus:\n  - model: H100-SXM5-80GB\n    locked_clocks: "+lock+"\ntenants:\n  - {name: a, workload: {type: training, flops: 1e12}}\n"))
			check(t, "scenario", err, "x.yaml:3: "+c.want, c.want == "")
			s := mustNew(t, mustParse(t, "gpus: [{model: H100-SXM5-80GB}]\ntenants:\n  - {name: a, workload: {type: training, flops: 1e12}}\n"), Options{})
			err = s.LockClocks(context.Background(), s.Scenario().GPUs[0].UUID, gpu.ClockLock{MinMHz: c.min, MaxMHz: c.max})
			check(t, "LockClocks", err, "sim: "+c.want, c.want == "")
		})
	}
}

func check(t *testing.T, what string, err error, want string, ok bool) {
	t.Helper()
	switch {
	case ok && err != nil:
		t.Errorf("%s: unexpected error: %v", what, err)
	case !ok && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: error %v, want %q", what, err, want)
	}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
