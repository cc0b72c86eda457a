package tuner

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// The slow loop's past in the journal: when its last plan was made, and
// when each tenant was last moved and each GPU last relaid out, so that a
// start resumes the cool-down and the holds (Tuner.resumeSlowLoop) rather
// than plan, minutes after a restart, the move it has just made. The
// journal keeps the records that say so through its compactions.

// maxJournalMoved bounds the tenants one record names as moved
// (Record.Moved); a plan moving more names the first ones.
const maxJournalMoved = 256

// slowRecord is a record of the slow loop, seq its place among them.
type slowRecord struct {
	rec Record
	seq int
}

// slowLoopRecords are the journal's records of the slow loop still
// needed: the latest planned record of a plan, and by tenant (by GPU)
// the record of its latest move (relayout).
type slowLoopRecords struct {
	plan      *slowRecord
	moved     map[string]*slowRecord
	relayouts map[string]*slowRecord
	seq       int
	// hold and now are the tuner's hold and clock (holdSlowLoop): a
	// move or relayout hold or more before now, or dated after it (a
	// clock set back since), is left out of a compaction, as a start
	// leaves it out (resumeSlowLoop); none is before a tuner has said
	// them (at open). Not a record's time: one dated ahead (written
	// while the clock ran ahead) would make every move stale.
	hold time.Duration
	now  func() time.Time
}

// slowLoopMemory is what the journal says of the slow loop's past plans.
type slowLoopMemory struct {
	lastPlan         time.Time
	moved, relayouts map[string]time.Time
}

// isPlanKnob says whether knob is one a slow loop's plan stands for
// (planAction).
func isPlanKnob(knob gpu.Knob) bool { return knob == gpu.KnobPlacement || knob == gpu.KnobMIGLayout }

// movedBy are the tenants rec says were moved: its moved list or, in an
// applied placement record of a version before it, its tenant (the
// plan's first move's, every move's of a built-in plan).
func movedBy(rec Record) []string {
	if len(rec.Moved) > 0 {
		return rec.Moved
	}
	if rec.Event == string(OutcomeApplied) && rec.Target.Knob == gpu.KnobPlacement && rec.Tenant != "" {
		return []string{rec.Tenant}
	}
	return nil
}

// relaidOut says whether rec relaid out its GPU: a MIG layout applied, or
// the drain of a relayout the tuner carries out itself begun (its
// instances emptied, whatever came of the layout after).
func relaidOut(rec Record) bool {
	return rec.Event == string(OutcomeApplied) && (rec.Target.Knob == gpu.KnobMIGLayout || rec.Target.Knob == gpu.KnobMIGDrain)
}

// note keeps rec where it is one the slow loop's memory needs.
func (s *slowLoopRecords) note(rec Record) {
	moved, relaid := movedBy(rec), relaidOut(rec)
	planned := rec.Event == string(OutcomePlanned) && isPlanKnob(rec.Target.Knob)
	if !planned && len(moved) == 0 && !relaid {
		return
	}
	s.seq++
	r := &slowRecord{rec: rec, seq: s.seq}
	if s.moved == nil {
		s.moved, s.relayouts = map[string]*slowRecord{}, map[string]*slowRecord{}
	}
	switch {
	case planned:
		s.plan = r
	case relaid:
		s.relayouts[rec.Target.GPU] = r
	}
	for _, name := range moved {
		s.moved[name] = r
	}
}

// kept are the records a compaction writes, oldest first, each once: the
// moves and relayouts hold or more before now, or dated after it, dropped.
func (s *slowLoopRecords) kept() []Record {
	if s.hold > 0 && s.now != nil {
		now := s.now()
		stale := func(_ string, r *slowRecord) bool { return r.rec.Time.After(now) || now.Sub(r.rec.Time) >= s.hold }
		maps.DeleteFunc(s.moved, stale)
		maps.DeleteFunc(s.relayouts, stale)
	}
	var rs []*slowRecord
	for _, r := range slices.Concat(slices.Collect(maps.Values(s.moved)), slices.Collect(maps.Values(s.relayouts)), []*slowRecord{s.plan}) {
		if r != nil && !slices.Contains(rs, r) {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b *slowRecord) int { return a.seq - b.seq })
	out := make([]Record, len(rs))
	for i, r := range rs {
		out[i] = r.rec
	}
	return out
}

// memory is what the records say.
func (s *slowLoopRecords) memory() slowLoopMemory {
	m := slowLoopMemory{moved: map[string]time.Time{}, relayouts: map[string]time.Time{}}
	if s.plan != nil {
		m.lastPlan = s.plan.rec.Time
	}
	for name, r := range s.moved {
		m.moved[name] = r.rec.Time
	}
	for uuid, r := range s.relayouts {
		m.relayouts[uuid] = r.rec.Time
	}
	return m
}

// keptRecords is how many records a compaction writes, at least: one an
// open original, and the slow loop's.
func (j *Journal) keptRecords() int { return len(j.open) + len(j.slow.kept()) }

// slowLoop returns what the journal says of the slow loop's past plans.
func (j *Journal) slowLoop() slowLoopMemory {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.slow.memory()
}

// holdSlowLoop sets how long a move or relayout holds (the planner's
// MoveHold) and the clock it is judged on (the tuner's): a compaction
// leaves out those older, or dated after now.
func (j *Journal) holdSlowLoop(hold time.Duration, now func() time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.slow.hold, j.slow.now = hold, now
}

// validMoved checks a record's moved list: a placement record's, each
// name a tenant's, at most maxJournalMoved.
func validMoved(r Record) error {
	if len(r.Moved) == 0 {
		return nil
	}
	if r.Target.Knob != gpu.KnobPlacement {
		return fmt.Errorf("moved tenants named for knob %q, not placement", r.Target.Knob)
	}
	if len(r.Moved) > maxJournalMoved {
		return fmt.Errorf("%d moved tenants named (at most %d)", len(r.Moved), maxJournalMoved)
	}
	if slices.ContainsFunc(r.Moved, func(name string) bool { return name == "" || len(name) > maxJournalText }) {
		return errors.New("a moved tenant's name empty or too long")
	}
	return nil
}
