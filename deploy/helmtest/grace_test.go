package helmtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/deploy/internal/repo"
)

// restoreTimeout reads the tuner's restore deadline at exit
// (tuner.RestoreTimeout) from its source, in seconds.
func restoreTimeout(t *testing.T) int64 {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repo.Root(), "tuner", "runner.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`const RestoreTimeout = (\d+) \* time\.Second`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no RestoreTimeout in seconds in tuner/runner.go")
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// With the tuner on, the pod's grace period outlasts the restore at exit
// with room to spare (the pause actuator closed after it, the exit):
// under the default 30 s the kubelet's SIGKILL came at the very deadline
// of the restore, and settings a restore still under way had not set back
// stayed changed where no pod starts again (an uninstall, a node leaving
// the pool). With the tuner off the default stays.
func TestGraceOutlastsRestore(t *testing.T) {
	c := loadChart(t)
	restore := restoreTimeout(t)
	for _, tc := range []struct {
		tuner map[string]any
		on    bool
	}{
		{map[string]any{"mode": "off"}, false},
		{map[string]any{"mode": "recommend"}, true},
		{map[string]any{"mode": "enforce"}, true},
		{map[string]any{"mode": "off", "gpuModes": []any{"0=enforce"}}, true},
	} {
		m := mustRender(t, c, map[string]any{"tuner": tc.tuner})
		for _, ds := range m.daemonSets {
			g := ds.Spec.Template.Spec.TerminationGracePeriodSeconds
			switch {
			case !tc.on && g != nil:
				t.Errorf("tuner %v: grace %d s, want the default", tc.tuner, *g)
			case tc.on && (g == nil || *g < restore+10):
				t.Errorf("tuner %v: grace %v, want at least %d s (the restore's %d s and 10 s)", tc.tuner, g, restore+10, restore)
			}
		}
	}
}
