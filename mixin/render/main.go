// Command render draws the panels of the mixin's dashboards to PNG images,
// so that the documentation shows what each dashboard shows. It runs
// vgpu_exporter on a simulator scenario with the tuner in enforce mode, a
// Prometheus that scrapes it and evaluates the mixin's recording rules, then
// queries each panel's expressions (template variables substituted) over the
// run and draws every dashboard as a grid of its panels with gonum/plot.
// `make dashboards-png` runs it from the repository root.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/dashjson"
)

func main() {
	exporter := flag.String("exporter", "./vgpu_exporter", "vgpu_exporter binary")
	prometheus := flag.String("prometheus", "prometheus", "prometheus binary")
	scenario := flag.String("scenario", "noisy-neighbour", "simulator scenario the exporter runs")
	tunerMode := flag.String("tuner-mode", "enforce", "--tuner.mode of the exporter")
	duration := flag.Duration("duration", 4*time.Minute, "how long Prometheus scrapes before the panels are queried")
	dashboardsDir := flag.String("dashboards", "dashboards", "directory of the dashboard JSON files")
	rulesDir := flag.String("rules", "alerts", "directory of the rule files Prometheus loads")
	out := flag.String("out", "docs/img/dashboards", "directory to write <uid>.png into")
	// The example prices of the h100-timeslice tenants file, so that the
	// chargeback dashboard's cost tables are filled.
	currency := flag.String("metering.currency", "USD", "--metering.currency of the exporter")
	perGPUHour := flag.String("metering.price-per-gpu-hour", "2.5", "--metering.price-per-gpu-hour of the exporter")
	perKWh := flag.String("metering.price-per-kwh", "0.15", "--metering.price-per-kwh of the exporter")
	// The opt-in pause knob, so that the tuner dashboard's pause panels
	// are filled.
	knob := flag.String("tuner.enable-knob", "pause_duty", "--tuner.enable-knob of the exporter (\"\": none)")
	flag.Parse()
	extra := []string{"--metering.currency=" + *currency, "--metering.price-per-gpu-hour=" + *perGPUHour, "--metering.price-per-kwh=" + *perKWh}
	if *knob != "" {
		extra = append(extra, "--tuner.enable-knob="+*knob)
	}
	if err := run(*exporter, *prometheus, *scenario, *tunerMode, *duration, *dashboardsDir, *rulesDir, *out, extra); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

const (
	scrapeInterval = 2 * time.Second
	// rateInterval is what $__rate_interval becomes: four scrape intervals,
	// as Grafana makes it.
	rateInterval = "8s"
	step         = 4 * time.Second
)

// run renders the dashboards of dashboardsDir into out; extra are more
// arguments of the exporter.
func run(exporter, prometheus, scenario, tunerMode string, duration time.Duration, dashboardsDir, rulesDir, out string, extra []string) error {
	boards, err := loadDashboards(dashboardsDir)
	if err != nil {
		return err
	}
	rules, err := filepath.Glob(filepath.Join(rulesDir, "*.yaml"))
	if err != nil || len(rules) == 0 {
		return fmt.Errorf("%s: no rule files (*.yaml)", rulesDir)
	}
	tmp, err := os.MkdirTemp("", "vgpu-render-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	exporterAddr, err := freeAddr()
	if err != nil {
		return err
	}
	exp, err := start(filepath.Join(tmp, "exporter.log"), exporter, append([]string{
		"--backend=sim",
		"--sim.scenario=" + scenario,
		"--tuner.mode=" + tunerMode,
		"--tuner.journal=" + filepath.Join(tmp, "tuner.journal"),
		"--web.listen-address=" + exporterAddr,
	}, extra...)...)
	if err != nil {
		return err
	}
	defer exp.stop()
	if err := waitHTTP("http://"+exporterAddr+"/metrics", exp); err != nil {
		return err
	}

	promAddr, err := freeAddr()
	if err != nil {
		return err
	}
	absRules := make([]string, len(rules))
	for i, r := range rules {
		if absRules[i], err = filepath.Abs(r); err != nil {
			return err
		}
	}
	config := filepath.Join(tmp, "prometheus.yml")
	if err := os.WriteFile(config, []byte(prometheusConfig(exporterAddr, absRules)), 0o644); err != nil {
		return err
	}
	prom, err := start(filepath.Join(tmp, "prometheus.log"), prometheus,
		"--config.file="+config,
		"--storage.tsdb.path="+filepath.Join(tmp, "tsdb"),
		"--web.listen-address="+promAddr,
		"--log.level=warn",
	)
	if err != nil {
		return err
	}
	defer prom.stop()
	if err := waitHTTP("http://"+promAddr+"/-/ready", prom); err != nil {
		return err
	}
	begin := time.Now()
	fmt.Fprintf(os.Stderr, "render: scraping %s scenario %s for %s\n", exporter, scenario, duration)
	time.Sleep(duration)
	end := time.Now()
	if err := exp.exited(); err != nil {
		return err
	}

	api := promAPI{base: "http://" + promAddr}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, d := range boards {
		var panels []panelData
		for _, p := range d.Panels {
			if p.Type == "row" {
				continue
			}
			pd, err := api.fetch(p, begin, end)
			if err != nil {
				return fmt.Errorf("dashboard %s, panel %q: %w", d.UID, p.Title, err)
			}
			panels = append(panels, pd)
		}
		path := filepath.Join(out, d.UID+".png")
		if err := writeGrid(path, d.Title, panels, begin); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		fmt.Fprintf(os.Stderr, "render: wrote %s (%d panels)\n", path, len(panels))
	}
	return nil
}

func prometheusConfig(exporterAddr string, rules []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  evaluation_interval: %s\nrule_files:\n", scrapeInterval, scrapeInterval)
	for _, r := range rules {
		fmt.Fprintf(&b, "  - %q\n", r)
	}
	fmt.Fprintf(&b, "scrape_configs:\n  - job_name: vgpu\n    static_configs:\n      - targets: [%q]\n        labels: {cluster: sim}\n", exporterAddr)
	return b.String()
}

// dashboard is the part of a Grafana dashboard the renderer reads.
type dashboard struct {
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
			// Decimals is how many decimals a value shows; nil: as many
			// as it needs.
			Decimals *int `json:"decimals"`
			// Mappings are the panel's value mappings; a table shows a
			// range mapping's text for the values it covers.
			Mappings []valueMapping `json:"mappings"`
			Custom   struct {
				// DrawStyle is "bars" for a panel of events (a bar per
				// interval with any), lines otherwise.
				DrawStyle string `json:"drawStyle"`
				Stacking  struct {
					Mode string `json:"mode"`
				} `json:"stacking"`
			} `json:"custom"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
		Instant      bool   `json:"instant"`
	} `json:"targets"`
	// Transformations of a table: its "organize" one names the columns
	// (renameByName: "Value #A", a label).
	Transformations []struct {
		ID      string `json:"id"`
		Options struct {
			RenameByName map[string]string `json:"renameByName"`
		} `json:"options"`
	} `json:"transformations"`
}

func loadDashboards(dir string) ([]dashboard, error) {
	return dashjson.Load(dir, func(d *dashboard) string { return d.UID })
}

// variables are the values the dashboards' template variables take: every
// cluster, job, host, GPU, MIG instance and tenant.
var variables = strings.NewReplacer(
	"$__rate_interval", rateInterval, "$__interval", step.String(), "$__range", "1h",
	"$cluster", ".*", "$job", ".*", "$host", ".*", "$gpu_instance", ".*", "$gpu", ".*", "$tenant", ".*",
)

// series is one labelled line of a panel.
type series struct {
	name string
	// ref is the refId of the target that gave the series, labels its
	// labels (a table's row and columns).
	ref    string
	labels map[string]string
	t, v   []float64 // seconds since the start of the run, value
}

type panelData struct {
	panel
	series []series
	// minutes is the length of the run queried, for the x axis of a panel
	// whose series hold only some of its intervals (events).
	minutes float64
}

type promAPI struct{ base string }

// fetch queries the targets of p: over [begin, end] for a time series
// panel, at end for a stat or table.
func (a promAPI) fetch(p panel, begin, end time.Time) (panelData, error) {
	pd := panelData{panel: p, minutes: end.Sub(begin).Minutes()}
	for _, tgt := range p.Targets {
		q := variables.Replace(tgt.Expr)
		params := url.Values{"query": {q}}
		path := "/api/v1/query_range"
		if tgt.Instant || p.Type != "timeseries" {
			path = "/api/v1/query"
			params.Set("time", unix(end))
		} else {
			params.Set("start", unix(begin))
			params.Set("end", unix(end))
			params.Set("step", step.String())
		}
		var resp struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				ResultType string `json:"resultType"`
				Result     []struct {
					Metric map[string]string `json:"metric"`
					Value  []any             `json:"value"`
					Values [][]any           `json:"values"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := getJSON(a.base+path+"?"+params.Encode(), &resp); err != nil {
			return pd, fmt.Errorf("%s: %w", q, err)
		}
		if resp.Status != "success" {
			return pd, fmt.Errorf("%s: %s", q, resp.Error)
		}
		for _, r := range resp.Data.Result {
			s := series{name: legend(tgt.LegendFormat, r.Metric), ref: tgt.RefID, labels: r.Metric}
			points := r.Values
			if r.Value != nil {
				points = [][]any{r.Value}
			}
			for _, pt := range points {
				t, v, ok := point(pt)
				if ok {
					s.t = append(s.t, t-float64(begin.Unix()))
					s.v = append(s.v, v)
				}
			}
			pd.series = append(pd.series, s)
		}
	}
	sort.SliceStable(pd.series, func(i, j int) bool { return pd.series[i].name < pd.series[j].name })
	return pd, nil
}

func unix(t time.Time) string { return fmt.Sprintf("%.3f", float64(t.UnixMilli())/1000) }

// point decodes a [time, "value"] pair of the Prometheus API; NaN and
// infinities (a ratio of nothing) are no point.
func point(pt []any) (t, v float64, ok bool) {
	if len(pt) != 2 {
		return 0, 0, false
	}
	t, ok = pt[0].(float64)
	s, sok := pt[1].(string)
	if !ok || !sok {
		return 0, 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, 0, false
	}
	return t, v, true
}

// legend fills a Grafana legend format ({{label}}) from labels; an empty
// format gives the labels but the target's and the GPU's uuid.
func legend(format string, labels map[string]string) string {
	if format == "" {
		names := make([]string, 0, len(labels))
		for k := range labels {
			if k != "__name__" && k != "job" && k != "cluster" && k != "instance" && k != "uuid" {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, k := range names {
			parts[i] = k + "=" + labels[k]
		}
		return strings.Join(parts, " ")
	}
	var b strings.Builder
	for {
		i := strings.Index(format, "{{")
		if i < 0 {
			b.WriteString(format)
			break
		}
		j := strings.Index(format[i:], "}}")
		if j < 0 {
			b.WriteString(format)
			break
		}
		b.WriteString(format[:i])
		b.WriteString(labels[strings.TrimSpace(format[i+2:i+j])])
		format = format[i+j+2:]
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

func getJSON(u string, v any) error {
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusUnprocessableEntity {
		return fmt.Errorf("HTTP %s", resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

type process struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan error
}

func start(logPath, bin string, args ...string) (*process, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &process{name: filepath.Base(bin), log: logPath, cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	return p, nil
}

// exited returns an error, with the end of its log, when p has exited.
func (p *process) exited() error {
	select {
	case err := <-p.done:
		p.done <- err
		log, _ := os.ReadFile(p.log)
		if len(log) > 4000 {
			log = log[len(log)-4000:]
		}
		return fmt.Errorf("%s exited (%v):\n%s", p.name, err, log)
	default:
		return nil
	}
}

func (p *process) stop() {
	if p.exited() != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitHTTP waits up to a minute for u to answer 200.
func waitHTTP(u string, p *process) error {
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		if e := p.exited(); e != nil {
			return e
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after a minute: %v", u, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
