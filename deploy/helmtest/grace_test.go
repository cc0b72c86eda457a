package helmtest

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/deploy/internal/repo"
)

// restoreTimeout reads the tuner's default restore deadline at exit
// (tuner.DefaultRestoreTimeout) from its source, in seconds.
func restoreTimeout(t *testing.T) int64 {
	t.Helper()
	n, _ := strconv.ParseInt(repo.Match(t, "tuner/runner.go", `const DefaultRestoreTimeout = (\d+) \* time\.Second`), 10, 64)
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
		tuner   map[string]any
		on      bool
		restore int64 // tuner.restoreTimeout, s; 0: the default's
	}{
		{map[string]any{"mode": "off"}, false, 0},
		{map[string]any{"mode": "recommend"}, true, 0},
		{map[string]any{"mode": "enforce"}, true, 0},
		{map[string]any{"mode": "off", "gpuModes": []any{"0=enforce"}}, true, 0},
		// a restart hook of 2 minutes, and the restore given room for it
		{map[string]any{"mode": "enforce", "restoreTimeout": "150s"}, true, 150},
		{map[string]any{"mode": "enforce", "restoreTimeout": "2m30s500ms"}, true, 151},
	} {
		restore := restore
		if tc.restore > 0 {
			restore = tc.restore
		}
		m := mustRender(t, c, map[string]any{"tuner": tc.tuner})
		for _, ds := range m.daemonSets {
			if args := container(t, ds.Spec.Template.Spec.Containers, "exporter").Args; tc.on && !slices.ContainsFunc(args, func(a string) bool {
				v, ok := strings.CutPrefix(a, "--tuner.restore-timeout=")
				d, err := time.ParseDuration(v)
				return ok && err == nil && int64(math.Ceil(d.Seconds())) == restore
			}) {
				t.Errorf("tuner %v: args %q, want --tuner.restore-timeout of %d s", tc.tuner, args, restore)
			}
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
