package autotune

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// TestAwayAfterRestartBuilt: TestAwayAfterRestart's scene with the
// snapshots a tenants Builder makes. The exporter restarts with the MPS
// cap the tuner set on embed (its original kept in the journal), and
// chat's process is missing (its server restarting). Under the
// exporter's default --tenants.latency-sources=running, chat's latency
// source is read, and its SLO status served, only once chat has usage on
// the host: none is served. Chat, configured with an SLO, may have been
// there before the start: the cap holds for chat's SLO window (its own,
// else the default) from the policy's start, and goes back then; a
// reload that drops chat's SLO gives it back at once. Before, with no SLO
// status served, the first decision after the restart gave the cap back
// (a restart of embed's client, and the cap to be taken again once chat
// is back); the policy waited only where every source is read.
func TestAwayAfterRestartBuilt(t *testing.T) {
	const embed = "  - name: embed\n    class: batch\n    selectors: [{uid: 2000}]\n"
	chat := func(slo string) string {
		if slo == "" {
			return "  - name: chat\n    class: latency\n    selectors: [{uid: 1000}]\n"
		}
		return "  - name: chat\n    class: latency\n    selectors: [{uid: 1000}]\n    slo: " + slo + "\n    latency_source: {url: \"sim://chat\", preset: vllm-e2e}\n"
	}
	body := "# TYPE vllm:e2e_request_latency_seconds histogram\nvllm:e2e_request_latency_seconds_bucket{le=\"+Inf\"} 1\nvllm:e2e_request_latency_seconds_count 1\nvllm:e2e_request_latency_seconds_sum 0.1\n"
	embedT := tuner.Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 2}
	tests := []struct {
		name   string
		slo    string        // chat's slo
		reload time.Duration // when a reload drops chat's SLO (0: none)
		hold   time.Duration // how long the cap holds after the start
	}{
		{"the default window", "{quantile: 0.99, target: 1s}", 0, tenant.DefaultSLOWindow},
		{"chat's own window", "{quantile: 0.99, target: 1s, window: 10m}", 0, 10 * time.Minute},
		{"a reload drops chat's SLO", "{quantile: 0.99, target: 1s}", time.Minute, time.Minute},
	}
	for _, running := range []bool{true, false} {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("sources where running %v: %s", running, tc.name), func(t *testing.T) {
				start := t0.Add(time.Hour)
				clock := gpu.NewManualClock(start)
				file := filepath.Join(t.TempDir(), "tenants.yaml")
				write := func(yaml string) {
					if err := os.WriteFile(file, []byte("tenants:\n"+yaml), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				write(chat(tc.slo) + embed)
				sloed := true // chat configured with an SLO
				cfg, err := tenant.LoadConfig(file)
				if err != nil {
					t.Fatal(err)
				}
				app := &testutil.FakeApp{Body: map[string][]byte{"chat": []byte(body)}}
				b, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{Clock: clock, Latency: latency.NewPool(latency.Options{Clock: clock, AppMetrics: app}), SourcesWhereRunning: running})
				if err != nil {
					t.Fatal(err)
				}
				p := New() // the restart: its first decision is the next
				decide := func() []tuner.Action {
					half := 0.5
					r := &gpu.Readings{Time: clock.Now(), Devices: []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS,
						Processes: []gpu.Process{{PID: 2, UID: 2000, Name: "embed", Type: gpu.ProcessMPS, MPSActiveThreads: &half}}}}}
					b.Build(r, gpu.SamplerStats{})
					b.Refresh(context.Background())
					snap := b.Build(r, gpu.SamplerStats{})
					if served := len(snap.SLOs) > 0; served != (sloed && !running) {
						t.Fatalf("SLO statuses %+v served, sources read where their tenants run %v", snap.SLOs, running)
					}
					s := &tuner.State{Now: clock.Now(), Snapshot: snap, Changes: map[string]tuner.Change{}, Pending: map[string]tuner.Fraction{},
						Originals: map[string]tuner.Value{embedT.String(): tuner.Fraction(1)}}
					return p.Decide(s)
				}
				for at := time.Duration(0); at < tc.hold; at += 15 * time.Second {
					for _, a := range decide() {
						t.Fatalf("%v after the start, chat not seen: %s=%s restart=%v (%s)", at, a.Target, a.Want, a.Restart, a.Reason)
					}
					clock.Advance(15 * time.Second)
				}
				if tc.reload > 0 {
					write(chat("") + embed)
					if err := b.Reload(""); err != nil {
						t.Fatal(err)
					}
					sloed = false
				}
				checkActions(t, decide(), []string{"GPU-0/mps_active_threads/pid2=55%"}, "no latency tenant is left")
			})
		}
	}
}
