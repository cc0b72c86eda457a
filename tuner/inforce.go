package tuner

import (
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// A device setting (the power limit, the clock lock, the compute time
// slice, the vGPU scheduler) that the tuner set back to its original
// itself (a revert, a rollback, a policy's change back) keeps its original
// open: the policies read it as the setting to go back to
// (State.Originals). The exit's restore closes such an original as
// restored without calling the actuator where the tuner knows that the
// value in force is the original already: the value its last change of
// the setting put in force (read back where the knob reads back: the
// power limit on NVML), unless a snapshot taken after that change reads
// the setting otherwise. A reading never stands for the tuner's own call:
// a sample taken while the call ran reads the value before it, so after a
// call a reading may only make the value unknown; where this run made no
// call of the setting and its restore of an earlier run's original was
// refused whole (busy), a reading taken after that refusal tells. (It
// called the actuator with the value in force, counted and journaled a
// restore; a vGPU host refuses a scheduler change while VMs run, so that
// the exit retried it until its deadline and counted a failed restore for
// a setting already at its original.) A change refused whole (not
// supported, busy) changed nothing: the value stays. The value is
// unknown, and the exit sets the original back as before, after a change
// of the setting that failed or was set and not read back, or a restore
// of it that failed, on a GPU a snapshot read down or did not list since,
// and where a later reading differs. The start's restore always sets it
// back.
// The power limit's reading is the limit enforced, which another limiter
// may hold lower than the limit set (the original): no snapshot tells it.

// inForceValue is the value in force of one device setting as the
// tuner's own calls left it.
type inForceValue struct {
	gpu string
	v   Value     // nil: unknown
	at  time.Time // the tuner's last call of the setting, or its GPU found lost
	// refused: no call of this run's changed the setting, and its restore
	// of an earlier run's original was refused whole at at (busy)
	refused bool
}

// noteInForce keeps, after the actuator's call for a's device setting at
// now, a's value as the one in force where known, and the value as
// unknown otherwise (a failed call, a value set and not read back).
func (t *Tuner) noteInForce(a Action, known bool, now time.Time) {
	if !oneCall(a.Knob) || a.Plan != nil {
		return
	}
	e := inForceValue{gpu: a.GPU, at: now}
	if known {
		e.v = a.Want
	}
	t.inForce[a.Target.String()] = e
}

// noteLostInForce forgets the values in force on the GPUs snap reads down
// or does not list (a GPU reset, a driver reload may have set them back to
// their defaults).
func (t *Tuner) noteLostInForce(snap *tenant.Snapshot) {
	if snap == nil || snap.Readings == nil {
		return
	}
	for k, e := range t.inForce {
		if d := snap.Readings.DeviceByUUID(e.gpu); d == nil || !d.Up {
			t.inForce[k] = inForceValue{gpu: e.gpu, at: snap.Readings.Time}
		}
	}
}

// atOriginal reports whether the value in force of the device setting of
// the original k is known to be the original's (see above), and how the
// tuner knows it.
func (t *Tuner) atOriginal(k string) (how string, ok bool) {
	o, open := t.originals[k]
	if !open || !oneCall(o.Target.Knob) || o.Value == nil || t.last == nil || t.last.Readings == nil {
		return "", false
	}
	d := t.last.Readings.DeviceByUUID(o.Target.GPU)
	if d == nil || !d.Up {
		return "", false
	}
	e, called := t.inForce[k]
	if !called {
		return "", false // (a reading alone never stands for a call: it may lag one, another exporter's too)
	}
	if e.refused {
		// an earlier run's original whose restore this run had refused
		// whole: no call of this run's for a reading to lag, so a reading
		// taken after that refusal tells
		r, read := readSetting(d, o.Target.Knob)
		if !t.last.Readings.Time.After(e.at) || !read || r == nil || !setsBack(Action{Want: r}, o) {
			return "", false
		}
		return "as a snapshot taken after its refused restore reads it", true
	}
	if e.v == nil {
		return "", false
	}
	v, how := e.v, "as the tuner's last change of it set it"
	if o.Target.Knob == gpu.KnobPowerLimit && t.powerReaderOK() {
		how = "as the tuner's last change of it set it, read back"
	}
	if t.last.Readings.Time.After(e.at) {
		// a later reading may only contradict what the tuner set: one
		// that differs (another hand, a reset, or a sample taken as the
		// call ran, before it took) leaves the value unknown
		r, read := readSetting(d, o.Target.Knob)
		switch {
		case !read:
		case r == nil: // the clocks read locked, their range not read
			if c, ok := v.(ClockRange); !ok || c == (ClockRange{}) {
				return "", false
			}
		case contradicts(r, v):
			return "", false
		default:
			how += ", and the latest snapshot reads it so"
		}
	}
	if !setsBack(Action{Want: v}, o) {
		return "", false
	}
	return how, true
}

// contradicts reports whether the reading r of a device setting differs
// from v, the value the tuner's last call of it set. A vGPU scheduler
// parameter the call left to the driver's default (0: a time slice, an
// average factor, a frequency) reads as that default, whatever it is.
func contradicts(r, v Value) bool {
	if s, ok := v.(Scheduler); ok {
		if q, ok := r.(Scheduler); ok {
			return !s.readsAs(q)
		}
	}
	return !setsBack(Action{Want: r}, Original{Value: v})
}

// readSetting is the value of the device setting knob that the readings
// of d carry, read where they carry one: nil with read for clocks read
// locked, their range not read. The power limit they carry is the limit
// enforced, not the limit set (the original): not read.
func readSetting(d *gpu.Device, knob gpu.Knob) (v Value, read bool) {
	switch knob {
	case gpu.KnobLockedClocks: // (locked: nil, its range not read)
		return currentValue(d, knob, 0), d.ClocksLocked != nil
	case gpu.KnobComputeTimeSlice, gpu.KnobVGPUScheduler:
		v = currentValue(d, knob, 0)
		return v, v != nil
	}
	return nil, false
}

// powerReaderOK says whether the host's power-limit actuator reads the
// limit back.
func (t *Tuner) powerReaderOK() bool {
	_, ok := t.powerReader()
	return ok
}

// whyAtOriginal is what the reason of a restore at exit that finds its
// setting at its original says.
const whyAtOriginal = "already at its original value: nothing to set back"

// closeAtOriginal closes the original k, whose device setting is at its
// value already (atOriginal says how), as restored without an actuator
// call: decided, journaled, counted and logged as a restore.
func (t *Tuner) closeAtOriginal(k string, d Decision, how string, now time.Time) *Decision {
	o := t.originals[k]
	d.Outcome, d.Applied = OutcomeRestored, true
	d.Reason = joinReasons(d.Reason, whyAtOriginal+" ("+how+")")
	t.counts.Restores++
	level.Info(t.o.Logger).Log("msg", "tuner restored an original setting: already at its original value, nothing set", "target", o.Target.String(), "value", o.Value.String(), "reason", d.Reason)
	t.closeOriginal(k, now, d.Reason)
	return &d
}
