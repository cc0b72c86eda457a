//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
)

// dashHosts are the exporters the dashboards are checked against, one host
// each, all in the mixin's job (vgpu) and one cluster: between them every
// sharing mode, the tuner enforcing (acting within seconds on each knob it
// can) and recommending, the opt-in pause knob, prices and health events.
var dashHosts = []struct {
	scenario string
	args     []string
}{
	// Time-slicing, with prices; the tuner changes the time-slice level.
	{"timeslice-levels", []string{"--tuner.mode=enforce", "--metering.currency=USD", "--metering.price-per-gpu-hour=2.5", "--metering.price-per-kwh=0.15"}},
	// MIG; the tuner recommending.
	{"h200-mig", []string{"--tuner.mode=recommend"}},
	// vGPU; the tuner's scheduler changes refused, then guarded.
	{vgpuScenario, []string{"--tuner.mode=enforce"}},
	// Exclusive GPUs, one with its clocks locked; the tuner locks the
	// other's.
	{"clock-stability", []string{"--tuner.mode=enforce"}},
	// MPS, health events; the tuner caps and pauses the batch tenant.
	{"testdata/dashboards.yaml", []string{"--tenants.config=testdata/dashboards.tenants.yaml", "--tuner.mode=enforce", "--tuner.enable-knob=pause_duty"}},
}

// dashScrape is the scrape and rule evaluation interval of the check;
// $__rate_interval is four of them.
const dashScrape = time.Second

// dashExcepted are the panel targets (dashboard uid / panel title / refId)
// that need a condition no host of dashHosts produces within the check's
// time, with the reason. They are still queried: one that returns data is
// logged.
var dashExcepted = map[string]string{
	"vgpu-tenant / Tuner actions on the tenant's hosts / B": revertReason,
	"vgpu-tuner / Reverts / A":                              revertReason,
	"vgpu-tuner / Pause periods not paused / A":             "needs a pause period whose freeze failed: the simulator's freeze never fails",
	"vgpu-tuner / Power limit / A":                          "the tuner targets a power limit only on deep measured slack where it cannot lock the clocks (docs/tuning.md); no scenario reaches that within minutes",
	"vgpu-tuner / Time slice and vGPU scheduler / C":        "the tuner's vGPU scheduler change is refused while VMs run on the GPU (as NVML refuses it), and the vGPU scenarios' VMs run throughout",
}

const revertReason = "needs a revert: a change undone because the SLO error rose after it, which no scenario brings about within a minute"

// dashWait bounds the wait for every panel to return data.
const dashWait = 60 * time.Second

// TestDashboardPanelsReturnData runs the exporter on a host of each sharing
// mode (simulator), a Prometheus with the mixin's recording rules scraping
// them every second, and queries every target of every panel of the
// generated dashboards (dashboards/*.json) as Grafana would, its template
// variables at All (as the dashboard opens), then given each value the
// exporters serve: each returns at least one series but those of
// dashExcepted; a target ending in "or vector(0)", which always returns
// something, must return a series without it too. It also fails on what
// reads wrong: a 0-1 unit over figures far above 1 (0-100 figures, or
// ratios summed over GPUs) or far below 0 with no value mapping of them, a
// count of events (bars) that is not whole, a legend naming a label no
// series has or writing a percentile as a fraction.
func TestDashboardPanelsReturnData(t *testing.T) {
	promBin := findTool(t, "prometheus")
	bin := buildExporter(t)
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	boards, err := loadBoards(buildDashboards(t, root))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := filepath.Abs(filepath.Join(root, "alerts", "vgpu-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	var procs []*process
	var addrs []string
	for _, h := range dashHosts {
		addr := freeAddr(t)
		args := append([]string{
			"--backend=sim",
			"--sim.scenario=" + h.scenario,
			"--web.listen-address=" + addr,
			"--tuner.interval=1s",
			"--tuner.journal=" + filepath.Join(dir, filepath.Base(h.scenario)+".journal"),
		}, h.args...)
		procs = append(procs, start(t, "exporter-"+filepath.Base(h.scenario), bin, args...))
		addrs = append(addrs, addr)
	}
	for i, addr := range addrs {
		waitReady(t, procs[i], "http://"+addr)
	}

	promAddr := freeAddr(t)
	promConfig := filepath.Join(dir, "prometheus.yml")
	cfg := fmt.Sprintf("global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: %s\nrule_files:\n  - %q\n", dashScrape, dashScrape, dashScrape, rules)
	cfg += "scrape_configs:\n  - job_name: vgpu\n    static_configs:\n"
	for _, addr := range addrs {
		cfg += fmt.Sprintf("      - targets: [%q]\n        labels: {cluster: e2e}\n", addr)
	}
	writeFile(t, promConfig, cfg)
	prom := start(t, "prometheus", promBin,
		"--config.file="+promConfig,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr,
		"--log.level=warn",
	)
	procs = append(procs, prom)
	promURL := "http://" + promAddr
	poll(t, "Prometheus to load the recording rules", func() error { return rulesHealthy(promURL, 1) }, procs...)
	begin := time.Now()
	poll(t, "every exporter scraped twice", func() error {
		res, err := query(promURL, `count_over_time(up{job="vgpu"}[1m]) >= 2`)
		if err == nil && len(res) < len(dashHosts) {
			err = fmt.Errorf("%d of %d exporters", len(res), len(dashHosts))
		}
		return err
	}, procs...)

	var targets []*panelTarget
	for _, b := range boards {
		targets = append(targets, boardTargets(b)...)
	}
	// Query until every target not excepted has returned data, or dashWait.
	api := dashAPI{base: promURL, scrape: dashScrape, start: begin}
	combos := map[string][]map[string]string{}
	for deadline := begin.Add(dashWait); ; {
		api.end = time.Now()
		for _, b := range boards {
			if combos[b.UID], err = api.choices(b); err != nil {
				t.Fatal(err)
			}
		}
		missing := 0
		for _, p := range targets {
			for _, vars := range combos[p.board] {
				if p.passed {
					break
				}
				if err := api.try(p, vars); err != nil {
					t.Fatal(err)
				}
			}
			if !p.passed && dashExcepted[p.key()] == "" {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			t.Logf("%d panel targets not excepted without data %.0fs after the first scrape", missing, time.Since(begin).Seconds())
			break
		}
		for _, p := range procs {
			if err := p.exited(); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second)
	}
	// What every target returns now with every choice, for the oddities.
	for _, p := range targets {
		for _, vars := range combos[p.board] {
			r, _, err := api.run(p, vars)
			if err != nil {
				t.Fatal(err)
			}
			p.seen.add(r)
		}
	}
	reportBoards(t, boards, targets)
}

// reportBoards logs per dashboard the panels checked and excepted, fails on
// a target without data that is not excepted, on an exception that names no
// target, and on the oddities of the targets that returned data.
func reportBoards(t *testing.T, boards []board, targets []*panelTarget) {
	t.Helper()
	for key := range dashExcepted {
		if !slices.ContainsFunc(targets, func(p *panelTarget) bool { return p.key() == key }) {
			t.Errorf("dashExcepted names %q, a target no dashboard has", key)
		}
	}
	for _, b := range boards {
		panels, excepted, n := map[string]bool{}, map[string]bool{}, 0
		for _, p := range targets {
			if p.board != b.UID {
				continue
			}
			panels[p.panel] = true
			n++
			reason, isExcepted := dashExcepted[p.key()]
			switch {
			case p.passed && isExcepted:
				t.Logf("%s: excepted (%s) but returned data with %v", p.key(), reason, p.vars)
			case !p.passed && isExcepted:
				excepted[p.panel] = true
				t.Logf("%s: no data, excepted: %s", p.key(), reason)
			case !p.passed:
				t.Errorf("%s: no data for any values of its variables: %s", p.key(), p.expr)
			}
			if p.passed {
				for _, o := range p.oddities() {
					t.Errorf("%s: %s (query %s)", p.key(), o, p.query)
				}
			}
		}
		t.Logf("%s: %d panels (%d targets) checked, %d with a target excepted", b.UID, len(panels), n, len(excepted))
	}
}

// rulesHealthy returns nil once Prometheus has loaded at least atLeast
// rules and evaluated every one without an error.
func rulesHealthy(promURL string, atLeast int) error {
	code, body, err := get(promURL + "/api/v1/rules")
	if err != nil || code != http.StatusOK {
		return fmt.Errorf("rules: %d %v", code, err)
	}
	var r struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name   string `json:"name"`
					Health string `json:"health"`
					Error  string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return err
	}
	n := 0
	for _, g := range r.Data.Groups {
		for _, rl := range g.Rules {
			if rl.Health != "ok" {
				return fmt.Errorf("rule %s: health %q %s", rl.Name, rl.Health, rl.Error)
			}
			n++
		}
	}
	if n < atLeast {
		return fmt.Errorf("%d rules loaded, want at least %d", n, atLeast)
	}
	return nil
}

// buildDashboards builds the mixin's dashboards as committed but for the
// event panels' step (eventDeltaStep), set to the scrape interval here
// (dashScrape): at the default 1m an event panel reads a counter's rises a
// minute apart, none within the run's first minute. It returns their
// directory.
func buildDashboards(t *testing.T, root string) string {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command("go", "run", "./mixin/build", "-mixin", "mixin", "-out", out,
		"-config", fmt.Sprintf("{eventDeltaStep: '%s'}", dashScrape))
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./mixin/build: %v\n%s", err, b)
	}
	return filepath.Join(out, "dashboards")
}
