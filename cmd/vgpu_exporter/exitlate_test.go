package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// The shutdown waits, up to lateAfterRestore, for what the tuner's exit
// left running past --tuner.restore-timeout (here an actuator's close),
// so that its end is logged before the process exits and the backend
// closes after it; a wait cut short names what still runs. The exit
// status stays the restore's (its error). (The backend closed and the
// process exited as soon as the restore returned: the line saying
// whether the tenant was thawed never came.)
func TestShutdownWaitsForTheTunersLateWork(t *testing.T) {
	defer func(d time.Duration) { lateAfterRestore = d }(lateAfterRestore)
	lateAfterRestore = 2 * time.Second
	for _, tc := range []struct {
		name  string
		close time.Duration // how long the actuator's close takes, past the restore's 1s (the shortest --tuner.restore-timeout)
		want  []string      // in the log once serve has returned
		bad   string        // not in it
	}{
		{"ends within the wait", 1700 * time.Millisecond, []string{"closed after the deadline", "what the tuner's exit left running has ended"}, "has not ended in time"},
		{"outlasts the wait", time.Minute, []string{`level=error msg="shutting down: what the tuner's exit left running has not ended in time`, `timeout=2s running="closing actuator 1 (main.closerFunc)"`}, "closed after the deadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, svc, logs, src := simTunerService(t, "--tuner.restore-timeout=1s")
			closeEnded := make(chan struct{})
			stop := make(chan struct{})
			defer close(stop)
			svc.tuner.CloseAtExit(closerFunc(func() error {
				defer close(closeEnded)
				select {
				case <-time.After(tc.close):
				case <-stop:
				}
				return nil
			}))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- svc.serve(ctx, cfg, newCollector, make(chan os.Signal)) }()
			waitUntil(t, "the first snapshot", func() bool { return svc.Published() != nil })
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "not closed within --tuner.restore-timeout: actuator 1 (main.closerFunc)") {
					t.Errorf("serve: %v, want the restore's error (a non-zero exit)", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("serve did not return")
			}
			if took := time.Since(start); took > time.Second+lateAfterRestore+closeAfterRestore+time.Second {
				t.Errorf("shutdown took %v, want it bounded", took)
			}
			l := logs.String()
			for _, w := range tc.want {
				if !strings.Contains(l, w) {
					t.Errorf("log once serve returned:\n%s\nwant %q", l, w)
				}
			}
			if strings.Contains(l, tc.bad) {
				t.Errorf("log once serve returned:\n%s\nwant no %q", l, tc.bad)
			}
			select {
			case <-src.closed:
			default:
				t.Error("serve returned with the backend not closed")
			}
			if ended := isDone(closeEnded); ended != (tc.close < lateAfterRestore) {
				t.Errorf("the actuator's close ended before serve returned: %v, want %v", ended, tc.close < lateAfterRestore)
			}
		})
	}
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A tuner in recommend, which changed nothing, exits cleanly (no "NOT
// restored", no error) at every --tuner.restore-timeout the flags take:
// one too short for the restore to begin is refused at start. (At 1ns,
// accepted then, the deadline was spent before the restore began, and the
// exit logged "original settings NOT restored" and failed.)
func TestRecommendExitAtShortestRestoreTimeout(t *testing.T) {
	for _, d := range []time.Duration{time.Nanosecond, minRestoreTimeout} {
		t.Run(d.String(), func(t *testing.T) {
			arg := "--tuner.restore-timeout=" + d.String()
			if _, err := parseArgs(t, "--tuner.mode=recommend", arg); err != nil {
				if !strings.Contains(err.Error(), "--tuner.restore-timeout") {
					t.Fatalf("%s: %v, want it refused or taken", arg, err)
				}
				return // refused at start
			}
			cfg, svc, logs, _ := simTunerService(t, arg)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- svc.serve(ctx, cfg, newCollector, make(chan os.Signal)) }()
			waitUntil(t, "the first snapshot", func() bool { return svc.Published() != nil })
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v, want a clean exit", err)
			}
			if l := logs.String(); strings.Contains(l, "NOT restored") || strings.Contains(l, "level=error") {
				t.Errorf("log:\n%s\nwant no error, no \"NOT restored\"", l)
			}
		})
	}
}
