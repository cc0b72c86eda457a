package tuner

import (
	"fmt"
	"sync"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/internal/overdue"
)

// RoundStallAfter is how long a round runs before the tuner logs that it
// has not ended, naming the actuator call it waits on. A call that hangs (a
// driver call, the MPS control daemon, nvidia-smi up to its timeout, a
// freezer write on a stuck file system) holds the round, and every other
// line is written once a call returns: without this one nothing names it.
const RoundStallAfter = 2 * time.Minute

// callNote is the actuator call the tuner has under way, if any.
type callNote struct {
	mu    sync.Mutex
	what  string
	since time.Time
}

func (c *callNote) set(what string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.what, c.since = what, at
}

func (c *callNote) get() (string, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.what, c.since
}

// calling notes what as the call under way from now; the function it
// returns ends the note.
func (t *Tuner) calling(what string) func() {
	t.call.set(what, t.o.Clock.Now())
	return func() { t.call.set("", time.Time{}) }
}

// callText says what applying a does: its knob, GPU, value and tenant.
func callText(a Action) string {
	s := fmt.Sprintf("set %s of GPU %s to %s", a.Knob, a.GPU, valueText(a.Want))
	if a.Tenant != "" {
		s += " (tenant " + a.Tenant + ")"
	}
	return s
}

// watchRound starts the watch of a round: once it has run stallAfter (wall
// time: how long the round really runs) it is logged with the call under
// way. The function it returns ends the watch, and logs the end of a round
// logged as stalled.
func (t *Tuner) watchRound() func() {
	start := time.Now()
	end := overdue.Watch(t.stallAfter, func() {
		kv := []any{"msg", "tuner round has not ended: it waits on a call that has not returned, and decides, reverts and thaws nothing until it does", "running_for", t.stallAfter}
		if what, since := t.call.get(); what != "" {
			kv = append(kv, "call", what, "call_started", since.UTC().Format(time.RFC3339))
		} else {
			kv = append(kv, "call", "none of an actuator's (a restart hook of a restore, the MPS control daemon, a read)")
		}
		level.Error(t.o.Logger).Log(kv...)
	})
	return func() {
		if end() {
			level.Warn(t.o.Logger).Log("msg", "tuner round ended after stalling", "took", time.Since(start).Round(time.Millisecond))
		}
	}
}
