package tuner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"
)

// DroppedBy begins the reason of the record that closes an original an
// operator dropped (DropJournalOriginals).
const DroppedBy = "dropped by hand, not restored by the tuner"

// DropJournalOriginals closes, in the journal at path, the open originals
// that keys name (a target as Target.String writes it) or that lie on a
// GPU of gpus (UUIDs), and returns them. It is for what no start can
// restore: a setting an operator set back by hand, an original whose GPU
// is gone for good or that another host's journal brought along; each
// start would otherwise try it again and fail. Each is closed by a
// "restored" record whose reason begins with DroppedBy and goes on with
// why. st is what its open found and dropped (JournalStats' TornBytes,
// Dropped and Bad): the open's compaction removes those records from the
// file, as a start's does.
//
// The journal is opened as an exporter opens it, its lock taken: while an
// exporter runs on it (and holds the originals in memory) the drop is
// refused (on a file system without locks it cannot be told). A journal that does not exist, a key or GPU that names no open
// original, or an empty why is an error, and then nothing is dropped.
func DropJournalOriginals(path string, keys, gpus []string, why string, now time.Time) (_ []Original, st JournalStats, _ error) {
	why = strings.TrimSpace(why)
	if why == "" {
		return nil, st, errors.New("a reason is needed: the journal's record of the drop says why")
	}
	if len(keys) == 0 && len(gpus) == 0 {
		return nil, st, errors.New("nothing named to drop")
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, st, fmt.Errorf("tuner journal %s: no such file", path)
	}
	j, err := OpenJournal(path)
	if err != nil {
		return nil, st, err
	}
	defer j.Close()
	st = j.Stats()
	if e := st.WriteError; e != "" {
		return nil, st, fmt.Errorf("tuner journal %s cannot be written: %s", path, e)
	}
	open := j.Originals()
	var drop []Original
	var errs []error
	for _, k := range keys {
		i := slices.IndexFunc(open, func(o Original) bool { return o.Target.String() == k })
		if i < 0 {
			errs = append(errs, fmt.Errorf("%q is no open original of %s", k, path))
			continue
		}
		drop = append(drop, open[i])
	}
	for _, g := range gpus {
		n := 0
		for _, o := range open {
			if o.Target.GPU == g {
				drop = append(drop, o)
				n++
			}
		}
		if n == 0 {
			errs = append(errs, fmt.Errorf("GPU %q has no open original in %s", g, path))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, st, err
	}
	slices.SortFunc(drop, func(a, b Original) int { return strings.Compare(a.Target.String(), b.Target.String()) })
	drop = slices.CompactFunc(drop, func(a, b Original) bool { return a.Target == b.Target })
	for i, o := range drop {
		rec := restoreRecord(EventRestored, o, now, DroppedBy+": "+why)
		if err := j.Append(rec); err != nil {
			return drop[:i], st, fmt.Errorf("tuner journal %s: dropping %s: %w", path, o.Target, err)
		}
	}
	return drop, st, nil
}
