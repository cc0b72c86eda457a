package helmtest

import (
	"strings"
	"testing"
)

// TestAutotuneParams: tuner.autotuneParams become --tuner.autotune-param
// flags, by name, a pool's keys replacing the release's one by one; none
// with the tuner off; the schema refuses a name that is not one and a
// value that is neither a number nor a string.
func TestAutotuneParams(t *testing.T) {
	c := loadChart(t)
	pools := []any{
		map[string]any{"name": "a", "nodeSelector": map[string]any{"pool": "a"}},
		map[string]any{"name": "b", "nodeSelector": map[string]any{"pool": "b"},
			"tuner": map[string]any{"autotuneParams": map[string]any{"pause_gain": 0.3}}},
	}
	for _, tc := range []struct {
		name string
		vals map[string]any
		want map[string][]string // DaemonSet -> its --tuner.autotune-param flags
	}{
		{"none", map[string]any{"tuner": map[string]any{"mode": "recommend"}},
			map[string][]string{"vgpu-exporter": nil}},
		{"numbers and a duration, by name", map[string]any{"tuner": map[string]any{"mode": "recommend",
			"autotuneParams": map[string]any{"pause_step_max": 0.5, "pause_gain": 0.15, "min_requests": 20, "slack_dwell": "3m"}}},
			map[string][]string{"vgpu-exporter": {"--tuner.autotune-param=min_requests=20", "--tuner.autotune-param=pause_gain=0.15",
				"--tuner.autotune-param=pause_step_max=0.5", "--tuner.autotune-param=slack_dwell=3m"}}},
		{"a pool's key replaces the release's", map[string]any{"tuner": map[string]any{"mode": "recommend",
			"autotuneParams": map[string]any{"pause_step_max": 0.5, "pause_gain": 0.15}}, "nodePools": pools},
			map[string][]string{
				"vgpu-exporter-a": {"--tuner.autotune-param=pause_gain=0.15", "--tuner.autotune-param=pause_step_max=0.5"},
				"vgpu-exporter-b": {"--tuner.autotune-param=pause_gain=0.3", "--tuner.autotune-param=pause_step_max=0.5"},
			}},
		{"tuner off", map[string]any{"tuner": map[string]any{"autotuneParams": map[string]any{"pause_gain": 0.15}}},
			map[string][]string{"vgpu-exporter": nil}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPoolFlags(t, c, tc.vals, "--tuner.autotune-param=", tc.want) })
	}
	for _, bad := range []map[string]any{
		{"Pause-Gain": 0.1},
		{"pause_gain": map[string]any{"x": 1}},
		{"pause_gain": []any{0.1}},
		{"pause_gain": true},
	} {
		_, err := render(c, map[string]any{"tuner": map[string]any{"mode": "recommend", "autotuneParams": bad}})
		if err == nil || !strings.Contains(err.Error(), "autotuneParams") {
			t.Errorf("autotuneParams %v: error %v, want the schema's", bad, err)
		}
	}
}
