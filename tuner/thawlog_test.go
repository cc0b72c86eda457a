package tuner

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A round's thaw that fails is logged with when it is tried again, as it
// is: a pause an earlier run left, whose thaw failed at start, at every
// round; one the kill switch thaws, at every round while the switch is
// engaged; both at exit. The round after each failure tries it again.
// (Before, the kill switch's said "at exit, and at the next start".)
func TestFailedThawLogSaysWhenItIsTriedAgain(t *testing.T) {
	thaw := "SetPauseDuty(GPU-0,train,[7 8],0)"
	for _, tc := range []struct {
		name   string
		left   bool // a pause an earlier run left, not one the policy set
		reason string
		next   string
	}{
		{"a pause an earlier run left", true, `reason="` + whyThawAgain, `next="at the next round, and at exit"`},
		{"the kill switch engaged", false, `reason="thawed: kill switch engaged"`, `next="at the next round while its reason holds, and at exit"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			rec := &refusingThaws{}
			clk := gpu.NewManualClock(t0)
			kill := &KillSwitch{}
			opts := Options{Policy: pauseOnce(), Guards: []Guard{kill, Bounds{}}, Enabled: pauseOn, Actuators: ActuatorsOf(rec), Clock: clk, Mode: ModeEnforce,
				Logger: log.NewLogfmtLogger(log.NewSyncWriter(&buf))}
			if tc.left {
				opts.Policy = fixed(nil)
				opts.Journal = crashedJournal(t, Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 7}, Tenant: "train", From: encodeValue(Duty(0)), PIDs: []uint32{7, 8}})
			}
			tu, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			round := func() {
				clk.Advance(15 * time.Second)
				if _, err := tu.RunOnce(context.Background(), trainSnap(clk.Now(), gpu.ClassBatch, 7, 8)); err != nil {
					t.Fatal(err)
				}
			}
			rec.refuse = true
			if tc.left {
				if _, err := tu.Recover(context.Background(), trainSnap(t0, gpu.ClassBatch, 7, 8)); err == nil {
					t.Fatal("the start's thaw: no error, want it failed")
				}
				round() // the first round's thaw (of the pauses the journal names) fails too
			} else {
				rec.refuse = false
				round() // train paused at 0.5
				rec.refuse = true
				kill.Engaged.Store(true)
			}
			buf.Reset()
			rec.Calls = nil
			round()
			round()
			if n := strings.Count(strings.Join(rec.Calls, " "), thaw); n != 2 {
				t.Errorf("thaws %q over two rounds, want one each", rec.Calls)
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			failed := 0
			for _, l := range lines {
				if !strings.Contains(l, "tuner could not thaw a paused tenant") {
					continue
				}
				failed++
				if !strings.Contains(l, tc.reason) || !strings.Contains(l, tc.next) {
					t.Errorf("log line %s, want %s and %s", l, tc.reason, tc.next)
				}
			}
			if failed != 2 {
				t.Errorf("%d failed thaws logged, want 2; log:\n%s", failed, buf.String())
			}
		})
	}
}
