package tuner

import (
	"context"
	"fmt"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// The originals: what the tuner writes down of a setting before its first
// change to it, so that it can set it back at exit or after a crash.

// keepOriginal journals the setting before the first change to it; a
// change whose original could not be written down is not made. Only the
// mechanisms whose settings are restored keep originals (a tenant moved
// or a MIG layout changed is not undone). A power limit's original is the
// limit set, where the actuator reads it (powerOriginal).
func (t *Tuner) keepOriginal(ctx context.Context, a Action, now time.Time) error {
	k := a.Target.String()
	if _, ok := mechanismOf(a.Knob); !ok || a.Plan != nil {
		return nil
	}
	if err := t.closeLeftOpen(k, now); err != nil {
		return fmt.Errorf("not changed, the journal holds open an original set back before, whose restored record could not be journaled: %w", err)
	}
	if _, ok := t.originals[k]; ok || a.Current == nil {
		return nil // (a change from a value not read is refused before: unreadOriginal)
	}
	var pids []uint32
	var id Identity // the processes' (identity.go)
	if h, ok := holdOf(a.Knob); ok {
		pids = h.pids(a)
		id = t.identityFor(Original{}, pids)
	} else if a.Knob == gpu.KnobMPSActiveThreads {
		id = t.clientIdentity(a.Target.PID) // (mpsidentity.go)
	}
	v := a.Current
	if a.Knob == gpu.KnobPowerLimit {
		v = t.powerOriginal(ctx, a)
	}
	o := Original{Target: a.Target, Tenant: a.Tenant, Value: v, At: now, PIDs: pids, Identity: id}
	if t.o.Journal != nil {
		if err := t.journal(originalRecord(o)); err != nil {
			return fmt.Errorf("not changed, the original could not be journaled: %w", err)
		}
		if _, ok := t.originals[k]; ok {
			return nil // (kept from a journal its write found put at the path: the journal keeps the first)
		}
	}
	t.originals[k] = o
	return nil
}

// unreadOriginal is why a change of a setting the tuner restores, from a
// value not read (a.Current nil: the driver's getter failed), is not
// made: no original can be kept, so nothing would set it back at exit or
// after a crash. "" where it may be made: its original is kept already
// (kept), or its knob is not restored (a plan).
func unreadOriginal(a Action, kept bool) string {
	if _, ok := mechanismOf(a.Knob); !ok || a.Plan != nil || a.Current != nil || kept {
		return ""
	}
	return fmt.Sprintf("the %s in force was not read, so no original could be kept to set it back", a.Knob)
}

// dropOriginal forgets the original k, set back, and what the rounds
// counted of it (a later original of the same target starts afresh).
func (t *Tuner) dropOriginal(k string) {
	delete(t.originals, k)
	delete(t.gone, k)
	delete(t.unseen, k)
	delete(t.followAt, k)
	delete(t.ending, k)
	delete(t.watches, k)
	delete(t.restoreWaits, k)
}
