package autotune

import (
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// TestCapRelease: a cap is given back when the gain over as long as every
// SLO has held since the caps last changed is worth the restarts, or
// once they have held past the longest horizon; where a restart is
// costly, the batch share doubles in one restart.
func TestCapRelease(t *testing.T) {
	fine := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}
	violating := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 97} // burn 3
	fifth, thirty, half, sixty, ninety := 0.2, 0.3, 0.5, 0.6, 0.9
	slack := func(cp *float64, restart, changed time.Duration) scene {
		return scene{mode: gpu.SharingMPS, embedCap: cp, fast: fine, p99: 0.3, restart: restart, changed: changed}
	}
	tests := []struct {
		name string
		// before is the state the policy saw heldAgo before now (nil:
		// none); now is the state it decides on
		before  *scene
		heldAgo time.Duration
		now     scene
		want    []string
		reason  string
	}{
		{"costly: slack held 11 minutes doubles the share", ptr(slack(&fifth, 5*time.Minute, 11*time.Minute)), 11 * time.Minute,
			slack(&fifth, 5*time.Minute, 11*time.Minute), []string{"GPU-0/mps_active_threads/pid2=40%"}, "worth 660 s of their work over 11m0s against 5m0s of restarts"},
		{"costly: slack seen only now is not worth a restart", nil, 0,
			slack(&fifth, 5*time.Minute, 11*time.Minute), nil, ""},
		{"costly: held long, but the caps changed 3 minutes ago", ptr(slack(&fifth, 5*time.Minute, 3*time.Minute)), 11 * time.Minute,
			slack(&fifth, 5*time.Minute, 3*time.Minute), nil, ""},
		{"costly: a miss beyond chance 5 minutes ago starts the count over", ptr(scene{mode: gpu.SharingMPS, embedCap: &fifth, fast: violating, p99: 2, restart: 5 * time.Minute, changed: 11 * time.Minute}), 5 * time.Minute,
			slack(&fifth, 5*time.Minute, 11*time.Minute), nil, ""},
		{"costly: half the share released whole over 11 minutes", ptr(slack(&half, 5*time.Minute, 11*time.Minute)), 11 * time.Minute,
			slack(&half, 5*time.Minute, 11*time.Minute), []string{"GPU-0/mps_active_threads/pid2=100%"}, "reserved 50% -> 0%"},
		{"cheap restarts: slack gives back one step at once", nil, 0,
			slack(&half, time.Second, 3*time.Minute), []string{"GPU-0/mps_active_threads/pid2=55%"}, "over 2m0s"},
		// restarts that cost more than horizon_max/2 (a trainer that
		// checkpoints every 40 minutes): the horizon reaches twice their
		// cost, else no slack however long would ever give the cap back
		{"restarts past horizon_max/2: slack held 41 minutes doubles the share", ptr(slack(&fifth, 20*time.Minute, time.Hour)), 41 * time.Minute,
			slack(&fifth, 20*time.Minute, time.Hour), []string{"GPU-0/mps_active_threads/pid2=40%"}, "has held for 41m0s: give back 20% of the SMs to batch and best-effort tenants (reserved 80% -> 60%), worth 2400 s of their work over 40m0s against 20m0s of restarts"},
		{"restarts past horizon_max/2, the latency tenant idle: the share doubled after 41 minutes", ptr(idleSlack(&fifth, 20*time.Minute, time.Hour)), 41 * time.Minute,
			idleSlack(&fifth, 20*time.Minute, time.Hour), []string{"GPU-0/mps_active_threads/pid2=40%"}, "worth 2400 s of their work over 40m0s"},
		{"restarts past horizon_max/2: slack held 39 minutes is not worth them yet", ptr(slack(&fifth, 20*time.Minute, time.Hour)), 39 * time.Minute,
			slack(&fifth, 20*time.Minute, time.Hour), nil, ""},
		// slack held past the horizon's bound gives the cap back whatever
		// the gain: before, a doubling at share 0.3 gained a rounding
		// error less than the restarts, and a share above half (released
		// whole, not doubled) never gained as much: neither was given
		// back, however long the slack
		{"restarts past horizon_max/2, share 30%: slack held 3 hours doubles it", ptr(slack(&thirty, 20*time.Minute, 4*time.Hour)), 3 * time.Hour,
			slack(&thirty, 20*time.Minute, 4*time.Hour), []string{"GPU-0/mps_active_threads/pid2=60%"}, "reserved 70% -> 40%"},
		{"restarts past horizon_max/2, share 60%: slack held 3 hours gives it back whole", ptr(slack(&sixty, 20*time.Minute, 4*time.Hour)), 3 * time.Hour,
			slack(&sixty, 20*time.Minute, 4*time.Hour), []string{"GPU-0/mps_active_threads/pid2=100%"}, "the SLOs have held past 40m0s"},
		{"restarts past horizon_max/2, share 60%: slack held 39 minutes is not worth them yet", ptr(slack(&sixty, 20*time.Minute, 4*time.Hour)), 39 * time.Minute,
			slack(&sixty, 20*time.Minute, 4*time.Hour), nil, ""},
		{"costly, share 90%: slack held 31 minutes gives it back whole", ptr(slack(&ninety, 5*time.Minute, time.Hour)), 31 * time.Minute,
			slack(&ninety, 5*time.Minute, time.Hour), []string{"GPU-0/mps_active_threads/pid2=100%"}, "the SLOs have held past 30m0s"},
		{"costly, share 90%: slack held 29 minutes is not worth the restart yet", ptr(slack(&ninety, 5*time.Minute, time.Hour)), 29 * time.Minute,
			slack(&ninety, 5*time.Minute, time.Hour), nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New()
			if tc.before != nil {
				early := tc.before.state()
				early.Now = early.Now.Add(-tc.heldAgo)
				p.Decide(early)
			}
			acts := p.Decide(tc.now.state())
			var got []string
			for _, a := range acts {
				got = append(got, a.Target.String()+"="+a.Want.String())
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("actions %q, want %q", got, tc.want)
			}
			if len(acts) > 0 && (!strings.Contains(acts[0].Reason, tc.reason) || !acts[0].Relax || !acts[0].Restart) {
				t.Errorf("reason %q lacks %q, or not a relaxing restart", acts[0].Reason, tc.reason)
			}
		})
	}
}

func ptr(sc scene) *scene { return &sc }

// idleSlack is embed capped to cp beside chat with no request in its
// windows (idle: slack, and its SLO held).
func idleSlack(cp *float64, restart, changed time.Duration) scene {
	return scene{mode: gpu.SharingMPS, embedCap: cp, fast: tuner.FastSLO{Over: time.Minute}, idle: true, restart: restart, changed: changed}
}

// TestSLOHeld: an SLO holds while its window's quantile is inside the
// target and the fast window misses no more than chance gives.
func TestSLOHeld(t *testing.T) {
	p := New()
	tests := []struct {
		name   string
		window float64 // requests in the SLO window
		p99    float64 // its p99, against a 1 s target
		fast   tuner.FastSLO
		want   bool
	}{
		{"idle", 0, 3, tuner.FastSLO{}, true},
		{"inside the target, no miss", 100, 0.9, tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}, true},
		{"window quantile past the target", 100, 1.1, tuner.FastSLO{Over: time.Minute, Total: 100, Good: 100}, false},
		{"two late of 100 against a p99: chance", 100, 0.9, tuner.FastSLO{Over: time.Minute, Total: 100, Good: 98}, true},
		{"ten late of 100 against a p99: beyond chance", 100, 0.9, tuner.FastSLO{Over: time.Minute, Total: 100, Good: 90}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			slo := &tenant.SLOStatus{Tenant: "chat", Status: latency.Status{SourceUp: true, SourceRead: true, Measured: true, Quantile: 0.99, TargetSeconds: 1, WindowRequests: tc.window,
				Quantiles: map[float64]float64{0.99: tc.p99}}}
			s := &tuner.State{Fast: map[string]tuner.FastSLO{"chat": tc.fast}}
			m := &member{name: "chat", class: gpu.ClassLatency, slo: slo}
			p.signals(s, m)
			if got := p.sloHeld(s, m); got != tc.want {
				t.Errorf("held %v, want %v (burn %.2f, ratio %.2f)", got, tc.want, m.burn, m.ratio)
			}
		})
	}
}

// TestHeldSince: the count starts at the first round that holds and over
// at every round that does not.
func TestHeldSince(t *testing.T) {
	var h heldSince
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	steps := []struct {
		min  int
		held bool
		want int // minute since when it has held (now where it does not)
	}{{0, true, 0}, {5, true, 0}, {6, false, 6}, {7, true, 7}, {20, true, 7}}
	for _, st := range steps {
		if got := h.observe(uuid0, at(st.min), st.held); !got.Equal(at(st.want)) {
			t.Errorf("minute %d: since %v, want minute %d", st.min, got.Sub(t0), st.want)
		}
	}
	var nilH *heldSince
	if got := nilH.observe(uuid0, at(3), true); !got.Equal(at(3)) {
		t.Errorf("nil tracker: since %v, want now", got)
	}
}

// TestCostlyCapOnChance: where a restart costs the capped tenants minutes
// of work, a miss that chance explains with the SLO window inside its
// target caps nobody, unless the pause is driven (its fast loop answers
// first, at no cost).
func TestCostlyCapOnChance(t *testing.T) {
	chance := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 98} // burn 2: one late request over the allowed one
	clear := tuner.FastSLO{Over: time.Minute, Total: 100, Good: 90}  // burn 10
	full := 1.0
	tests := []struct {
		name    string
		fast    tuner.FastSLO
		p99     float64 // against a 1 s target
		restart time.Duration
		pause   bool // the pause knob driven
		want    string
	}{
		{"costly, chance, window inside: no cap", chance, 0.9, 5 * time.Minute, false, ""},
		{"costly, chance, window past the target: halved", chance, 1.2, 5 * time.Minute, false, "50%"},
		{"costly, a clear miss: halved", clear, 0.9, 5 * time.Minute, false, "50%"},
		{"cheap restarts, chance: stepped", chance, 0.9, time.Second, false, "60%"},
		{"costly, chance, the pause driven: halved as before", chance, 0.9, 5 * time.Minute, true, "50%"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := scene{mode: gpu.SharingMPS, embedCap: &full, fast: tc.fast, p99: tc.p99, restart: tc.restart}.state()
			s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: tc.pause}
			p := New()
			d := s.UpDevices()[0]
			got := ""
			if acts := p.mps(s, d, summarize(p.members(s, d)), 0); len(acts) > 0 {
				got = acts[0].Want.String()
			}
			if got != tc.want {
				t.Errorf("cap %q, want %q", got, tc.want)
			}
		})
	}
}
