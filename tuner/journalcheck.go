package tuner

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Bounds of the values the journal accepts.
const (
	maxJournalWatts  = 10000   // far above any GPU's power limit
	maxJournalMHz    = 10000   // far above any GPU's SM clock
	maxJournalText   = 256     // a GPU UUID, a tenant, a policy name, a layout
	maxJournalPIDs   = 4096    // a paused tenant's processes (8 ranks of 100 data-loader workers and more)
	maxJournalLayout = 4 << 10 // a MIG layout
	// a vGPU scheduler's time slice: NVML's is 32 bits of nanoseconds
	maxJournalTimeSlice = time.Duration(math.MaxUint32)
)

// journalEvents are the events a record may carry.
var journalEvents = []string{
	EventOriginal, EventRestored, EventRestoreFailed, EventProcesses, EventRestarted,
	string(OutcomePlanned), string(OutcomeGuarded), string(OutcomeRecommended), string(OutcomeApplied),
	string(OutcomeRefused), string(OutcomeFailed), string(OutcomeRolledBack),
}

// validRecord checks a record read from (or about to be written to) the
// journal: a known event, a target, and values of a known kind within
// their bounds. An original record needs its value (From) and a knob
// whose settings are restored.
func validRecord(r Record) error {
	if !slices.Contains(journalEvents, r.Event) {
		return fmt.Errorf("unknown event %q", r.Event)
	}
	if r.Target.GPU == "" || len(r.Target.GPU) > maxJournalText || r.Target.Knob == "" || len(r.Target.Knob) > maxJournalText || len(r.Tenant) > maxJournalText {
		return errors.New("target missing or too long")
	}
	restarted := r.Event == EventRestarted
	if restarted && (r.Target.Knob != gpu.KnobMPSActiveThreads || r.Target.PID == 0) {
		return fmt.Errorf("restarted record of %s, not an MPS client", r.Target)
	}
	if _, holds := holdOf(r.Target.Knob); len(r.PIDs) > 0 && !holds && !restarted {
		return fmt.Errorf("processes named for knob %q, whose settings stop no process", r.Target.Knob)
	}
	if len(r.Others) > 0 && !restarted {
		return errors.New("other processes named outside a restarted record")
	}
	if n := pidsNamed(r); n > maxJournalPIDs {
		return fmt.Errorf("%d processes named (at most %d)", n, maxJournalPIDs)
	}
	for _, pids := range [][]uint32{r.PIDs, r.Others} {
		if slices.Contains(pids, 0) {
			return errors.New("process ID 0 named (no process has it)")
		}
	}
	if err := validIdentity(r); err != nil {
		return err
	}
	if err := validClient(r); err != nil {
		return err
	}
	if err := validCgroups(r); err != nil {
		return err
	}
	if err := validMoved(r); err != nil {
		return err
	}
	if r.Event == EventProcesses && len(r.PIDs) == 0 {
		return errors.New("processes record without processes")
	}
	if r.Event == EventOriginal {
		if r.From == nil {
			return errors.New("original record without a value")
		}
		if _, ok := mechanismOf(r.Target.Knob); !ok && r.Target.Knob != gpu.KnobProcessLifecycle {
			return fmt.Errorf("original record of knob %q, whose settings are not restored", r.Target.Knob)
		}
	}
	for _, e := range []*encodedValue{r.From, r.To} {
		if e == nil {
			continue
		}
		v, err := e.decode()
		if err == nil {
			err = validValue(v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// validValue checks a value against its kind's bounds.
func validValue(v Value) error {
	bad := func() error { return fmt.Errorf("%s value %v out of range", v.Kind(), v) }
	switch x := v.(type) {
	case Fraction:
		if math.IsNaN(float64(x)) || x <= 0 || x > 1 {
			return bad()
		}
	case Watts:
		if math.IsNaN(float64(x)) || x < 0 || x > maxJournalWatts {
			return bad()
		}
	case Level:
		if _, ok := levelOrder[gpu.TimeSliceLevel(x)]; !ok {
			return bad()
		}
	case Scheduler:
		if x.Policy == "" || len(x.Policy) > maxJournalText || x.TimeSlice < 0 || x.TimeSlice > maxJournalTimeSlice {
			return bad()
		}
	case ClockRange:
		if x.MinMHz > x.MaxMHz || x.MaxMHz > maxJournalMHz {
			return bad()
		}
	case Placement:
		if x == "" || len(x) > maxJournalText {
			return bad()
		}
	case Layout:
		if len(x) > maxJournalLayout {
			return bad()
		}
	}
	return nil
}

// pidsNamed is how many processes record r names in one of its lists, the
// most a record holds being maxJournalPIDs (checked when it is read, and
// before a change is journaled: tooManyProcesses).
func pidsNamed(r Record) int { return max(len(r.PIDs), len(r.Others)) }
