//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// tunerScenario runs MPS with a latency tenant beside a batch one, so the
// tuner soon caps the batch tenant and its guards refuse some changes.
const tunerScenario = "bursty-llm-training"

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
	// the tuner makes one large step and waits, and no guard needs to
	// refuse anything within the test's time.
	builtin, err := os.ReadFile(filepath.Join("..", "scenarios", tunerScenario+".tenants.yaml"))
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
	// Wait until the tuner has acted and been refused at least once, so
	// that the page (and the screenshot) shows both.
	pollFor(t, 2*time.Minute, "an applied and a guarded decision", func() error {
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
		if !slices.Contains(outcomes, "applied") || !slices.Contains(outcomes, "guarded") {
			return fmt.Errorf("outcomes so far: %v", outcomes)
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

	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/tuner"), chromedp.WaitVisible(chromedp.CSS("#decisions"))); err != nil {
		t.Fatalf("chromium: loading the page: %v", err)
	}
	title := browse(t, ctx, chromedp.Title())
	mode := browse(t, ctx, chromedp.Text(chromedp.CSS("#mode")))
	tenants := browse(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#tenants tr.tenant td.tenant-name")).map(e => e.textContent)`))
	decisions := browse(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#decisions tr.decision").length`))
	settings := browse(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#settings tr.setting").length`))
	scripts := browse(t, ctx, chromedp.Evaluate[int](`document.scripts.length`))
	reason := browse(t, ctx, chromedp.Text(chromedp.CSS("#decisions tr.decision td:last-child")))
	shot := browse(t, ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if title != "vgpu_exporter tuner" {
		t.Errorf("title %q", title)
	}
	if mode != "enforce" {
		t.Errorf("mode %q, want enforce", mode)
	}
	if want := scenarioTenants(t, tunerScenario); !slices.Equal(tenants, want) {
		t.Errorf("tenant rows %q, want %q", tenants, want)
	}
	if decisions == 0 || settings == 0 {
		t.Errorf("%d decision rows and %d setting rows, want some of each", decisions, settings)
	}
	if !strings.Contains(reason, "violates its SLO") {
		t.Errorf("latest decision's reason %q does not say which SLO drives it", reason)
	}
	if scripts != 0 {
		t.Errorf("the page holds %d scripts, want none", scripts)
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
