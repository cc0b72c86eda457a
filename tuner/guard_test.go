package tuner

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// step is one call of a guard on the manual clock: advance, then admit a
// (and, for learners, record outcome when set).
type step struct {
	advance time.Duration
	a       Action
	ok      bool
	record  Outcome
}

func runGuard(t *testing.T, g Guard, st *State, steps []step) {
	t.Helper()
	clk := gpu.NewManualClock(t0)
	for i, s := range steps {
		clk.Advance(s.advance)
		if iv, ok := g.(Interval); ok && s.advance > 0 {
			iv.Begin(clk.Now())
		}
		ok, why := g.Admit(st, s.a, clk.Now())
		if ok != s.ok {
			t.Errorf("%s step %d (%v at +%v): admitted %v (%s), want %v", g.Name(), i, s.a, clk.Now().Sub(t0), ok, why, s.ok)
		}
		if !ok && why == "" {
			t.Errorf("%s step %d: refused without a reason", g.Name(), i)
		}
		if l, isL := g.(Learner); isL && s.record != "" {
			l.Record(s.a, s.record, nil, clk.Now())
		}
	}
}

func TestGuards(t *testing.T) {
	up, down := mpsAction(7, 0.4, 0.6), mpsAction(7, 0.6, 0.4)
	small := mpsAction(7, 0.4, 0.41)
	other := mpsAction(8, 0.4, 0.6)
	power := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, Current: Watts(700), Want: Watts(490)}
	revert := down
	revert.Revert = true
	st := &State{Snapshot: &tenant.Snapshot{
		Tenants: []tenant.Info{{Name: "embed", ShareMin: 0.1, ShareMax: 0.5}},
		Usage:   []tenant.Usage{{Tenant: "embed", UUID: uuid0, PIDs: []uint32{7}}},
	}}
	hold := &RevertHold{Hold: 5 * time.Minute}
	hold.Block(up.Target, Fraction(0.6), t0)
	clockT := Target{GPU: uuid0, Knob: gpu.KnobLockedClocks}
	hold.Block(clockT, ClockRange{MinMHz: 1782, MaxMHz: 1782}, t0)
	dir := t.TempDir()
	killFile := filepath.Join(dir, "stop")
	kill := &KillSwitch{File: killFile}
	tests := []struct {
		g     Guard
		steps []step
		setup func(i int)
	}{
		{Bounds{}, []step{
			{a: mpsAction(7, 0.4, 0.3), ok: true},
			{a: up, ok: false},                      // 0.6 above share.max 0.5
			{a: mpsAction(7, 0.4, 0.05), ok: false}, // below share.min
			{a: mpsAction(7, 0.4, 0), ok: false},
			{a: Action{Want: ClockRange{MinMHz: 2000, MaxMHz: 1000}}, ok: false},
			{a: power, ok: true},
		}, nil},
		{DeadBand{Min: 0.02}, []step{{a: small, ok: false}, {a: up, ok: true}, {a: Action{Current: Fraction(0.4), Want: Fraction(0.41), Revert: true}, ok: true}}, nil},
		{&Dwell{For: time.Minute}, []step{
			{a: up, ok: true, record: OutcomeApplied},
			{advance: 30 * time.Second, a: down, ok: false},
			{a: other, ok: false}, // same GPU and knob
			{a: power, ok: true},  // another knob
			{a: revert, ok: true},
			{advance: 30 * time.Second, a: down, ok: true},
		}, nil},
		{&Hysteresis{For: 2 * time.Minute}, []step{
			{a: up, ok: true, record: OutcomeApplied},
			{advance: time.Minute, a: mpsAction(7, 0.6, 0.7), ok: true}, // same direction
			{a: down, ok: false},
			{advance: time.Minute, a: down, ok: true},
		}, nil},
		{&Backoff{Base: time.Minute, Max: 3 * time.Minute}, []step{
			{a: up, ok: true, record: OutcomeFailed},
			{advance: 59 * time.Second, a: up, ok: false},
			{a: revert, ok: true}, // a revert passes
			{a: other, ok: true},  // per target
			{advance: time.Second, a: up, ok: true, record: OutcomeRefused},
			{advance: 119 * time.Second, a: up, ok: false},
			{advance: time.Second, a: up, ok: true, record: OutcomeFailed},
			{advance: 179 * time.Second, a: up, ok: false}, // capped at Max
			{advance: time.Second, a: up, ok: true, record: OutcomeApplied},
			{a: up, ok: true},
		}, nil},
		{NewRate(10*time.Second, 2), []step{
			{a: up, ok: true}, {a: up, ok: true}, {a: up, ok: false}, {a: revert, ok: true},
			{advance: 10 * time.Second, a: up, ok: true}, {a: up, ok: false},
		}, nil},
		{&Cap{Max: 2}, []step{
			{advance: time.Second, a: up, ok: true}, {a: other, ok: true}, {a: power, ok: false}, {a: revert, ok: true},
			{advance: time.Second, a: power, ok: true},
		}, nil},
		{hold, []step{
			{a: up, ok: false},
			{a: mpsAction(7, 0.4, 0.8), ok: false}, // beyond the bad value
			{a: mpsAction(7, 0.4, 0.5), ok: true},  // short of it
			{a: down, ok: true},
			// from unlocked the held lock is refused, another lock is not:
			// no direction from "unlocked", so nothing is "beyond" it
			{a: Action{Target: clockT, Current: ClockRange{}, Want: ClockRange{MinMHz: 1782, MaxMHz: 1782}}, ok: false},
			{a: Action{Target: clockT, Current: ClockRange{}, Want: ClockRange{MinMHz: 1980, MaxMHz: 1980}}, ok: true},
			{advance: 5 * time.Minute, a: up, ok: true},
		}, nil},
		{kill, []step{{a: up, ok: true}, {a: up, ok: false}, {a: revert, ok: true}, {a: up, ok: true}}, func(i int) {
			switch i {
			case 1:
				_ = os.WriteFile(killFile, nil, 0o600)
			case 3:
				_ = os.Remove(killFile)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.g.Name(), func(t *testing.T) {
			if tc.setup == nil {
				runGuard(t, tc.g, st, tc.steps)
				return
			}
			for i, s := range tc.steps {
				tc.setup(i)
				runGuard(t, tc.g, st, []step{s})
			}
		})
	}
	kill.Engaged.Store(true)
	if ok, _ := kill.Admit(st, up, t0); ok {
		t.Error("kill switch flag engaged, action admitted")
	}
}

// The chain asks every guard in order, says which refused and whether
// quietly, and teaches every learner; the fast loop's budgets leave
// reverts and rebalancing plans alone.
func TestChain(t *testing.T) {
	now := t0
	plain := Action{Target: Target{GPU: "GPU-a", Knob: gpu.KnobPowerLimit}, Current: Watts(400), Want: Watts(300)}
	plan := Action{Target: Target{GPU: "GPU-a", Knob: gpu.KnobPlacement, PID: 7}, Current: Placement("GPU-a"), Want: Placement("GPU-b"), Plan: &gpu.Plan{}}
	revert := plain
	revert.Revert = true
	if revert.Budgeted() || plan.Budgeted() || !plain.Budgeted() {
		t.Fatalf("Budgeted: plain %v, revert %v, plan %v; want only the plain one", plain.Budgeted(), revert.Budgeted(), plan.Budgeted())
	}
	for _, g := range []Guard{&Cap{Max: 0}, &Rate{L: rate.NewLimiter(0, 0)}} {
		for _, a := range []Action{revert, plan} {
			if ok, why := g.Admit(nil, a, now); !ok {
				t.Errorf("%s refused %v: %s", g.Name(), a, why)
			}
		}
		if ok, _ := g.Admit(nil, plain, now); ok {
			t.Errorf("%s admitted a change over its budget", g.Name())
		}
	}
	back := &Backoff{Base: time.Minute, Max: time.Hour}
	retry := &Retry{After: time.Minute}
	c := Chain{back, retry}
	if ok, _, _, _ := c.Judge(nil, plain, now); !ok {
		t.Fatal("a fresh chain refused")
	}
	c.Record(plain, OutcomeRefused, fmt.Errorf("x: %w", gpu.ErrBusy), now)
	if ok, guard, _, quiet := c.Judge(nil, plain, now.Add(time.Second)); ok || guard != GuardBackoff || quiet {
		t.Errorf("after a refusal: ok %v by %q quiet %v, want the back-off, aloud", ok, guard, quiet)
	}
	if ok, guard, _, quiet := (Chain{retry}).Judge(nil, plain, now.Add(time.Second)); ok || guard != GuardRetry || !quiet {
		t.Errorf("retry: ok %v by %q quiet %v, want a quiet refusal", ok, guard, quiet)
	}
	if ok, _ := retry.Admit(nil, plain, now.Add(time.Minute)); !ok {
		t.Error("retry refused after its wait")
	}
	retry.Record(plain, OutcomeRefused, fmt.Errorf("x: %w", gpu.ErrNotSupported), now)
	if ok, _ := retry.Admit(nil, plain, now.Add(time.Hour)); ok {
		t.Error("retry asked again for a change refused as not supported")
	}
	other := plain
	other.Want = Watts(250)
	if ok, _ := retry.Admit(nil, other, now); !ok {
		t.Error("retry refused another value of the same target")
	}
}

// A kill switch file that cannot be checked (its directory not searchable
// by the exporter's user, an I/O error, a directory made where the file
// is named) is taken as engaged, with why: a switch created where the
// exporter cannot see it stops the tuner rather than nothing. Only a file
// that does not exist releases it.
func TestKillSwitchUncheckableIsEngaged(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "stop")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string // stat's FileInfo, with no error
		err  error
		on   bool
		want string
	}{
		{path: file, on: true, want: "exists"},
		// a directory is always there: no switch one removes to release it
		{path: dir, on: true, want: "cannot be checked, taken as engaged: it is a directory"},
		{err: fs.ErrNotExist},
		{err: &fs.PathError{Op: "stat", Path: "/run/x/stop", Err: syscall.ENOENT}},
		{err: &fs.PathError{Op: "stat", Path: "/run/x/stop", Err: syscall.ENOTDIR}},
		{err: &fs.PathError{Op: "stat", Path: "/run/x/stop", Err: syscall.EACCES}, on: true, want: "permission denied"},
		{err: &fs.PathError{Op: "stat", Path: "/run/x/stop", Err: syscall.EIO}, on: true, want: "input/output error"},
	} {
		k := &KillSwitch{File: "/run/x/stop", stat: func(string) (fs.FileInfo, error) {
			if c.err != nil {
				return nil, c.err
			}
			return os.Stat(c.path)
		}}
		ok, why := k.Admit(nil, Action{}, t0)
		if k.On() != c.on || ok == c.on || !strings.Contains(why, c.want) {
			t.Errorf("stat of %q, error %v: on %v, admitted %v (%s); want on %v, %q", c.path, c.err, k.On(), ok, why, c.on, c.want)
		}
	}
}

// The hysteresis and the back-off say how long is left of their wait, and
// the hysteresis its whole length: "until 39s" read as a deadline, and
// "wait 2m0s" as a wait still to come in full, where 30 s were left.
func TestGuardWaitsLeft(t *testing.T) {
	up, down := mpsAction(7, 0.4, 0.6), mpsAction(7, 0.6, 0.4)
	h := &Hysteresis{For: 2 * time.Minute}
	h.Record(up, OutcomeApplied, nil, t0)
	if ok, why := h.Admit(&State{}, down, t0.Add(90*time.Second)); ok || why != "reverses the change of 1m30s ago, within the hysteresis of 2m0s (30s left)" {
		t.Errorf("hysteresis: admitted %v (%q)", ok, why)
	}
	b := &Backoff{Base: time.Minute, Max: time.Hour}
	b.Record(up, OutcomeFailed, nil, t0)
	if ok, why := b.Admit(&State{}, up, t0.Add(21*time.Second)); ok || why != "backing off after a refusal or failure: 39s left" {
		t.Errorf("backoff: admitted %v (%q)", ok, why)
	}
}
