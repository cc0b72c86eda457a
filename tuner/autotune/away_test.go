package autotune

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
					for _, a := range acting(decide()) {
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

// TestAwayHoldsWhatGoesBack: whatever the policy gives back on a GPU
// its last latency tenant has left (the pause, the MPS cap, the clock
// lock, the power limit, the time-slice level; several at once), it
// holds, the same changes, while that tenant is away: missing for less
// than its SLO window, or, after a restart, on a GPU it may have been on
// before (within its window of the start). The hold is of what the
// give-back would do, not of a list of knobs kept beside it, so a knob
// the policy comes to give back is held with the others; and each held
// change says why (Action.Held: the GPU's round gives it as its reason).
// Before, the give-back paths each returned nothing while a tenant was
// away, after a restart only where a hand-kept list of knobs named one
// the tuner kept an original of, and the round gave no reason.
func TestAwayHoldsWhatGoesBack(t *testing.T) {
	half := 0.5
	fine := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}
	lowered := &tuner.ClockRange{MinMHz: 1386, MaxMHz: 1386}
	all := func(fs ...func(*tuner.State)) func(*tuner.State) {
		return func(s *tuner.State) {
			for _, f := range fs {
				f(s)
			}
		}
	}
	tests := []struct {
		name string
		sc   scene
		prep func(*tuner.State)
	}{
		{"the pause", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3}, tunersPause},
		{"the MPS cap", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3, changed: 10 * time.Minute}, tunersCap},
		{"the energy clock lock", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, maxMHz: 1980, lock: lowered, ours: true, clockAgo: 3 * time.Minute}, nil},
		{"the lowered power limit", scene{mode: gpu.SharingMPS, fast: fine, p99: 0.3, power: 490}, tunersPower},
		{"the time-slice level", scene{mode: gpu.SharingTimeSlice, embedCap: &half, fast: fine, p99: 0.3, timeSlice: gpu.TimeSliceShort}, tunersLevel},
		{"the MPS cap and the power limit", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3, changed: 10 * time.Minute, power: 490}, all(tunersCap, tunersPower)},
		{"the pause and the clock lock", scene{mode: gpu.SharingMPS, embedCap: &half, fast: fine, p99: 0.3, maxMHz: 1980, lock: lowered, ours: true, clockAgo: 3 * time.Minute}, all(tunersPause, tunersCap)},
		{"the time-slice level, the pause and the power limit", scene{mode: gpu.SharingTimeSlice, embedCap: &half, fast: fine, p99: 0.3, timeSlice: gpu.TimeSliceShort, power: 490}, all(tunersLevel, tunersPause, tunersPower)},
	}
	texts := func(acts []tuner.Action) (out []string) {
		for _, a := range acts {
			out = append(out, a.Target.String()+"="+a.Want.String())
		}
		return out
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mk := func(chat bool) *tuner.State {
				s := tc.sc.state()
				if !chat {
					s.Snapshot.Usage = s.Snapshot.Usage[1:]
					d := &s.Snapshot.Readings.Devices[0]
					d.Processes = d.Processes[1:]
				}
				if tc.prep != nil {
					tc.prep(s)
				}
				return s
			}
			now := mk(false).Now
			// chat has left: what goes back
			gone := runningSince(now.Add(-tenant.DefaultSLOWindow)).Decide(mk(false))
			if len(gone) == 0 || len(acting(gone)) != len(gone) {
				t.Fatalf("chat gone: %v, want settings given back", texts(gone))
			}
			// chat away: seen a minute ago; or not seen since the restart
			// a minute ago
			seen := New()
			s := mk(true)
			s.Now = now.Add(-time.Minute)
			seen.Decide(s)
			restarted := runningSince(now.Add(-time.Minute))
			for _, away := range []struct {
				p   *Autotune
				why string
			}{
				{seen, "chat, a latency tenant of this GPU, has had no process on it for 1m0s of its 5m0s SLO window: away, not gone, its latency unknown, so what the tuner set here holds until it is back or 4m0s from now"},
				{restarted, "no latency tenant has been seen on this GPU since the policy's first round 1m0s ago (the exporter's start), and chat (SLO window 5m0s) may have been on it before: away, not gone, its latency unknown, so what the tuner set here holds until it is back or 4m0s from now"},
			} {
				held := away.p.Decide(mk(false))
				if got, want := texts(held), texts(gone); !slices.Equal(got, want) {
					t.Fatalf("chat away (%s): %v, want %v held", away.why, got, want)
				}
				for _, a := range held {
					if a.Held != away.why {
						t.Errorf("%s held %q, want %q", a.Target, a.Held, away.why)
					}
				}
			}
		})
	}
}

// TestAwayRoundSaysWhy: the exporter restarts with the power limit the
// tuner lowered on GPU-0 open in its journal, its restore at start fails,
// and no latency tenant is on the GPU. The rounds after hold it, as chat
// may have been there before the start, and say so where the other
// holds are told (the round's reason: /tuner and its JSON). Before, the
// policy proposed nothing, and the round told of no SLO signal as on a
// GPU with nothing of the tuner's to give back.
func TestAwayRoundSaysWhy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	rec := `{"time":"2026-01-01T00:50:00Z","event":"original","target":{"gpu":"GPU-0","knob":"power_limit"},"from":{"kind":"watts","num":700}}` + "\n"
	if err := os.WriteFile(path, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := tuner.OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	clock := gpu.NewManualClock(t0.Add(time.Hour))
	power := &powerBackend{fail: 1}
	tu, err := tuner.New(tuner.Options{Policy: New(), Actuators: tuner.ActuatorsOf(power), Journal: j, Clock: clock, Mode: tuner.ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	snap := func() *tenant.Snapshot {
		s := snapshot(clock.Now(), []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, PowerLimitW: gpu.Float(490)}}, nil)
		s.Tenants = []tenant.Info{{Name: "chat", Class: gpu.ClassLatency, SLOWindow: tenant.DefaultSLOWindow}}
		return s
	}
	if ds, err := tu.Recover(t.Context(), snap()); err == nil || len(power.set) != 1 {
		t.Fatalf("the restore at start: %v, %v; want it failed", ds, err)
	}
	for _, at := range []time.Duration{15 * time.Second, time.Minute} {
		clock.Set(t0.Add(time.Hour + at))
		if _, err := tu.RunOnce(t.Context(), snap()); err != nil {
			t.Fatal(err)
		}
		if len(power.set) != 1 {
			t.Fatalf("%v after the start: the power limit set %v", at, power.set)
		}
		r := tu.Status().GPUs[0]
		want := fmt.Sprintf("no latency tenant has been seen on this GPU since the policy's first round %v ago (the exporter's start), and chat (SLO window 5m0s) may have been on it before: away, not gone, its latency unknown, so what the tuner set here holds until it is back or %v from now (held back: power_limit 490W → 700W)",
			at-15*time.Second, tenant.DefaultSLOWindow-at+15*time.Second)
		if r.Kind != tuner.RoundHeld || r.Why != want {
			t.Errorf("%v after the start: round %s %q, want %s %q", at, r.Kind, r.Why, tuner.RoundHeld, want)
		}
	}
}

// powerBackend drives clocks and power on every GPU, recording the power
// limits set; the first fail of them fail.
type powerBackend struct {
	set  []float64
	fail int
}

func (*powerBackend) LockClocks(context.Context, string, gpu.ClockLock) error { return nil }
func (b *powerBackend) SetPowerLimit(_ context.Context, _ string, w float64) error {
	b.set = append(b.set, w)
	if b.fail > 0 {
		b.fail--
		return errors.New("the driver refused")
	}
	return nil
}
