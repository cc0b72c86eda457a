package tuner

import (
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/go-kit/log/level"
)

// A restored record the journal could not take (a full disk, the
// journal's file system read-only) is kept, and written once a write
// succeeds again (journalWritableAgain: a record of the tuner's, or a
// round's probe) and at exit. The tuner forgot the original when it set it
// back (or closed it); left open in the journal, the next start would set
// back the value from before that restore over what was in force since
// (an operator's), however long the journal had been writable again and
// however clean the exit. One whose original the journal no longer holds
// open (closed before its setting's next original: closeLeftOpen), or that
// the tuner holds again (adopted from a journal put at the path), is
// dropped unwritten: nothing is left to close. One the exit cannot write
// either is logged at warning level: its original stays open, and the next
// start sets it back again.

// keepUnwritten keeps rec, a restored record whose write failed with err,
// to be written later; one the closed journal refused is not (the exit
// is over).
func (t *Tuner) keepUnwritten(rec Record, err error) {
	if err == nil || rec.Event != EventRestored || errors.Is(err, ErrJournalClosed) {
		return
	}
	if t.unwritten == nil {
		t.unwritten = map[string]Record{}
	}
	t.unwritten[rec.Target.String()] = rec
}

// writeUnwritten writes the restored records kept (keepUnwritten), their
// reason saying so, and keeps those whose write fails again.
func (t *Tuner) writeUnwritten() {
	if t.o.Journal == nil {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(t.unwritten)) {
		rec, kept := t.unwritten[k]
		if !kept {
			continue // (written as a write before it made the journal writable again)
		}
		delete(t.unwritten, k)
		_, held := t.originals[k]
		if _, open := t.o.Journal.openOriginal(k); !open || held {
			continue
		}
		rec.Reason = joinReasons(rec.Reason, whyWrittenLate)
		if err := t.journal(rec); err != nil {
			return // (kept again)
		}
		v, _ := rec.From.decode() // (validated when it was first written)
		level.Info(t.o.Logger).Log("msg", "tuner journaled a restore it could not journal when it was made: its original is closed", "target", k, "value", valueText(v), "restored_at", rec.Time)
	}
}

// writeUnwrittenAtExit writes the restored records kept, where the
// journal takes them now, and says which stay unwritten: their originals
// stay open, and the next start sets them back again, over whatever is in
// force then.
func (t *Tuner) writeUnwrittenAtExit() {
	t.writeUnwritten()
	if len(t.unwritten) == 0 {
		return
	}
	level.Warn(t.o.Logger).Log("msg", "tuner journal could not take the restored records of settings set back while it could not be written: their originals stay open, and the next start sets them back again, over any change made since",
		"targets", strings.Join(slices.Sorted(maps.Keys(t.unwritten)), " "))
}

// whyWrittenLate ends the reason of a restored record written after its
// restore, once the journal could be written again.
const whyWrittenLate = "journaled late: the journal could not be written when it was made"
