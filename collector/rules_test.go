package collector_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// promtool returns the path of promtool, or skips the test (fails it
// under CI=true, where the Debian package prometheus must be installed).
func promtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if p := "/usr/bin/promtool"; fileExists(p) {
		return p
	}
	msg := "promtool not found in PATH or /usr/bin: install the Debian package prometheus"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// TestXIDAlertFiresOnFirstEvent scrapes the exporter once a minute while a
// GPU reports its first XID 79 and its first XID outside the well-known
// list at minute 3, hands the served vgpu_gpu_events_total series to
// `promtool test rules`, and expects the alert
// increase(vgpu_gpu_events_total{kind="xid"}[10m]) > 0 to fire on those
// first events, for those codes only. A second case feeds the same rule
// a series born at its first event (what a counter that does not start
// at 0 looks like) and shows the alert then stays silent.
func TestXIDAlertFiresOnFirstEvent(t *testing.T) {
	tool := promtool(t)
	const minutes = 6
	var events []tenant.EventCount
	values := map[string][]string{} // series -> one value per minute
	for m := 0; m < minutes; m++ {
		d := gpu.Device{Index: 0, UUID: "GPU-a", Up: true}
		if m == 3 {
			d.Events = []gpu.Event{{Kind: gpu.EventXID, Code: 79}, {Kind: gpu.EventXID, Code: 160}}
		}
		r := &gpu.Readings{Time: time.Unix(int64(60*m), 0), Devices: []gpu.Device{d}}
		events = tenant.AddEvents(events, r)
		var store tenant.Store
		store.Store(&tenant.Snapshot{Readings: r, Events: events})
		for line := range scrapeLines(t, register(t, &store, "gpu")) {
			if !strings.HasPrefix(line, "vgpu_gpu_events_total{") || !strings.Contains(line, `kind="xid"`) {
				continue
			}
			i := strings.LastIndexByte(line, ' ')
			series, v := line[:i], line[i+1:]
			for len(values[series]) < m {
				values[series] = append(values[series], "_") // absent at that scrape
			}
			values[series] = append(values[series], v)
		}
	}
	if len(values) == 0 {
		t.Fatal("no vgpu_gpu_events_total{kind=\"xid\"} series served")
	}
	var names []string
	for s := range values {
		names = append(names, s)
	}
	sort.Strings(names)
	var in strings.Builder
	for _, s := range names {
		fmt.Fprintf(&in, "      - series: '%s'\n        values: '%s'\n", s, strings.Join(values[s], " "))
	}
	alert := func(code string) string {
		return fmt.Sprintf("          - exp_labels: {severity: warning, gpu: \"0\", uuid: GPU-a, kind: xid, code: %q}\n"+
			"            exp_annotations: {summary: 'GPU 0 (GPU-a) reported XID %s'}\n", code, code)
	}
	// promtool resolves rule_files against the test file's folder: give
	// it an absolute path.
	rules, err := filepath.Abs(filepath.Join("testdata", "rules", "xid.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	test := `rule_files: ['` + rules + `']
evaluation_interval: 1m
tests:
  - name: served series, first events at minute 3
    interval: 1m
    input_series:
` + in.String() + `    alert_rule_test:
      - {eval_time: 2m, alertname: GPUXidError, exp_alerts: []}
      - eval_time: 4m
        alertname: GPUXidError
        exp_alerts:
` + alert("79") + alert("other") + `
  - name: a counter born at its first event is missed
    interval: 1m
    input_series:
      - series: 'vgpu_gpu_events_total{gpu="0",uuid="GPU-a",kind="xid",code="79"}'
        values: '_ _ _ 1 1 1'
    alert_rule_test:
      - {eval_time: 4m, alertname: GPUXidError, exp_alerts: []}
`
	f := filepath.Join(t.TempDir(), "xid.test.yml")
	if err := os.WriteFile(f, []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tool, "test", "rules", f).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s\ntest file:\n%s", err, out, test)
	}
	if out, err := exec.Command(tool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}
