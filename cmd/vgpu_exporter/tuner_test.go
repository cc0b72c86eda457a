package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// With --backend=sim and the tuner on, the exporter serves the tuner's
// metrics (and only then), and a clean exit restores and closes the journal.
func TestExporterServesTunerMetrics(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "tuner.jsonl")
	for _, tc := range []struct {
		name  string
		args  []string
		serve bool
	}{
		{"off", nil, false},
		{"enforce", []string{"--tuner.mode=enforce", "--tuner.journal=" + journal}, true},
		{"recommend on GPU 0 only", []string{"--tuner.gpu-mode=0=recommend"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			cfg := testConfig(t, append([]string{"--backend=sim", "--sim.scenario=noisy-neighbour"}, tc.args...)...)
			svc, err := buildOn(cfg, clock, log.NewNopLogger())
			if err != nil {
				t.Fatal(err)
			}
			defer svc.src.Close()
			if (svc.tuner != nil) != tc.serve {
				t.Fatalf("tuner built: %v, want %v", svc.tuner != nil, tc.serve)
			}
			simRounds(t, svc, clock, 3)
			h, err := newHandler(handlerOptions{TelemetryPath: "/metrics", NewCollector: func(filters ...string) (prometheus.Collector, error) {
				return svc.withTuner(newCollector, log.NewNopLogger(), filters)
			}})
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{"", "?collect[]=tuner", "?collect[]=tuner&collect[]=gpu"} {
				rr := httptest.NewRecorder()
				h.ServeHTTP(rr, httptest.NewRequest("GET", "/metrics"+q, nil))
				body := rr.Body.String()
				for _, m := range []string{`vgpu_tuner_info{policy="autotune"} 1`, `vgpu_tuner_guard_refusals_total{guard="dwell"} 0`, `vgpu_tuner_actions_total{knob="mps_active_threads",outcome="failed"} 0`} {
					if strings.Contains(body, m) != tc.serve {
						t.Errorf("%s: serves %q: %v, want %v", q, m, !tc.serve, tc.serve)
					}
				}
				if q == "?collect[]=tuner" && tc.serve && strings.Contains(body, "vgpu_gpu_") {
					t.Errorf("collect[]=tuner serves GPU metrics")
				}
			}
			if svc.tuner != nil {
				if err := svc.tuner.restore(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	if _, err := os.Stat(journal); err != nil {
		t.Errorf("journal not created: %v", err)
	}
}

func TestTunerFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--tuner.mode=enforce", "--tuner.interval=5s"}, ""},
		{[]string{"--tuner.mode=sometimes"}, "--tuner.mode"},
		{[]string{"--tuner.interval=0s"}, "--tuner.interval must be positive"},
		{[]string{"--tuner.gpu-mode=0"}, "want GPU=MODE"},
		{[]string{"--tuner.gpu-mode=0=fast"}, "unknown tuner mode"},
	} {
		cfg, err := parseArgs(t, tc.args...)
		if err == nil {
			err = cfg.validate()
		}
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.err)
		}
	}
}
