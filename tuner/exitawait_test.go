package tuner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// What the exit leaves running past its deadline is named (Late) and
// waited for (AwaitLate) until it ends, its end logged by then: a close
// still blocked, a restore stuck, a round stuck at exit with a hook that
// does not end and the node lock kept for them. A wait cut short names
// what still runs. (Nothing told the shutdown it ran: the process exited
// at once, and the lines saying whether a tenant was thawed never came.)
func TestAwaitLateWaitsForWhatTheExitLeft(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup returns the runner, logging into logs, and end, which
		// lets what the exit leaves running end
		setup func(t *testing.T, logs *lockedBuffer) (rn *Runner, end func())
		late  []string // in Late, by prefix
		ended []string // in the log once AwaitLate has returned
	}{
		{"blocked close", func(t *testing.T, logs *lockedBuffer) (*Runner, func()) {
			rn := exitRunnerEnded(t, 300*time.Millisecond)
			rn.logger = log.NewLogfmtLogger(logs)
			release := make(chan struct{})
			rn.CloseAtExit(closeFunc(func() error { <-release; return nil }))
			return rn, func() { close(release) }
		}, []string{"closing actuator 1 (tuner.closeFunc)"}, []string{"closed after the deadline"}},
		{"stuck restore", func(t *testing.T, logs *lockedBuffer) (*Runner, func()) {
			rn, host, _ := stuckRestoreRunner(t)
			rn.logger = log.NewLogfmtLogger(logs)
			close(host.armed)
			return rn, func() { close(host.release) }
		}, []string{"the restore at exit, stuck past its deadline"}, []string{"ended after it: the original settings are set back", "ended after it: the actuators and the journal closed"}},
		{"stuck round, deaf hook, node lock", func(t *testing.T, logs *lockedBuffer) (*Runner, func()) {
			r := newHookRun(t)
			r.tu.bind(ActuatorsOf(deafHost{r.host}))
			r.round(t, capBatch)
			r.host.waitStarted(t)
			rn := NewRunner(r.tu, r.j, r.clk, time.Minute, func() *tenant.Snapshot { return r.snapOf() }, log.NewLogfmtLogger(logs))
			rn.SetRestoreTimeout(200 * time.Millisecond)
			rn.ReleaseAtExit(&pathLock{path: "/run/vgpu-exporter/tuner.lock", release: func() error { return nil }})
			lateExitWay(t)
			// (Run never runs: its round never ends, as a stuck one)
			return rn, func() { close(rn.done); r.host.release <- nil }
		}, []string{"the hook on GPU-0/mps_active_threads/pid8", "the tuner's round stuck at exit", "releasing the node lock /run/vgpu-exporter/tuner.lock"},
			[]string{"the round stuck at exit has ended", "the node lock is released"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuffer
			rn, end := tc.setup(t, &logs)
			if err := rn.RestoreAtExit(); err == nil {
				t.Fatal("RestoreAtExit: no error, want what was left named")
			}
			short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			for _, got := range [][]string{rn.Late(), rn.AwaitLate(short)} {
				if !hasPrefixes(got, tc.late) {
					t.Errorf("still running %q, want each of %q", got, tc.late)
				}
			}
			end()
			long, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if left := rn.AwaitLate(long); len(left) != 0 {
				t.Fatalf("AwaitLate: %q still running after the end", left)
			}
			for _, w := range tc.ended {
				if l := logs.String(); !strings.Contains(l, w) {
					t.Errorf("log once AwaitLate returned:\n%s\nwant %q", l, w)
				}
			}
			if got := rn.Late(); len(got) != 0 {
				t.Errorf("Late after the end: %q, want none", got)
			}
		})
	}
}

// hasPrefixes reports whether each of want begins one of got.
func hasPrefixes(got, want []string) bool {
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, w)
		}
		if !found {
			return false
		}
	}
	return true
}

// lateExitWay makes RestoreAtExit choose its way (restore, or the round
// stuck) only past its deadline, as on a loaded host, until t ends: a
// stuck round is named as such all the same, not taken for a stuck
// restore.
func lateExitWay(t *testing.T) {
	beforeExitWay = func(all context.Context) { <-all.Done() }
	t.Cleanup(func() { beforeExitWay = func(context.Context) {} })
}
