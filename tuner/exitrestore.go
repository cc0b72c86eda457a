package tuner

import "github.com/vgpu-exporter/vgpu_exporter/gpu"

// ExitRestores says what the exit does with the settings the tuner (or an
// earlier run, per the journal) changed and has not restored, in three
// disjoint counts: the restore at exit acts only on a GPU in enforce mode,
// but for a pause, thawed in any mode (restoreLocked).
type ExitRestores struct {
	// AtExit are set back at exit.
	AtExit int
	// Failed would be set back at exit too, but this run's latest restore
	// (or thaw) of each failed (a GPU gone, an actuator error): the exit
	// tries again, and what still fails stays open for the next start.
	Failed int
	// KeptOpen are left as they are at exit (their GPU is not in enforce
	// mode): the journal keeps their originals for a later start with it in
	// enforce mode.
	KeptOpen int
}

// exitRestores counts the open originals by what the exit does with them.
func (t *Tuner) exitRestores() ExitRestores {
	var e ExitRestores
	for _, o := range t.originals {
		switch {
		case o.Target.Knob != gpu.KnobPauseDuty && !t.enforcedOn(o.Target.GPU):
			e.KeptOpen++
		case o.RestoreFailed:
			e.Failed++
		default:
			e.AtExit++
		}
	}
	return e
}

// noteRestoreFailed marks the original k as one whose restore failed, until
// a restore of it takes (dropOriginal).
func (t *Tuner) noteRestoreFailed(k string) {
	if o, ok := t.originals[k]; ok {
		o.RestoreFailed = true
		t.originals[k] = o
	}
}
