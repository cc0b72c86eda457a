package main

import (
	"context"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/webui"
)

// pageTime is when the page tests' simulated hosts start.
var pageTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// The page's info comes from the configuration: the backend (auto serves
// NVML or nothing) and the reload at the tuner's interval.
func TestTunerPageInfoOf(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want webui.TunerPageInfo
	}{
		{[]string{"--backend=sim", "--sample.interval=5s"}, webui.TunerPageInfo{Backend: "sim", Refresh: 5 * time.Second}},
		{[]string{"--backend=sim", "--tuner.mode=recommend", "--tuner.interval=20s"}, webui.TunerPageInfo{Backend: "sim", Refresh: 20 * time.Second}},
		{[]string{"--backend=nvml", "--sample.interval=2s"}, webui.TunerPageInfo{Backend: "nvml", Refresh: 2 * time.Second}},
		{[]string{"--sample.interval=2s"}, webui.TunerPageInfo{Backend: "nvml", Refresh: 2 * time.Second}},
	} {
		if got := tunerPageInfoOf(testConfig(t, tc.args...)); got != tc.want {
			t.Errorf("%q: %+v, want %+v", tc.args, got, tc.want)
		}
	}
}

// The exporter on the simulator links the page from its landing page, and
// the page shows the tuner's section only when it runs. (Decisions need the
// latency sources' background scrapes: test/e2e checks them on the binary.)
func TestExporterServesTunerPage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"off", nil, []string{`id="tuner-off"`, `class="tenant"`, `id="simulated"`, `content="1"`}},
		{"enforce", []string{"--tuner.mode=enforce"}, []string{`<dd id="mode">enforce</dd>`, `class="tenant"`, `<h2>Latest decisions</h2>`,
			`id="simulated"`, `<td class="round `, `<td class="burn num `, `id="knob-history"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := gpu.NewManualClock(pageTime)
			cfg := testConfig(t, append([]string{"--backend=sim", "--sim.scenario=noisy-neighbour"}, tc.args...)...)
			svc, err := buildOn(cfg, clock, log.NewNopLogger())
			if err != nil {
				t.Fatal(err)
			}
			defer svc.src.Close()
			simRounds(t, svc, clock, 4)
			h, err := newHandler(handlerOptions{TelemetryPath: "/metrics",
				NewCollector: newFakeCollector,
				TunerPage:    webui.NewTunerPage(svc.Snapshot, svc.tunerStatus, tunerPageInfoOf(cfg), nil)})
			if err != nil {
				t.Fatal(err)
			}
			for path, want := range map[string][]string{"/": {`<a href="/tuner">Tuner</a>`}, "/tuner": tc.want} {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
				for _, w := range want {
					if !strings.Contains(rec.Body.String(), w) {
						t.Errorf("%s lacks %s", path, w)
					}
				}
			}
			if svc.tuner != nil {
				if err := svc.tuner.Restore(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// simRounds samples the service n times, 15s apart on clock, running the
// tuner after each sample when it is on.
func simRounds(t *testing.T, svc *service, clock *gpu.ManualClock, n int) {
	t.Helper()
	for range n {
		clock.Advance(15 * time.Second)
		if err := svc.Sampler().SampleOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if svc.tuner != nil {
			if _, err := svc.tuner.Tuner().RunOnce(context.Background(), svc.Snapshot()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The browser that tests the page stays out of the binary.
func TestBinaryLinksNoBrowserDriver(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/prometheus/exporter-toolkit/web") {
		t.Fatalf("go list -deps lists %d packages, without the exporter's own", len(deps))
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/chromedp/") {
			t.Errorf("the exporter links %s", d)
		}
	}
}
