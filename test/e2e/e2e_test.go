//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// scenarios are the built-in scenarios the test runs, one exporter each:
// time-slicing (apportioned figures), MIG (measured per instance) and vGPU
// (measured per VM, with the vGPU series of vgpuChecks).
var scenarioNames = []string{"h100-timeslice", "h200-mig", vgpuScenario}

// vgpuScenario is the vGPU scenario: three VMs, one software runlist each.
const vgpuScenario = "vgpu-contention"

// vgpuChecks are queries of the vGPU scenario's series, %q its job, each
// with the number of series it must return: every VM's instance, the
// scheduler, and the scheduler log's counters rising for every runlist,
// with no runlist running more than the GPU's time.
var vgpuChecks = []struct {
	query string
	want  int
}{
	{`vgpu_vgpu_instance_info{job=%q} == 1`, 3},
	{`vgpu_vgpu_scheduler_info{job=%q,policy="best-effort"} == 1`, 1},
	{`vgpu_vgpu_scheduler_timeslice_seconds{job=%q} == 0.002`, 1},
	{`increase(vgpu_vgpu_scheduler_run_seconds_total{job=%q}[1m]) > 0`, 3},
	{`increase(vgpu_vgpu_scheduler_preemption_seconds_total{job=%q}[1m]) > 0`, 3},
	{`increase(vgpu_vgpu_scheduler_slices_total{job=%q}[1m]) > 0`, 3},
	{`sum by (uuid) (rate(vgpu_vgpu_scheduler_run_seconds_total{job=%q}[1m])) <= 1.05`, 1},
}

// waitFor bounds every wait of the test.
const waitFor = 60 * time.Second

// target is one exporter under test.
type target struct {
	scenario string
	tenants  []string
	addr     string
	proc     *process
}

func TestExporterScrapedByPrometheus(t *testing.T) {
	promBin := findTool(t, "prometheus")
	promtoolBin := findTool(t, "promtool")
	bin := buildExporter(t)

	var targets []*target
	for _, name := range scenarioNames {
		tg := &target{scenario: name, tenants: scenarioTenants(t, name), addr: freeAddr(t)}
		tg.proc = start(t, "exporter-"+name, bin,
			"--backend=sim",
			"--sim.scenario="+name,
			"--web.listen-address="+tg.addr,
			"--log.level=debug",
		)
		targets = append(targets, tg)
	}
	procs := func(extra ...*process) []*process {
		for _, tg := range targets {
			extra = append(extra, tg.proc)
		}
		return extra
	}
	for _, tg := range targets {
		poll(t, tg.scenario+" exporter to be ready", func() error {
			code, body, err := get("http://" + tg.addr + "/-/ready")
			if err != nil {
				return err
			}
			if code != http.StatusOK {
				return fmt.Errorf("/-/ready: %d %s", code, body)
			}
			return nil
		}, procs()...)
	}

	// One Prometheus scrapes every exporter each second; the job is the
	// scenario's name.
	dir := t.TempDir()
	promAddr := freeAddr(t)
	promConfig := filepath.Join(dir, "prometheus.yml")
	cfg := "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
	for _, tg := range targets {
		cfg += fmt.Sprintf("  - job_name: %q\n    static_configs:\n      - targets: [%q]\n", tg.scenario, tg.addr)
	}
	writeFile(t, promConfig, cfg)
	prom := start(t, "prometheus", promBin,
		"--config.file="+promConfig,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr,
		"--log.level=warn",
	)
	promURL := "http://" + promAddr

	for _, tg := range targets {
		job := tg.scenario
		// Two scrapes, both successful.
		poll(t, job+": two successful scrapes", func() error {
			res, err := query(promURL, fmt.Sprintf(`sum_over_time(up{job=%q}[5m])`, job))
			if err != nil {
				return err
			}
			if len(res) != 1 || res[0].Value < 2 {
				return fmt.Errorf("successful scrapes so far: %v", res)
			}
			t.Logf("%s: successful scrapes: %v", job, res[0].Value)
			return nil
		}, procs(prom)...)
		res, err := query(promURL, fmt.Sprintf(`up{job=%q} == 1`, job))
		if err != nil || len(res) != 1 {
			t.Fatalf("%s: up == 1: %v %v", job, res, err)
		}
		// The data says it is simulated, and the build is identified.
		for _, q := range []string{
			fmt.Sprintf(`vgpu_backend_info{job=%q,backend="sim"} == 1`, job),
			fmt.Sprintf(`vgpu_exporter_build_info{job=%q} == 1`, job),
		} {
			res, err := query(promURL, q)
			if err != nil || len(res) != 1 {
				t.Errorf("%s: %s: %v %v", job, q, res, err)
			}
		}

		// Every tenant of the scenario has SM activity.
		poll(t, job+": SM activity of every tenant", func() error {
			res, err := query(promURL, fmt.Sprintf(`max by (tenant) (max_over_time(vgpu_tenant_sm_active_ratio{job=%q}[5m]))`, job))
			if err != nil {
				return err
			}
			got := map[string]float64{}
			for _, s := range res {
				got[s.Labels["tenant"]] = s.Value
			}
			var missing []string
			for _, name := range tg.tenants {
				if v, ok := got[name]; !ok || !(v > 0) {
					missing = append(missing, fmt.Sprintf("%s=%v", name, v))
				}
			}
			if len(missing) > 0 {
				return fmt.Errorf("tenants without SM activity: %s (have %v)", strings.Join(missing, ", "), got)
			}
			t.Logf("%s: SM active ratio per tenant (max over the run): %v", job, got)
			return nil
		}, procs(prom)...)

		if job == vgpuScenario {
			poll(t, job+": vGPU series", func() error {
				for _, c := range vgpuChecks {
					q := fmt.Sprintf(c.query, job)
					res, err := query(promURL, q)
					if err != nil {
						return err
					}
					if len(res) != c.want {
						return fmt.Errorf("%s: %d series, want %d: %v", q, len(res), c.want, res)
					}
				}
				t.Logf("%s: vGPU instance, scheduler and scheduler log series served", job)
				return nil
			}, procs(prom)...)
		}

		// promtool has no findings on a scrape.
		code, body, err := get("http://" + tg.addr + "/metrics")
		if err != nil || code != http.StatusOK {
			t.Fatalf("%s: scrape: %d %v", job, code, err)
		}
		check := exec.Command(promtoolBin, "check", "metrics")
		check.Stdin = strings.NewReader(body)
		out, err := check.CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("%s: promtool check metrics: %v\n%s", job, err, out)
		} else {
			t.Logf("%s: promtool check metrics: no findings on a %d-byte scrape", job, len(body))
		}
	}

	// SIGTERM shuts the exporters down cleanly.
	for _, tg := range targets {
		if err := tg.proc.stop(); err != nil {
			t.Errorf("%s exporter shutdown: %v\n%s", tg.scenario, err, tg.proc.logs())
		}
	}
}

// findTool returns the path of an installed binary, or skips the test
// (fails it under CI=true, where the packages must be installed).
func findTool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := "/usr/bin/" + name; isExecutable(p) {
		return p
	}
	msg := fmt.Sprintf("%s not found in PATH or /usr/bin: install the Debian packages prometheus and prometheus-alertmanager (apt-get install -y prometheus prometheus-alertmanager)", name)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// scenarioTenants returns the tenant names of a built-in scenario's
// tenants file.
func scenarioTenants(t *testing.T, name string) []string {
	t.Helper()
	b, err := scenarios.Find(name)
	if err != nil {
		t.Fatal(err)
	}
	file := b.TenantsPath()
	if file == "" {
		t.Fatalf("built-in scenario %s has no tenants file", name)
	}
	data, err := fs.ReadFile(b.FS, file)
	if err != nil {
		t.Fatalf("built-in scenario %s: %v", name, err)
	}
	cfg, err := tenant.ParseConfig(file, data)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tn := range cfg.Tenants {
		names = append(names, tn.Name)
	}
	if len(names) == 0 {
		t.Fatalf("%s has no tenants", file)
	}
	return names
}

// buildExporter builds the exporter binary into a temporary directory.
func buildExporter(t *testing.T) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	bin := filepath.Join(t.TempDir(), "vgpu_exporter")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/vgpu_exporter")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-Wno-deprecated-declarations")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// process is a started child process whose output goes to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

// start runs bin with args; the process is killed when the test ends, and
// its log shown if the test failed.
func start(t *testing.T, name, bin string, args ...string) *process {
	t.Helper()
	return launch(t, name, bin, false, args...)
}

// launch runs bin with args, its output to its log file (through a pipe when
// piped); the process is killed when the test ends, and unless piped its log
// shown if the test failed.
func launch(t *testing.T, name, bin string, piped bool, args ...string) *process {
	t.Helper()
	p := &process{name: name, logPath: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	var w io.Writer = f
	if piped {
		w = struct{ io.Writer }{f} // not an *os.File: exec copies through a pipe
	}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	// Cleanup kills the process when the test ends; dieWithParent also
	// covers a test binary that dies first (go test -timeout).
	dieWithParent(p.cmd)
	if err := p.cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if !piped && t.Failed() {
			t.Logf("--- %s log:\n%s", p.name, p.logs())
		}
	})
	return p
}

// exited returns an error when the process has already ended.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v", p.name, p.err)
	default:
		return nil
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *process) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(waitFor):
		return errors.New("still running after SIGTERM")
	}
}

func (p *process) logs() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// poll calls f until it succeeds or waitFor passes; it stops early when one
// of procs has exited.
func poll(t *testing.T, what string, f func() error, procs ...*process) {
	t.Helper()
	pollFor(t, waitFor, what, f, procs...)
}

// pollFor is poll with its own bound.
func pollFor(t *testing.T, waitFor time.Duration, what string, f func() error, procs ...*process) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var err error
	for {
		if err = f(); err == nil {
			return
		}
		for _, p := range procs {
			if e := p.exited(); e != nil {
				t.Fatalf("waiting for %s: %v (last error: %v)", what, e, err)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: gave up after %s: %v", what, waitFor, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

var client = &http.Client{Timeout: 5 * time.Second}

func get(u string) (int, string, error) {
	resp, err := client.Get(u)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// sample is one element of an instant vector.
type sample struct {
	Labels map[string]string
	Value  float64
}

// query runs an instant query against Prometheus's HTTP API.
func query(promURL, q string) ([]sample, error) {
	code, body, err := get(promURL + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return nil, fmt.Errorf("query %q: HTTP %d: %v: %.200s", q, code, err, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %q: result type %s", q, r.Data.ResultType)
	}
	var out []sample
	for _, s := range r.Data.Result {
		str, ok := s.Value[1].(string)
		if !ok {
			return nil, fmt.Errorf("query %q: odd value %v", q, s.Value)
		}
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: %v", q, err)
		}
		out = append(out, sample{Labels: s.Metric, Value: v})
	}
	slices.SortFunc(out, func(a, b sample) int { return strings.Compare(fmt.Sprint(a.Labels), fmt.Sprint(b.Labels)) })
	return out, nil
}
