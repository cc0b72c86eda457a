package helmtest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
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
		t.Run(tc.name, func(t *testing.T) { checkPoolFlags(t, c, tc.vals, "--tuner.slow-loop.", tc.want) })
	}
}

// checkPoolFlags renders vals and compares each DaemonSet's exporter flags
// that start with prefix with want's (by DaemonSet name).
func checkPoolFlags(t *testing.T, c *chart.Chart, vals map[string]any, prefix string, want map[string][]string) {
	t.Helper()
	m := mustRender(t, c, vals)
	if len(m.daemonSets) != len(want) {
		t.Fatalf("%d DaemonSets, want %d", len(m.daemonSets), len(want))
	}
	for _, ds := range m.daemonSets {
		w, ok := want[ds.Name]
		if !ok {
			t.Fatalf("unexpected DaemonSet %s", ds.Name)
		}
		got := argsWithPrefix(container(t, ds.Spec.Template.Spec.Containers, "exporter").Args, prefix)
		if !slices.Equal(got, w) {
			t.Errorf("%s: %s flags %q, want %q", ds.Name, prefix, got, w)
		}
	}
}

// TestSlowLoopDurations: the schema takes a tuner.slowLoop key (the
// release's or a pool's) when the exporter does: empty (its default), or a
// Go duration (time.ParseDuration: fractions, every unit) that is positive
// (the exporter refuses to start on a zero one). (A fraction of a
// nanosecond alone, which Go reads as zero, is past what it checks.)
func TestSlowLoopDurations(t *testing.T) {
	c := loadChart(t)
	for _, v := range []string{
		"", "30s", "5m", "1h", "1m30s", "2m0s", "500ms", "1.5m", ".5h", "1.s", "0.5s", "+1m",
		"250us", "250µs", "250μs", "100ns", "0h1m", "1h0m0s",
		"0", "0s", "00m", "0.0s", "0h0m0s", "-1m", "-0s", "1", "m", ".s", "1.5", "1m30", "5 m", "1d", "soon", "1M",
	} {
		d, err := time.ParseDuration(v)
		valid := v == "" || (err == nil && d > 0)
		for _, where := range []struct {
			name string
			vals map[string]any
		}{
			{"release", map[string]any{"tuner": map[string]any{"mode": "recommend", "slowLoop": map[string]any{"every": v}}}},
			{"pool", map[string]any{"tuner": map[string]any{"mode": "recommend"}, "nodePools": []any{map[string]any{"name": "a",
				"nodeSelector": map[string]any{"pool": "a"}, "tuner": map[string]any{"slowLoop": map[string]any{"hold": v}}}}}},
		} {
			_, err := render(c, where.vals)
			if valid && err != nil {
				t.Errorf("%s slowLoop %q (a positive Go duration or empty): %v", where.name, v, err)
			}
			if !valid && (err == nil || !strings.Contains(err.Error(), "slowLoop")) {
				t.Errorf("%s slowLoop %q (the exporter refuses it): error %v, want the schema's", where.name, v, err)
			}
		}
	}
}
