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
// and /tuner says "locked, range not read". The power limit compared is
// the limit set (NVML's management limit, what a set changes), else the
// limit enforced: a set the limit set holds while another limiter (a
// BMC's cap, a DCGM policy, a thermal or board limit) enforces less is
// held as asked, and d's reason names the limit enforced. A value other
// than the one asked (the driver holds a power limit within the board's
// constraints; another agent may hold another) becomes a's Want, d's To
// and a note of d's reason, so that the journal, the target and the
// restore's "last set" hold what the GPU has; it is logged once per
// distinct mismatch. A read-back that fails is no failed change: a stays
// as asked and d's reason says "set, not read back".
//
// It says whether a's Want is known in force then: not where the
// read-back failed.
func (t *Tuner) readBackKnown(ctx context.Context, a Action, d Decision) (Action, Decision, bool) {
	asked, ok := a.Want.(Watts)
	if !ok || a.Knob != gpu.KnobPowerLimit {
		return a, d, true
	}
	r, ok := t.powerReader()
	if !ok {
		return a, d, true // (the simulator: its limit is the one asked)
	}
	k := a.Target.String()
	pl, err := r.PowerLimitInForce(ctx, a.GPU)
	held := pl.SetW
	if !validWatts(held) {
		held = pl.InForceW
	}
	if err == nil && !validWatts(held) {
		err = fmt.Errorf("the GPU reports a power limit of %v W", held)
	}
	if err == nil && asked == 0 && pl.DefaultW <= 0 {
		err = fmt.Errorf("the GPU's default power limit is not known (%v W in force)", held)
	}
	if err != nil {
		d.Reason = joinReasons(d.Reason, "set, not read back: "+err.Error())
		t.noteReadBack(k, "unread "+err.Error(), "msg", "tuner set a value it could not read back",
			"gpu", a.GPU, "knob", a.Knob, "asked", asked, "err", err)
		return a, d, false
	}
	got := Watts(held)
	switch {
	case asked == 0 && sameMilliwatts(held, pl.DefaultW):
		got = 0
	case asked != 0 && sameMilliwatts(held, float64(asked)):
		got = asked
	}
	if got == asked {
		delete(t.readBackLogged, k)
		if validWatts(pl.SetW) && validWatts(pl.InForceW) && math.Round(pl.InForceW*1000) < math.Round(pl.SetW*1000) {
			d.Reason = joinReasons(d.Reason, fmt.Sprintf("held as set; another limiter (a BMC's or DCGM's cap, a thermal or board limit) enforces %s", Watts(pl.InForceW)))
		}
		return a, d, true
	}
	d.To = got.String()
	d.Reason = joinReasons(d.Reason, fmt.Sprintf("asked %s, the GPU holds %s (read back)", asked, got))
	t.noteReadBack(k, "asked "+asked.String()+" got "+got.String(), "msg", "the GPU holds another value than the tuner set",
		"gpu", a.GPU, "knob", a.Knob, "asked", asked, "got", got,
		"hint", "the driver holds a power limit within the board's constraints; another agent (an operator, a DCGM policy, a vGPU host's administrator) may have set it")
	a.Want = got
	return a, d, true
}

// powerReader is the host's power-limit actuator where it reads the limit
// back (NVML; not the simulator).
func (t *Tuner) powerReader() (gpu.PowerLimitReader, bool) {
	cp, _ := actuator[gpu.ClockPowerActuator](t.o.Actuators)
	r, ok := cp.(gpu.PowerLimitReader)
	return r, ok
}

// powerOriginal is the original of a's power limit, before the tuner's
// first change to it: the limit set (NVML's management limit, what a
// restore sets back) where the actuator reads it, not the limit the
// readings carry (a.Current: the limit enforced, which another limiter may
// hold lower, so that a restore to it would leave the GPU lower than it
// was). Where the actuator reads no limit back, or the read fails, it is
// a.Current (a failed read is logged).
func (t *Tuner) powerOriginal(ctx context.Context, a Action) Value {
	r, ok := t.powerReader()
	if !ok {
		return a.Current
	}
	pl, err := r.PowerLimitInForce(ctx, a.GPU)
	if err == nil && !validWatts(pl.SetW) {
		err = fmt.Errorf("the GPU reports a power limit set of %v W", pl.SetW)
	}
	if err != nil {
		level.Warn(t.o.Logger).Log("msg", "tuner keeps the power limit read as the original: the limit set could not be read",
			"gpu", a.GPU, "knob", a.Knob, "original", valueText(a.Current), "err", err)
		return a.Current
	}
	set := Watts(math.Round(pl.SetW*1000) / 1000)
	if cur, ok := a.Current.(Watts); !ok || !sameMilliwatts(float64(cur), pl.SetW) {
		level.Info(t.o.Logger).Log("msg", "tuner keeps the power limit set as the original, not the limit read",
			"gpu", a.GPU, "knob", a.Knob, "original", set, "read", valueText(a.Current),
			"hint", "the limit enforced is below the limit set where another limiter (a BMC's or DCGM's cap, a thermal or board limit) holds the GPU lower")
	}
	return set
}

// validWatts reports whether w is a power limit a GPU may report.
func validWatts(w float64) bool { return w > 0 && !math.IsNaN(w) && !math.IsInf(w, 0) }

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
