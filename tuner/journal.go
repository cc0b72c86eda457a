package tuner

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Journal events besides the outcomes.
const (
	EventOriginal      = "original"       // a setting before the tuner's first change to it
	EventRestored      = "restored"       // an original set back
	EventRestoreFailed = "restore_failed" // an original could not be set back
)

// Record is one line of the journal.
type Record struct {
	Time   time.Time     `json:"time"`
	Event  string        `json:"event"`
	Target Target        `json:"target"`
	Tenant string        `json:"tenant,omitempty"`
	From   *encodedValue `json:"from,omitempty"`
	To     *encodedValue `json:"to,omitempty"`
	Guard  string        `json:"guard,omitempty"`
	Reason string        `json:"reason,omitempty"`
}

// Original is a setting the tuner changed and must set back.
type Original struct {
	Target Target
	Tenant string
	Value  Value
	At     time.Time
}

// Journal is the tuner's append-only record, one JSON object per line,
// synced to disk after every line: the original of every setting before
// the first change to it, and every outcome. After a crash, the originals
// without a later "restored" line are what the next start sets back.
type Journal struct {
	mu   sync.Mutex
	f    *os.File
	path string
	// open are the originals journaled and not restored, by Target.String.
	open map[string]Original
}

// OpenJournal opens (creating) the journal at path and reads what an
// earlier run left in it. A line that does not parse is an error naming
// its place, except a torn last line (a crash during a write), which is
// ignored.
func OpenJournal(path string) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("tuner journal: %w", err)
	}
	j := &Journal{f: f, path: path, open: map[string]Original{}}
	if err := j.load(f); err != nil {
		f.Close()
		return nil, err
	}
	return j, nil
}

func (j *Journal) load(r io.Reader) error {
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var rec Record
			if perr := json.Unmarshal(line, &rec); perr != nil {
				if errors.Is(err, io.EOF) { // torn last line
					return nil
				}
				return fmt.Errorf("tuner journal %s:%d: %v", j.path, n, perr)
			}
			if err := j.apply(rec); err != nil {
				return fmt.Errorf("tuner journal %s:%d: %v", j.path, n, err)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tuner journal %s: %w", j.path, err)
		}
	}
}

// apply updates the open originals with one record.
func (j *Journal) apply(rec Record) error {
	k := rec.Target.String()
	switch rec.Event {
	case EventOriginal:
		if _, ok := j.open[k]; ok {
			return nil // the first original stays
		}
		v, err := rec.From.decode()
		if err != nil {
			return err
		}
		j.open[k] = Original{Target: rec.Target, Tenant: rec.Tenant, Value: v, At: rec.Time}
	case EventRestored:
		delete(j.open, k)
	}
	return nil
}

// Path returns the journal's file.
func (j *Journal) Path() string { return j.path }

// Originals returns the originals not yet restored, in no special order.
func (j *Journal) Originals() []Original {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Original, 0, len(j.open))
	for _, o := range j.open {
		out = append(out, o)
	}
	return out
}

// HasOriginal reports whether an original of t is journaled and open.
func (j *Journal) HasOriginal(t Target) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	_, ok := j.open[t.String()]
	return ok
}

// Append writes rec and syncs the file.
func (j *Journal) Append(rec Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.apply(rec); err != nil {
		return err
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("tuner journal %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("tuner journal %s: sync: %w", j.path, err)
	}
	return nil
}

// Close closes the file.
func (j *Journal) Close() error { return j.f.Close() }
