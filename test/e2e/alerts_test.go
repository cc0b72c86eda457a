//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The mixin with its SLO windows scaled down about 180 times (1h to 20s)
// and the fast-burn page's hold from 2m to 3s, so that a burn of a minute
// shows as an hour's would.
const scaledMixin = `{
  sloWindowRanges: { '5m': '5s', '30m': '10s', '1h': '20s', '2h': '30s', '6h': '40s', '1d': '50s', '3d': '60s' },
  sloBurnRateAlerts: [
    a + (if a.long == '1h' then { 'for': '3s' } else {})
    for a in super.sloBurnRateAlerts
  ],
}`

const fastBurn = "VGPUTenantErrorBudgetFastBurn"

// TestFastBurnAlertReachesAlertmanager runs the exporter on the slo-burn
// scenario (chat misses its target for the first 60 s, then meets it), a
// Prometheus with the mixin's rules and an Alertmanager: the fast-burn page
// for chat reaches Alertmanager with its runbook link, then resolves.
func TestFastBurnAlertReachesAlertmanager(t *testing.T) {
	promBin := findTool(t, "prometheus")
	amBin := findTool(t, "prometheus-alertmanager")
	bin := buildExporter(t)
	dir := t.TempDir()
	rulesDir := generateMixin(t, dir)

	exporterAddr := freeAddr(t)
	exporter := start(t, "exporter-slo-burn", bin,
		"--backend=sim",
		"--sim.scenario=testdata/slo-burn.yaml",
		"--tenants.config=testdata/slo-burn.tenants.yaml",
		"--web.listen-address="+exporterAddr,
	)
	started := time.Now()

	amAddr := freeAddr(t)
	amConfig := filepath.Join(dir, "alertmanager.yml")
	writeFile(t, amConfig, "route:\n  receiver: none\n  group_wait: 1s\nreceivers:\n  - name: none\n")
	am := start(t, "alertmanager", amBin,
		"--config.file="+amConfig,
		"--storage.path="+filepath.Join(dir, "am"),
		"--web.listen-address="+amAddr,
		"--cluster.listen-address=",
		"--log.level=warn",
	)

	promAddr := freeAddr(t)
	promConfig := filepath.Join(dir, "prometheus.yml")
	writeFile(t, promConfig, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %s/*.yaml
alerting:
  alertmanagers:
    - static_configs:
        - targets: [%q]
scrape_configs:
  - job_name: vgpu
    static_configs:
      - targets: [%q]
`, rulesDir, amAddr, exporterAddr))
	prom := start(t, "prometheus", promBin,
		"--config.file="+promConfig,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr,
		"--rules.alert.resend-delay=1s",
		"--log.level=warn",
	)
	procs := []*process{exporter, am, prom}
	promURL := "http://" + promAddr

	// Every rule file loaded, every rule evaluated without an error.
	poll(t, "Prometheus to load the mixin's rules", func() error { return rulesHealthy(promURL, 20) }, procs...)

	// The page reaches Alertmanager while chat misses its target.
	var got amAlert
	pollFor(t, 60*time.Second, fastBurn+" for chat in Alertmanager", func() error {
		alerts, err := alertmanagerAlerts(amAddr)
		if err != nil {
			return err
		}
		for _, a := range alerts {
			if a.Labels["tenant"] == "chat" && a.Labels["severity"] == "critical" {
				got = a
				return nil
			}
		}
		return fmt.Errorf("%d %s alerts, none for chat: %v", len(alerts), fastBurn, alerts)
	}, procs...)
	t.Logf("%s reached Alertmanager %.0fs after the exporter started: labels %v", fastBurn, time.Since(started).Seconds(), got.Labels)
	if want := "docs/runbooks.md#" + strings.ToLower(fastBurn); !strings.HasSuffix(got.Annotations["runbook_url"], want) {
		t.Errorf("runbook_url %q, want one ending in %s", got.Annotations["runbook_url"], want)
	}
	for _, a := range []string{"summary", "description"} {
		if got.Annotations[a] == "" {
			t.Errorf("no %s annotation: %v", a, got.Annotations)
		}
	}
	if got.Labels["long"] != "1h" || got.Labels["short"] != "5m" {
		t.Errorf("windows %s/%s, want 1h/5m", got.Labels["long"], got.Labels["short"])
	}

	// The load drops at 60 s; the alert resolves a few seconds later.
	pollFor(t, 90*time.Second, fastBurn+" to resolve", func() error {
		alerts, err := alertmanagerAlerts(amAddr)
		if err != nil {
			return err
		}
		for _, a := range alerts {
			if a.Labels["tenant"] == "chat" && a.EndsAt.After(time.Now()) {
				return fmt.Errorf("still active (state %s)", a.Status.State)
			}
		}
		return nil
	}, procs...)
	if since := time.Since(started); since < 60*time.Second {
		t.Errorf("%s resolved %.0fs after the exporter started, before the load dropped at 60s", fastBurn, since.Seconds())
	}
	t.Logf("%s resolved %.0fs after the exporter started", fastBurn, time.Since(started).Seconds())
}

// amAlert is an alert as Alertmanager's API v2 returns it.
type amAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	EndsAt      time.Time         `json:"endsAt"`
	Status      struct {
		State string `json:"state"`
	} `json:"status"`
}

// alertmanagerAlerts returns the fast-burn alerts Alertmanager holds.
func alertmanagerAlerts(addr string) ([]amAlert, error) {
	code, body, err := get("http://" + addr + "/api/v2/alerts?filter=" + url.QueryEscape(`alertname="`+fastBurn+`"`))
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("alertmanager /api/v2/alerts: HTTP %d: %.200s", code, body)
	}
	var alerts []amAlert
	if err := json.Unmarshal([]byte(body), &alerts); err != nil {
		return nil, fmt.Errorf("alertmanager /api/v2/alerts: %v", err)
	}
	return alerts, nil
}

// generateMixin writes the mixin's rule files, with the SLO windows scaled
// down, into dir/alerts and returns that directory.
func generateMixin(t *testing.T, dir string) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	cmd := exec.Command("go", "run", "./mixin/build", "-mixin", "mixin", "-out", dir, "-config", scaledMixin)
	cmd.Dir = root
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generating the mixin: %v\n%s", err, out)
	}
	return filepath.Join(dir, "alerts")
}
