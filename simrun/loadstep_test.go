package simrun_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// loadStep is the load-step scenario: one H100 (MPS), chat at 2 requests/s
// held to p99 <= 10 s beside an embedding job; chat's traffic doubles at
// 4 minutes.
const (
	loadStep       = "../cmd/vgpusim/testdata/load-step.yaml"
	loadStepAt     = 4 * time.Minute
	loadStepTenant = "chat"
)

// judgement is the SLO judged at T seconds over the requests that ended in
// the goodput window before it, as the run report judges a window
// (report.WindowHeld), less the requests overdue at the window's end (the
// steps do not carry them).
type judgement struct {
	T          float64
	Good, Ends int
	Held       bool
}

// judgements judges tenant's SLO at every multiple of every from window
// on (the first full window) to the end of the run, over the steps that
// ended in (T-window, T]: good requests over completed plus dropped ones
// against the SLO's quantile.
func judgements(t *testing.T, r *report.Recorder, tenant string, every, window time.Duration) []judgement {
	t.Helper()
	steps := r.Steps()
	if len(steps) == 0 {
		t.Fatal("no steps recorded")
	}
	end := steps[len(steps)-1].T
	var out []judgement
	for at := window.Seconds(); at <= end+1e-9; at += every.Seconds() {
		j := judgement{T: at}
		q := math.NaN()
		for _, st := range steps {
			if st.T <= at-window.Seconds()+1e-9 || st.T > at+1e-9 {
				continue
			}
			for _, ts := range st.Tenants {
				if ts.Tenant == tenant {
					j.Good += ts.Good
					j.Ends += ts.Completed + ts.Dropped
					q = ts.SLOQuantile
				}
			}
		}
		if !(q > 0 && q <= 1) {
			t.Fatalf("%s at %.0f s: SLO quantile %v", tenant, at, q)
		}
		j.Held = report.WindowHeld(j.Good, j.Ends, q)
		out = append(out, j)
	}
	return out
}

// excursion is a stretch of judgements after the step in which the SLO did
// not hold: it left From intervals after the step and was back inside
// after Intervals judgements outside (-1: not back by the end of the run).
type excursion struct {
	From, Intervals int
	Worst           float64 // the lowest good / ended in it
}

func (e excursion) String() string {
	back := fmt.Sprintf("back after %d", e.Intervals)
	if e.Intervals < 0 {
		back = "not back by the end"
	}
	return fmt.Sprintf("out %d intervals after 4m, %s (worst %.2f%%)", e.From, back, 100*e.Worst)
}

// excursions are the stretches outside the SLO among the judgements after
// at, counted in intervals of every from at: the first judgement outside
// opens one, the next one inside closes it.
func excursions(js []judgement, at, every time.Duration) []excursion {
	var out []excursion
	open := false
	for _, j := range js {
		k := int(math.Round((j.T - at.Seconds()) / every.Seconds()))
		switch {
		case k < 1:
		case j.Held && open:
			out[len(out)-1].Intervals = k - out[len(out)-1].From
			open = false
		case !j.Held:
			frac := float64(j.Good) / float64(j.Ends)
			if !open {
				out = append(out, excursion{From: k, Intervals: -1, Worst: frac})
				open = true
			}
			out[len(out)-1].Worst = min(out[len(out)-1].Worst, frac)
		}
	}
	return out
}

// loadStepRun runs seed of scenario under policy and judges chat every
// control interval: its excursions after the step, and how many
// judgements there were before it and how many of them were outside.
func loadStepRun(t *testing.T, scenario, policy string, seed int64) (ex []excursion, before, outBefore int) {
	t.Helper()
	res, _, _, err := simrun.RunSeed(context.Background(), simrun.Config{Scenario: scenario, Policy: policy, Step: time.Second}, seed)
	if err != nil {
		t.Fatal(err)
	}
	every := tuner.DefaultInterval
	js := judgements(t, res.Recorder, loadStepTenant, every, report.GoodputWindow)
	after := 0
	for _, j := range js {
		if j.Ends == 0 {
			t.Errorf("%s seed %d: no chat request ended in the minute before %.0f s", policy, seed, j.T)
		}
		switch {
		case j.T > loadStepAt.Seconds():
			after++
		case !j.Held:
			before++
			outBefore++
		default:
			before++
		}
	}
	if want := int((res.Recorder.Meta().Duration - loadStepAt) / every); after != want {
		t.Fatalf("%s seed %d: %d judgements after the step, want %d", policy, seed, after, want)
	}
	return excursions(js, loadStepAt, every), before, outBefore
}

// noStep writes a copy of the load-step scenario without its events (chat
// at 2 requests/s throughout) and its tenants file into a temporary
// directory.
func noStep(t *testing.T) string {
	t.Helper()
	return scenarioCopy(t, loadStep, func(sc string) string {
		i := strings.Index(sc, "\nevents:")
		if i < 0 {
			t.Fatalf("%s has no events", loadStep)
		}
		return sc[:i+1]
	})
}

// scenarioCopy writes edit's rewrite of the scenario at path, and its
// tenants file unchanged, into a temporary directory and returns the
// copy's path.
func scenarioCopy(t *testing.T, path string, edit func(string) string) string {
	t.Helper()
	sc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	companion := simrun.Companion(path)
	tenants, err := os.ReadFile(companion)
	if err != nil {
		t.Fatalf("tenants file of %s: %v", path, err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, filepath.Base(path))
	for name, body := range map[string][]byte{out: []byte(edit(string(sc))), filepath.Join(dir, filepath.Base(companion)): tenants} {
		if err := os.WriteFile(name, body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// outside is how many judgements the excursions spent outside the SLO,
// counting one not back by the end to the end of the run.
func outside(ex []excursion, judged int) int {
	n := 0
	for _, e := range ex {
		if e.Intervals < 0 {
			n += judged - e.From + 1
			continue
		}
		n += e.Intervals
	}
	return n
}

// TestLoadStepRecovery measures the target "back inside the SLO within 3
// intervals after a 2x load step" (docs/tuning.md) on the load-step
// scenario, seeds 1-5: chat's SLO judged every control interval (15 s) on
// the last minute of its requests, as the run report judges a goodput
// window, from one interval after the step to the end, under autotune
// (its defaults: the pause off) and static-equal, and under autotune with
// no step as the control.
//
// The target is not met on the current simulator (seed 4: outside for 7
// intervals from 6 after the step; docs/tuning.md, "Load step"), so the
// test logs the figures and asserts what holds: every judgement has
// requests, and on each seed autotune spends no more intervals outside
// the SLO after the step than static-equal.
func TestLoadStepRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("fifteen 10-minute runs")
	}
	judged := int((10*time.Minute - loadStepAt) / tuner.DefaultInterval)
	control := noStep(t)
	met := 0
	for seed := int64(1); seed <= 5; seed++ {
		out := map[string]int{}
		for _, run := range []struct{ name, scenario, policy string }{
			{"autotune", loadStep, "autotune"},
			{"static-equal", loadStep, "static-equal"},
			{"autotune, no step", control, "autotune"},
		} {
			ex, before, outBefore := loadStepRun(t, run.scenario, run.policy, seed)
			out[run.name] = outside(ex, judged)
			var lines []string
			for _, e := range ex {
				lines = append(lines, e.String())
			}
			if len(lines) == 0 {
				lines = []string{"never outside"}
			}
			t.Logf("seed %d, %s: outside %d of the %d judgements before 4m; after it: %s", seed, run.name, outBefore, before, strings.Join(lines, "; "))
			if run.name != "autotune" {
				continue
			}
			ok := true
			for _, e := range ex {
				ok = ok && e.Intervals >= 0 && e.Intervals <= 3
			}
			if ok {
				met++
			}
		}
		if out["autotune"] > out["static-equal"] {
			t.Errorf("seed %d: autotune outside the SLO for %d intervals after the step, static-equal for %d", seed, out["autotune"], out["static-equal"])
		}
	}
	t.Logf("back inside within 3 intervals of every excursion after the step under autotune on %d of 5 seeds", met)
}

// TestLoadStepExcursions: the judgements after the step group into
// excursions that open at the first judgement outside and close at the
// next one inside, one not closed by the end counting to the end.
func TestLoadStepExcursions(t *testing.T) {
	every := tuner.DefaultInterval
	at := 4 * every
	// held gives the judgements at every interval from 1: 'o' outside
	// (98 of 100 good), '.' inside.
	held := func(s string) []judgement {
		var js []judgement
		for i, c := range s {
			good := 98
			if c == '.' {
				good = 100
			}
			js = append(js, judgement{T: float64(i+1) * every.Seconds(), Good: good, Ends: 100, Held: c == '.'})
		}
		return js
	}
	for _, tc := range []struct {
		name, judged string
		want         []excursion
		outside      int
	}{
		{"inside throughout", "........", nil, 0},
		{"outside before the step only", "ooo.....", nil, 0},
		{"open at the step", "...oo.o.", []excursion{{From: 1, Intervals: 1, Worst: 0.98}, {From: 3, Intervals: 1, Worst: 0.98}}, 2},
		{"to the end", "oooo..oo", []excursion{{From: 3, Intervals: -1, Worst: 0.98}}, 2},
		{"long", "....ooo.", []excursion{{From: 1, Intervals: 3, Worst: 0.98}}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := held(tc.judged)
			got := excursions(js, at, every)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("excursions %v, want %v", got, tc.want)
			}
			if n := outside(got, len(js)-4); n != tc.outside {
				t.Errorf("outside %d intervals, want %d", n, tc.outside)
			}
		})
	}
}
