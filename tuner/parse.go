package tuner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Knobs returns knob names as knobs.
func Knobs(names []string) []gpu.Knob {
	out := make([]gpu.Knob, 0, len(names))
	for _, k := range names {
		out = append(out, gpu.Knob(k))
	}
	return out
}

// ParseGPUModes parses per-GPU modes written GPU=MODE, with GPU an index
// or a UUID (e.g. 0=enforce), into Options.GPUModes; an error quotes the
// value at fault.
func ParseGPUModes(values []string) (map[string]Mode, error) {
	out := map[string]Mode{}
	for _, v := range values {
		g, m, ok := strings.Cut(v, "=")
		if !ok || g == "" {
			return nil, fmt.Errorf("%q: want GPU=MODE, e.g. 0=enforce", v)
		}
		mode, err := ParseMode(m)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", v, err)
		}
		if prev, ok := out[g]; ok {
			return nil, fmt.Errorf("%q: GPU %s is given a mode twice (%s, then %s)", v, g, prev, mode)
		}
		out[g] = mode
	}
	return out, nil
}

// KnobsEnabledAndDisabled returns the knobs named both among enabled and
// among disabled, in enabled's order: the flags contradict each other
// there, and a start that took one of them would run a tuner other than
// the one asked for.
func KnobsEnabledAndDisabled(enabled, disabled []string) []string {
	var both []string
	for _, k := range enabled {
		if slices.Contains(disabled, k) && !slices.Contains(both, k) {
			both = append(both, k)
		}
	}
	return both
}
