package autotune

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The trail: the requests since a point back far enough for a minimum
// count, never before the earliest; a counter that goes down, or another
// tracker's (a reload restarted it: another epoch), starts over; the rise of the last window's rate over the span before it.
func TestRequestTrail(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	// chat: 2 requests a second, 1 bad in 10, for a minute; then 6 a second
	steady := []tuner.RequestCount{{Total: 0}, {Total: 30, Good: 27}, {Total: 60, Good: 54}, {Total: 90, Good: 81}, {Total: 120, Good: 108}}
	tests := []struct {
		name      string
		counts    []tuner.RequestCount // one a round, 15 s apart
		from      int                  // s: since the newest point at or before
		earliest  int                  // s
		min       float64
		want      tuner.RequestCount
		wantOK    bool
		wantRatio float64 // the last window's rise (0: none to tell)
	}{
		{"the last interval", steady, 45, 0, 20, tuner.RequestCount{Total: 30, Good: 27}, true, 1},
		{"back to the minimum count", steady, 45, 0, 50, tuner.RequestCount{Total: 60, Good: 54}, true, 1},
		{"never before the earliest", steady, 45, 30, 70, tuner.RequestCount{}, false, 1},
		{"a load step: three times the rate", append(slices.Clone(steady[:4]), tuner.RequestCount{Total: 180, Good: 171}), 45, 0, 20, tuner.RequestCount{Total: 90, Good: 90}, true, 3},
		{"a counter reset starts over", []tuner.RequestCount{{Total: 500, Good: 500}, {Total: 530, Good: 530}, {Total: 10, Good: 10}, {Total: 40, Good: 40}, {Total: 70, Good: 60}}, 45, 0, 20, tuner.RequestCount{Total: 30, Good: 20}, true, 0},
		{"one tracker's counters: back to the minimum count", epochs(steady, 1, 1), 45, 0, 70, tuner.RequestCount{Total: 90, Good: 81}, true, 1},
		{"another tracker's from 30 s (a reload), counting on above the old: starts over", epochs(steady, 1, 2), 45, 0, 70, tuner.RequestCount{}, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &requestTrail{}
			for i, c := range tc.counts {
				tr.observe(at(15*i), map[string]tuner.RequestCount{"chat": c})
				tr.observe(at(15*i), map[string]tuner.RequestCount{"chat": {Total: 1e9}}) // a second call in the round: ignored
			}
			got, _, ok := tr.since("chat", at(tc.from), at(tc.earliest), tc.min)
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("since: %+v %v, want %+v %v", got, ok, tc.want, tc.wantOK)
			}
			r, ok := tr.rise("chat", at(60), 15*time.Second)
			if ok != (tc.wantRatio > 0) || math.Abs(r.ratio-tc.wantRatio) > 1e-9 {
				t.Errorf("rise: %+v %v, want ratio %v", r, ok, tc.wantRatio)
			}
		})
	}
}

// epochs is counts with the first two of epoch a, the rest of epoch b.
func epochs(counts []tuner.RequestCount, a, b uint64) []tuner.RequestCount {
	out := slices.Clone(counts)
	for i := range out {
		out[i].Epoch = a
		if i >= 2 {
			out[i].Epoch = b
		}
	}
	return out
}

// The fast loop over rounds: it judges the last interval's requests, so a
// clear miss pauses within one interval though the minute's burn is under
// ViolateBurn; a load rise with no slack pauses ahead of the late requests
// (a Poisson wobble or a rise with slack does not); the rise's guess holds
// a floor only while the load stays up, goes no higher than a miss on the
// GPU has needed (and lowers no pause already above that), and is given
// back by PauseAheadRelease a round.
func TestPauseRecentWindow(t *testing.T) {
	pauseT := tuner.Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 2}
	type round struct {
		total, bad float64 // chat's requests (bad: over target) in the 15 s before it
	}
	steady := []round{{30, 0}, {30, 0}, {30, 0}, {30, 0}}
	busy := []round{{60, 0}, {60, 0}, {60, 0}, {60, 0}}
	tests := []struct {
		name   string
		rounds []round // the last is judged
		fast   float64 // the minute's burn
		p99    float64 // the SLO window's p99 against a 1 s target
		duty   tuner.Duty
		ahead  bool       // the pause in place was raised ahead of a rise 30 s ago, from 2 requests a second
		need   tuner.Duty // a miss raised the pause to it 6 minutes ago (its floor faded), given back 5 minutes ago, before duty's raise (0: none)
		want   []string
		reason string
	}{
		{"a clear miss over the last interval, the minute's burn under 1: paused", append(steady, round{30, 6}), 0.8, 0.9, 0, false, 0,
			[]string{"GPU-0/pause_duty/pid2=30%"}, "20.0x over its requests of the last 15s"},
		{"two late of 30 against 0.3 allowed, the minute's burn under 1: a wobble, held", append(steady, round{30, 2}), 0.8, 0.9, 0, false, 0, nil, ""},
		{"the same two late, the minute's burn 1.5 within chance, the SLO window inside its target: held", append(steady, round{30, 2}), 1.5, 0.9, 0, false, 0, nil, ""},
		{"the same two late, the minute's burn 1.5, the SLO window over its target: paused", append(steady, round{30, 2}), 1.5, 1.2, 0, false, 0,
			[]string{"GPU-0/pause_duty/pid2=30%"}, "6.7x"},
		{"the same two late, the minute's burn 4 beyond chance: paused", append(steady, round{30, 2}), 4, 0.9, 0, false, 0,
			[]string{"GPU-0/pause_duty/pid2=30%"}, "6.7x"},
		{"a small miss over the last interval, the minute's burn under 1: held", append(busy, round{60, 1}), 0.8, 0.9, 0, false, 0, nil, ""},
		{"twice the requests, no slack: paused ahead", append(steady, round{60, 0}), 0, 0.9, 0, false, 0,
			[]string{"GPU-0/pause_duty/pid2=80%"}, "2.0x as fast"},
		{"twice the requests with slack: nothing", append(steady, round{60, 0}), 0, 0.5, 0, false, 0, nil, ""},
		{"a wobble (1.3x): nothing", append(steady, round{39, 0}), 0, 0.9, 0, false, 0, nil, ""},
		{"the rise stays: its pause held", append(steady, round{60, 0}, round{60, 0}, round{60, 0}), 0, 0.9, 0.8, true, 0, nil, ""},
		{"the rise is gone: its pause given back", append(steady, round{60, 0}, round{30, 0}, round{30, 0}), 0, 0.9, 0.8, true, 0,
			[]string{"GPU-0/pause_duty/pid2=70%"}, "slack"},
		{"raised on a miss, slack since: given back by PauseRelease", append(steady, round{30, 6}, round{30, 0}, round{30, 0}), 0, 0.9, 0.8, false, 0,
			[]string{"GPU-0/pause_duty/pid2=75%"}, "slack"},
		{"twice the requests, no slack, a miss needed 40%: paused ahead to 40%", append(steady, round{60, 0}), 0, 0.9, 0, false, 0.4,
			[]string{"GPU-0/pause_duty/pid2=40%"}, "2.0x as fast"},
		{"twice the requests, no slack, paused 80% ahead of an earlier rise, a miss needed 40%: held, not lowered to 40%", append(steady, round{60, 0}), 0, 0.9, 0.8, true, 0.4,
			nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New()
			var acts []tuner.Action
			var total, good float64
			n := len(tc.rounds)
			for i, r := range tc.rounds {
				total, good = total+r.total, good+r.total-r.bad
				fast := tuner.FastSLO{Over: time.Minute, Total: 120, Good: 120 - tc.fast*1.2}
				s := scene{mode: gpu.SharingMPS, embedCap: new(1.0), fast: fast, p99: tc.p99}.state()
				s.Now = s.Now.Add(time.Duration(i-n+1) * 15 * time.Second)
				s.Drives = map[gpu.Knob]bool{gpu.KnobPauseDuty: true, gpu.KnobMPSActiveThreads: true}
				s.Snapshot.SLOs[0].RequestsTotal, s.Snapshot.SLOs[0].GoodRequestsTotal = total, good
				if tc.duty > 0 && i == n-1 {
					// raised 30 s before the round judged
					c := tuner.Change{At: s.Now.Add(-30 * time.Second), From: tuner.Duty(0), To: tc.duty}
					s.Originals[pauseT.String()] = tuner.Duty(0)
					s.Changes[pauseT.String()], s.Changes[pauseT.DomainKey()] = c, c
					s.History = map[string][]tuner.Change{pauseT.DomainKey(): {c}}
					if tc.ahead {
						p.trail.pausedAhead(uuid0, aheadRaise{at: c.At, tenant: "chat", before: 2})
					}
				}
				if tc.need > 0 && i == n-1 {
					raise := tuner.Change{At: s.Now.Add(-6 * time.Minute), From: tuner.Duty(0), To: tc.need}
					back := tuner.Change{At: s.Now.Add(-5 * time.Minute), From: tc.need, To: tuner.Duty(0)}
					s.Originals[pauseT.String()] = tuner.Duty(0)
					h := []tuner.Change{raise, back}
					if last := s.History[pauseT.DomainKey()]; len(last) > 0 {
						h = append(h, last...) // the raise of tc.duty, 30 s ago
					} else {
						s.Changes[pauseT.String()], s.Changes[pauseT.DomainKey()] = back, back
					}
					s.History = map[string][]tuner.Change{pauseT.DomainKey(): h}
				}
				acts = p.Decide(s)
			}
			var got []string
			for _, a := range acts {
				if a.Knob == gpu.KnobPauseDuty {
					got = append(got, a.Target.String()+"="+a.Want.String())
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("pause actions %v, want %v", got, tc.want)
			}
			if tc.reason != "" && !strings.Contains(acts[0].Reason, tc.reason) {
				t.Errorf("reason %q, want %q in it", acts[0].Reason, tc.reason)
			}
		})
	}
}
