package webconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The series count the reloads and say whether the last one failed.
func TestCollector(t *testing.T) {
	f := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(f, []byte("basic_auth_users: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := Open(f, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	want := func(ok, reloads, failures string) string {
		return `# HELP vgpu_web_config_last_reload_successful 1 if the last reload of --web.config.file succeeded (or none was tried since start), 0 if it failed: the last good web configuration stays in use, or, where exporter-toolkit reads the file itself (outside Linux, memfd_create refused: the start warns of it), the invalid edit is in use.
# TYPE vgpu_web_config_last_reload_successful gauge
vgpu_web_config_last_reload_successful ` + ok + `
# HELP vgpu_web_config_reload_failures_total Reloads of --web.config.file that failed since the exporter started.
# TYPE vgpu_web_config_reload_failures_total counter
vgpu_web_config_reload_failures_total ` + failures + `
# HELP vgpu_web_config_reloads_total Reloads of --web.config.file since the exporter started (SIGHUP, POST /-/reload, or a change found by its check every 5 s), failed ones included; the check's retries of a failure of the system's (not the file's) counted once for each distinct error.
# TYPE vgpu_web_config_reloads_total counter
vgpu_web_config_reloads_total ` + reloads + `
`
	}
	for _, step := range []struct {
		content, ok, reloads, failures string
	}{
		{"", "1", "0", "0"},
		{"basic_auth_users: [\n", "0", "1", "1"},
		{"basic_auth_users: {}\n", "1", "2", "1"},
	} {
		if step.content != "" {
			if err := os.WriteFile(f, []byte(step.content), 0o600); err != nil {
				t.Fatal(err)
			}
			k.Reload()
		}
		if err := testutil.CollectAndCompare(k.Collector(), strings.NewReader(want(step.ok, step.reloads, step.failures))); err != nil {
			t.Errorf("after %s reloads: %v", step.reloads, err)
		}
	}
}
