package pipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// A reload that asked while another ran, and gets the lock after a reload
// that began since, shares that one unless it was quiet (a POST /-/reload
// held back) and the caller's files' successes are logged (a SIGHUP's, a
// request allowed its lines): before, a SIGHUP during a flood of requests
// could be served by a held-back reload, its tenants file never logged.
func TestLoggedReloadSharesNoQuietOne(t *testing.T) {
	for _, tc := range []struct {
		name           string
		between, quiet bool // the reload begun since the caller asked; the caller
		wantShared     bool
	}{
		{"logged caller, quiet reload since", true, false, false},
		{"quiet caller, quiet reload since", true, true, true},
		{"logged caller, logged reload since", false, false, true},
		{"quiet caller, logged reload since", false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &testutil.SyncBuffer{}
			b := &loggingReloads{logger: log.NewLogfmtLogger(logs)}
			p := New(&failingSource{}, b, "/etc/tenants.yaml", gpu.NewManualClock(time.Unix(1e9, 0)), time.Hour, log.NewNopLogger())
			asked := p.reloadsStarted.Load() // the caller asks, then waits for the lock
			if err := p.reload(tc.between); err != nil {
				t.Fatal(err)
			}
			lines, quiet := strings.Count(logs.String(), "tenants file reloaded"), b.quiet
			if err := p.reloadSince(asked, tc.quiet); err != nil {
				t.Fatal(err)
			}
			ranQuiet, ranLogged := b.quiet-quiet, strings.Count(logs.String(), "tenants file reloaded")-lines
			if shared := ranQuiet+ranLogged == 0; shared != tc.wantShared {
				t.Errorf("shared the reload begun since: %v, want %v (read the file %d times quietly, %d logged)",
					shared, tc.wantShared, ranQuiet, ranLogged)
			}
			if !tc.wantShared && (ranLogged != 1 || ranQuiet != 0) {
				t.Errorf("the caller's own reload: %d logged, %d quiet; want its file's line", ranLogged, ranQuiet)
			}
		})
	}
}
