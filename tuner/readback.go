package tuner

import (
	"context"
	"fmt"
	"math"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// readBack reads back, after a's change took, the value left in force,
// where the host's actuator of its knob reads one back: the power limit
// through gpu.PowerLimitReader (NVML). No backend reads a locked clock
// range back (NVML has no call that returns it): a lock stays as asked,
// and /tuner says "locked, range not read". A value in force other than
// the one asked (the driver holds a power limit within the board's
// constraints; another agent may hold another) becomes a's Want, d's To
// and a note of d's reason, so that the journal, the target and the
// restore's "last set" hold what the GPU has; it is logged once per
// distinct mismatch. A read-back that fails is no failed change: a stays
// as asked and d's reason says "set, not read back".
func (t *Tuner) readBack(ctx context.Context, a Action, d Decision) (Action, Decision) {
	asked, ok := a.Want.(Watts)
	if !ok || a.Knob != gpu.KnobPowerLimit {
		return a, d
	}
	cp, _ := actuator[gpu.ClockPowerActuator](t.o.Actuators)
	r, ok := cp.(gpu.PowerLimitReader)
	if !ok {
		return a, d // (the simulator: its limit is the one asked)
	}
	k := a.Target.String()
	pl, err := r.PowerLimitInForce(ctx, a.GPU)
	if err == nil && (pl.InForceW <= 0 || math.IsNaN(pl.InForceW) || math.IsInf(pl.InForceW, 0)) {
		err = fmt.Errorf("the GPU reports a power limit of %v W", pl.InForceW)
	}
	if err == nil && asked == 0 && pl.DefaultW <= 0 {
		err = fmt.Errorf("the GPU's default power limit is not known (%v W in force)", pl.InForceW)
	}
	if err != nil {
		d.Reason = joinReasons(d.Reason, "set, not read back: "+err.Error())
		t.noteReadBack(k, "unread "+err.Error(), "msg", "tuner set a value it could not read back",
			"gpu", a.GPU, "knob", a.Knob, "asked", asked, "err", err)
		return a, d
	}
	got := Watts(pl.InForceW)
	switch {
	case asked == 0 && sameMilliwatts(pl.InForceW, pl.DefaultW):
		got = 0
	case asked != 0 && sameMilliwatts(pl.InForceW, float64(asked)):
		got = asked
	}
	if got == asked {
		delete(t.readBackLogged, k)
		return a, d
	}
	d.To = got.String()
	d.Reason = joinReasons(d.Reason, fmt.Sprintf("asked %s, the GPU holds %s (read back)", asked, got))
	t.noteReadBack(k, "asked "+asked.String()+" got "+got.String(), "msg", "the GPU holds another value than the tuner set",
		"gpu", a.GPU, "knob", a.Knob, "asked", asked, "got", got,
		"hint", "the driver holds a power limit within the board's constraints; another agent (an operator, a DCGM policy, a vGPU host's administrator) may have set it")
	a.Want = got
	return a, d
}

// sameMilliwatts reports whether two limits in watts are the same whole
// milliwatts, NVML's unit.
func sameMilliwatts(a, b float64) bool { return math.Round(a*1000) == math.Round(b*1000) }

// noteReadBack logs kv at warning level, unless what (a mismatch, or a
// read-back error) is what target k logged last.
func (t *Tuner) noteReadBack(k, what string, kv ...any) {
	if t.readBackLogged == nil {
		t.readBackLogged = map[string]string{}
	}
	if t.readBackLogged[k] == what {
		return
	}
	t.readBackLogged[k] = what
	level.Warn(t.o.Logger).Log(kv...)
}
