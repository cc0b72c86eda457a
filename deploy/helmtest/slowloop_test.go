package helmtest

import (
	"slices"
	"strings"
	"testing"
)

// TestSlowLoopTimings: tuner.slowLoop's keys become the --tuner.slow-loop.*
// flags, a pool's keys replacing the release's one by one; unset, no flag
// (the exporter's defaults); with the tuner off, none.
func TestSlowLoopTimings(t *testing.T) {
	c := loadChart(t)
	pools := []any{
		map[string]any{"name": "a", "nodeSelector": map[string]any{"pool": "a"}},
		map[string]any{"name": "b", "nodeSelector": map[string]any{"pool": "b"},
			"tuner": map[string]any{"slowLoop": map[string]any{"dwell": "1m"}}},
	}
	for _, tc := range []struct {
		name string
		vals map[string]any
		want map[string][]string // DaemonSet -> its --tuner.slow-loop.* flags
	}{
		{"defaults", map[string]any{"tuner": map[string]any{"mode": "recommend"}},
			map[string][]string{"vgpu-exporter": nil}},
		{"all four", map[string]any{"tuner": map[string]any{"mode": "recommend",
			"slowLoop": map[string]any{"every": "5s", "dwell": "30s", "coolDown": "2m", "hold": "1h"}}},
			map[string][]string{"vgpu-exporter": {"--tuner.slow-loop.every=5s", "--tuner.slow-loop.dwell=30s",
				"--tuner.slow-loop.cool-down=2m", "--tuner.slow-loop.hold=1h"}}},
		{"a pool's key replaces the release's", map[string]any{"tuner": map[string]any{"mode": "recommend",
			"slowLoop": map[string]any{"every": "5s", "dwell": "30s"}}, "nodePools": pools},
			map[string][]string{
				"vgpu-exporter-a": {"--tuner.slow-loop.every=5s", "--tuner.slow-loop.dwell=30s"},
				"vgpu-exporter-b": {"--tuner.slow-loop.every=5s", "--tuner.slow-loop.dwell=1m"},
			}},
		{"tuner off", map[string]any{"tuner": map[string]any{"slowLoop": map[string]any{"dwell": "30s"}}},
			map[string][]string{"vgpu-exporter": nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustRender(t, c, tc.vals)
			if len(m.daemonSets) != len(tc.want) {
				t.Fatalf("%d DaemonSets, want %d", len(m.daemonSets), len(tc.want))
			}
			for _, ds := range m.daemonSets {
				want, ok := tc.want[ds.Name]
				if !ok {
					t.Fatalf("unexpected DaemonSet %s", ds.Name)
				}
				var got []string
				for _, a := range container(t, ds.Spec.Template.Spec.Containers, "exporter").Args {
					if strings.HasPrefix(a, "--tuner.slow-loop.") {
						got = append(got, a)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: slow-loop flags %q, want %q", ds.Name, got, want)
				}
			}
		})
	}
}
