package helmtest

import (
	"slices"
	"testing"
)

// TestTuneClocksAndPowerOff: tuner.tuneClocksAndPower=false keeps the
// tuner off clocks and power limits, whatever else gives the exporter
// SYS_ADMIN (profilingCapability, by default): the chart disables the two
// knobs, rather than count on their changes failing without the
// capability.
func TestTuneClocksAndPowerOff(t *testing.T) {
	c := loadChart(t)
	off := []string{"--tuner.disable-knob=locked_clocks", "--tuner.disable-knob=power_limit"}
	for _, tc := range []struct {
		name string
		vals map[string]any
		want bool
	}{
		{"off, profiling on", map[string]any{"tuner": map[string]any{"mode": "enforce", "tuneClocksAndPower": false}}, true},
		{"off, profiling off", map[string]any{"profilingCapability": false, "tuner": map[string]any{"mode": "enforce", "tuneClocksAndPower": false}}, true},
		{"off, one GPU in enforce", map[string]any{"tuner": map[string]any{"mode": "recommend", "gpuModes": []any{"0=enforce"}, "tuneClocksAndPower": false}}, true},
		{"on", map[string]any{"tuner": map[string]any{"mode": "enforce"}}, false},
		{"off in recommend", map[string]any{"tuner": map[string]any{"mode": "recommend", "tuneClocksAndPower": false}}, false},
	} {
		args := container(t, mustRender(t, c, tc.vals).daemonSets[0].Spec.Template.Spec.Containers, "exporter").Args
		for _, a := range off {
			if slices.Contains(args, a) != tc.want {
				t.Errorf("%s: args %q, want %s: %v", tc.name, args, a, tc.want)
			}
		}
	}
}
