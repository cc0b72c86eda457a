//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
)

// tunerScenario runs MPS with a latency tenant beside a batch one, so the
// tuner soon caps the batch tenant and then holds for the dwell between
// steps.
const tunerScenario = "bursty-llm-training"

// tunerP95Tenant is tunerScenario's latency tenant; its SLO is a p95.
const tunerP95Tenant = "assistant"

// screenshotPath is the page's screenshot in the documentation, rewritten
// when UPDATE_SCREENSHOT=1.
const screenshotPath = "docs/img/tuner-page.png"

// TestTunerPageInChromium loads /tuner of the real binary (simulator, tuner
// enforcing) in headless Chromium and checks what the browser renders:
// one row per tenant, the decisions table, and no script at all.
func TestTunerPageInChromium(t *testing.T) {
	chrome := findChromium(t)
	bin := buildExporter(t)
	addr := freeAddr(t)
	base := "http://" + addr
	// The scenario's tenants without the trainer's restart_cost: with it
	// the tuner makes one large step and waits, and the page would show
	// little of the tuner stepping and holding within the test's time.
	sc, err := scenarios.Find(tunerScenario)
	if err != nil {
		t.Fatal(err)
	}
	builtin, err := fs.ReadFile(sc.FS, sc.TenantsPath())
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(builtin), "\n") {
		if !strings.Contains(l, "restart_cost") {
			lines = append(lines, l)
		}
	}
	tenantsFile := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(tenantsFile, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "exporter-tuner", bin,
		"--backend=sim",
		"--sim.scenario="+tunerScenario,
		"--tenants.config="+tenantsFile,
		"--tuner.mode=enforce",
		"--tuner.interval=1s",
		"--tuner.journal="+filepath.Join(t.TempDir(), "tuner.jsonl"),
		"--web.listen-address="+addr,
	)
	waitReady(t, p, base)
	// Wait until the tuner has acted and a minute of rounds is in the
	// history, so that the page (and the screenshot) shows a change and the
	// sparklines have a shape. (A step the dwell would refuse is held, not
	// proposed: the GPU's line says so, and no guard needs to refuse it.)
	began := time.Now()
	pollFor(t, 3*time.Minute, "an applied decision and a minute of history", func() error {
		_, body, err := get(base + "/tuner?format=json")
		if err != nil {
			return err
		}
		var v struct {
			Decisions []struct{ Outcome string } `json:"decisions"`
		}
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			return fmt.Errorf("%v: %.200s", err, body)
		}
		var outcomes []string
		for _, d := range v.Decisions {
			outcomes = append(outcomes, d.Outcome)
		}
		if !slices.Contains(outcomes, "applied") {
			return fmt.Errorf("outcomes so far: %v", outcomes)
		}
		if time.Since(began) < time.Minute {
			return errors.New("less than a minute of rounds")
		}
		return nil
	}, p)

	alloc, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chrome),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// Without these Chromium waits on the network, which a closed
		// machine never answers.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	)
	defer cancel()
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	// The page reloads itself every round (a second here): each reading
	// is one script run on one load, tried again on a load that one
	// reload cut short, until a GPU is seen holding.
	var pg pageReading
	for try := 0; ; try++ {
		err := chromedp.Do(ctx, chromedp.Navigate(base+"/tuner"), chromedp.WaitVisible(chromedp.CSS("#decisions")))
		if err == nil {
			pg, err = chromedp.Run(ctx, chromedp.Evaluate[pageReading](pageReadingJS))
		}
		if err == nil && len(pg.Rounds) > 0 && strings.HasPrefix(pg.Rounds[0], "holding because") {
			break
		}
		if try == 30 {
			t.Fatalf("chromium: no GPU seen holding in %d loads (last: %+v, %v)", try, pg.Rounds, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/tuner"), chromedp.WaitVisible(chromedp.CSS("#decisions"))); err != nil {
		t.Fatalf("chromium: loading the page: %v", err)
	}
	shot := browse(t, ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if pg.Title != "vgpu_exporter tuner" {
		t.Errorf("title %q", pg.Title)
	}
	if pg.Mode != "enforce" || pg.Backend != "sim (simulated data)" || !pg.SimBanner || pg.Refresh != "1" {
		t.Errorf("mode %q, backend %q, simulated-data banner %v, meta refresh %q; want enforce, sim, a banner, 1", pg.Mode, pg.Backend, pg.SimBanner, pg.Refresh)
	}
	if !regexp.MustCompile(`^updated \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ, reloads every 1s$`).MatchString(pg.Updated) {
		t.Errorf("updated line %q", pg.Updated)
	}
	if want := scenarioTenants(t, tunerScenario); !slices.Equal(pg.Tenants, want) {
		t.Errorf("tenant rows %q, want %q", pg.Tenants, want)
	}
	if pg.Decisions == 0 || pg.Settings == 0 {
		t.Errorf("%d decision rows and %d setting rows, want some of each", pg.Decisions, pg.Settings)
	}
	if !strings.Contains(pg.Reason, "violates its SLO") {
		t.Errorf("latest decision's reason %q does not say which SLO drives it", pg.Reason)
	}
	// The latency column is each SLO's own quantile: the scenario's
	// latency tenant has a p95 SLO.
	if i := slices.Index(pg.Tenants, tunerP95Tenant); i < 0 || i >= len(pg.Latencies) || !regexp.MustCompile(`^p95 \d`).MatchString(pg.Latencies[i]) {
		t.Errorf("latency column %q of tenants %q: %s's is not its SLO's p95", pg.Latencies, pg.Tenants, tunerP95Tenant)
	}
	// The burn column: each latency tenant's burn over the tuner's window.
	burn := regexp.MustCompile(`^\d+\.\d\dx over (\d+s|1m)`)
	var burns int
	for _, b := range pg.Burns {
		if burn.MatchString(b) {
			burns++
		}
	}
	if burns == 0 {
		t.Errorf("burn column %q: no burn of the form 0.42x over 1m", pg.Burns)
	}
	// The GPU's line says why it holds (guard, budget or recommend).
	if r := pg.Rounds[0]; len(r) < len("holding because ")+20 {
		t.Errorf("holding line %q says no reason", r)
	}
	// The history: a sparkline per latency tenant and per knob, drawn.
	if pg.TenantLines == 0 || pg.KnobLines == 0 || pg.SparkWidth != 240 {
		t.Errorf("history: %d tenant and %d knob polylines, sparkline %vpx wide; want some of each, 240px", pg.TenantLines, pg.KnobLines, pg.SparkWidth)
	}
	if pg.Scripts != 0 {
		t.Errorf("the page holds %d scripts, want none", pg.Scripts)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 600 {
		t.Errorf("screenshot is %dx%d", b.Dx(), b.Dy())
	}
	if os.Getenv("UPDATE_SCREENSHOT") == "1" {
		_, here, _, _ := runtime.Caller(0)
		out := filepath.Join(filepath.Dir(here), "..", "..", screenshotPath)
		if err := os.WriteFile(out, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", out)
	}
}

// browse runs one action in the browser, failing the test on an error.
func browse[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return v
}

// pageReading is what the browser renders of the page, read in one go.
type pageReading struct {
	Title, Mode, Backend, Refresh, Updated, Reason string
	SimBanner                                      bool
	Tenants, Latencies, Burns, Rounds              []string
	Decisions, Settings, Scripts                   int
	TenantLines, KnobLines                         int
	SparkWidth                                     float64
}

const pageReadingJS = `(() => {
	const all = (q) => Array.from(document.querySelectorAll(q));
	const text = (q) => { const e = document.querySelector(q); return e ? e.textContent.trim() : ""; };
	const spark = document.querySelector("#tenants svg.spark");
	return {
		Title: document.title, Mode: text("#mode"), Backend: text("#backend"), Updated: text("#updated") + document.querySelector("#updated").nextSibling.textContent.trimEnd(),
		Refresh: document.querySelector('meta[http-equiv="refresh"]').content,
		SimBanner: document.querySelector("#simulated") !== null,
		Tenants: all("#tenants tr.tenant td.tenant-name").map(e => e.textContent),
		Latencies: all("#tenants tr.tenant td.latency").map(e => e.textContent),
		Burns: all("#tenants td.burn").map(e => e.textContent),
		Rounds: all("#gpus td.round").map(e => e.textContent),
		Decisions: all("#decisions tr.decision").length, Settings: all("#settings tr.setting").length,
		Scripts: document.scripts.length,
		Reason: text("#decisions tr.decision td:last-child"),
		TenantLines: all("#tenants svg.spark polyline").length, KnobLines: all("#knob-history svg.spark polyline").length,
		SparkWidth: spark ? spark.getBoundingClientRect().width : 0,
	};
})()`

// findChromium returns the Chromium binary, or skips the test (fails it
// under CI=true, where the package must be installed).
func findChromium(t *testing.T) string {
	t.Helper()
	var errs []error
	for _, name := range []string{"chromium", "chromium-browser"} {
		p, err := exec.LookPath(name)
		if err == nil {
			return p
		}
		errs = append(errs, err)
	}
	msg := fmt.Sprintf("no Chromium: install the Debian package chromium (apt-get install -y chromium): %v", errors.Join(errs...))
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
