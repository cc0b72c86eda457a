package tuner

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Journal events besides the outcomes.
const (
	EventOriginal      = "original"       // a setting before the tuner's first change to it
	EventRestored      = "restored"       // an original set back
	EventRestoreFailed = "restore_failed" // an original could not be set back
	// EventProcesses: a paused tenant's processes, as last paused (an
	// original's PIDs from then on)
	EventProcesses = "processes"
	// EventRestarted: an MPS client about to be restarted by an actuator
	// whose restarts may go on under another PID, with what was on its
	// GPU then (an original's Restart from then on)
	EventRestarted = "restarted"
)

// Record is one record of the journal.
type Record struct {
	Time   time.Time     `json:"time"`
	Event  string        `json:"event"`
	Target Target        `json:"target"`
	Tenant string        `json:"tenant,omitempty"`
	From   *encodedValue `json:"from,omitempty"`
	To     *encodedValue `json:"to,omitempty"`
	Guard  string        `json:"guard,omitempty"`
	Reason string        `json:"reason,omitempty"`
	// PIDs are a paused tenant's processes (pause_duty's original and
	// processes records): restored, every one of them is thawed. In a
	// restarted record, the tenant's processes on the GPU, Others the
	// GPU's other processes (Restart).
	PIDs   []uint32 `json:"pids,omitempty"`
	Others []uint32 `json:"others,omitempty"`
	// Identity names the PIDs of a pause's original and processes records.
	Identity
	// Client names the process of an MPS client's original (a field of
	// its own, which an older version ignores: mpsidentity.go); read and
	// written through identity and withIdentity.
	Client *ClientIdentity `json:"client,omitempty"`
	// Moved are the tenants a placement plan's outcome record says were
	// moved (every move's of a plan applied, the moves made of one
	// applied in part), which the next start holds (journalslow.go).
	Moved []string `json:"moved,omitempty"`
}

// Original is a setting the tuner changed and must set back.
type Original struct {
	Target Target
	Tenant string
	Value  Value
	At     time.Time
	// PIDs are a paused tenant's processes as last paused (pause_duty),
	// nil for every other knob.
	PIDs []uint32
	// Identity names PIDs, where journaled.
	Identity
	// Restart is an MPS client's last restart whose successor the
	// restart hook may not have named, as journaled; nil when none.
	Restart *Restart
	// Set is the value last journaled as set (the To of its latest
	// applied or rolled_back record, at SetAt); nil when none.
	Set   Value
	SetAt time.Time
	// RestoreFailed: this run's latest restore (or thaw) of it failed.
	// Never journaled: the next start tries it again.
	RestoreFailed bool
	// kept says why an MPS cap's restore, settled pending, is not made
	// again by this run: readings showed the client keeps the cap
	// (pendingcontradicted.go). Never journaled.
	kept string
}

// originalRecord is the original record of o, with its identity
// (withIdentity).
func originalRecord(o Original) Record {
	return Record{Time: o.At, Event: EventOriginal, Target: o.Target, Tenant: o.Tenant, From: encodeValue(o.Value), PIDs: o.PIDs}.withIdentity(o.Identity)
}

// restoreRecord is the record of event (restored: it closes the original
// o; restore_failed: it stays open) at now, why its reason.
func restoreRecord(event string, o Original, now time.Time, why string) Record {
	return Record{Time: now, Event: event, Target: o.Target, Tenant: o.Tenant, From: encodeValue(o.Value), Reason: why}
}

// The journal's format (docs/journal.md): one record a
// line,
//
//	J1 LLLLLLLL CCCCCCCC {json}\n
//
// with LLLLLLLL the length of the JSON in bytes and CCCCCCCC its CRC-32C
// (Castagnoli), both as 8 lowercase hex digits. A record is whole only
// with its length, its checksum and its newline right; a line that starts
// with "{" is a record of the earlier format (JSON alone), still read.
const (
	recordMagic  = "J1 "
	recordHeader = len(recordMagic) + 8 + 1 + 8 + 1
)

// MaxRecordBytes bounds the JSON of one record: a longer one is refused
// when written and dropped (as oversize) when read. It holds the largest
// valid record: a pause of maxJournalPIDs processes, each PID with its
// start time (about 20 bytes a process), and its cgroups.
const MaxRecordBytes = 128 << 10

// maxReasonBytes bounds a record's reason; a longer one is cut.
const maxReasonBytes = 4 << 10

// DefaultJournalMaxBytes is the size past which the journal is compacted.
const DefaultJournalMaxBytes = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// JournalDropReasons are the reasons a record is dropped when read.
var JournalDropReasons = []string{"torn", "corrupt", "invalid", "oversize"}

// JournalStats are what the journal's recovery and writes have done since
// it was opened.
type JournalStats struct {
	// TornBytes is the size of the torn tail cut off at open (a crash or
	// a full disk during the last write); 0 when the file ended whole.
	TornBytes int64
	// Bad names the records counted in Dropped other than the torn tail,
	// the first maxBadNamed of them: where each was, and why.
	Bad []BadRecord
	// Dropped counts the records dropped at open, by reason: "torn" (the
	// tail), "corrupt" (a bad length, checksum or JSON inside the file, or
	// what a failed write left where it could not be cut back), "invalid"
	// (a whole record with a value out of range or a field missing),
	// "oversize" (a line over MaxRecordBytes).
	Dropped map[string]int
	// Compactions counts the rewrites of the journal to its open originals.
	Compactions int
	// WriteError is the last write's error ("" once a write succeeded
	// again): while it is set the tuner does not act.
	WriteError string
	// CompactError is the last compaction's error ("" once one
	// succeeded): the records are written, the file grows meanwhile.
	CompactError string
	// Size is the file's size in bytes.
	Size int64
}

// Journal is the tuner's append-only record (see the format above), synced
// to disk after every record (its directory too, before the first record
// after an open, so that a file just created keeps its name): the original
// of every setting before the first change to it, and every outcome. After a crash, the originals
// without a later "restored" record are what the next start sets back.
type Journal struct {
	mu       sync.Mutex
	f        *os.File
	path     string
	maxBytes int64
	size     int64 // the file's size after the last whole record
	records  int   // records in the file
	// open are the originals journaled and not restored, by Target.String.
	open  map[string]Original
	stats JournalStats
	// ro is why the journal was opened read-only (its file system is
	// mounted read-only): the next write opens it for writing first. f is
	// nil where the file did not exist.
	ro error
	// dirUnsynced: the file's name may not be durable yet (the file was
	// opened for writing, perhaps created): the next write syncs its
	// directory first.
	dirUnsynced bool
	// torn: the file may end past size, inside a line (a torn tail not
	// cut off at open, a failed write not cut back): the next record cuts
	// it off first (see mend).
	torn bool
	// relinked: what relinkLocked did since the last Relink (a write
	// that found the path removed or replaced and wrote it again); the
	// next Relink says so, for the round to log.
	relinked Relinked
	// closed: Close was called; every later use fails (usedAfterClose).
	closed bool
	// foreign: the file at the path when last found not a journal, not
	// read again until it changes (relinkLocked).
	foreign *foreignFile
	// slow are the slow loop's records the next start needs
	// (journalslow.go).
	slow slowLoopRecords
}

// OpenJournal opens (creating) the journal at path, recovers what an
// earlier run left in it and compacts it; see OpenJournalSize.
func OpenJournal(path string) (*Journal, error) { return OpenJournalSize(path, DefaultJournalMaxBytes) }

// OpenJournalSize opens (creating) the journal at path, compacted once it
// grows past maxBytes. Only a regular file is accepted (it is opened
// without blocking, so a FIFO does not hang the start). What an earlier
// run left is read record by record: a torn tail is cut off, a corrupt or
// invalid record inside the file is dropped, and both are counted
// (Stats). On a file system mounted read-only (a disk error remounts it
// so) the journal is read, locked all the same (one another process holds
// is refused), and every write fails (Stats.WriteError) until the file
// system is writable again; any other file that cannot be read or written
// is an error. A symbolic link is followed to its file (journalTarget).
func OpenJournalSize(path string, maxBytes int64) (*Journal, error) {
	path, maxBytes = journalTarget(path), cmp.Or(max(maxBytes, 0), DefaultJournalMaxBytes)
	f, err := openRegular(path)
	var ro error
	if errors.Is(err, syscall.EROFS) {
		ro = err // read, and locked as a writer's (see openReadOnly)
		if f, err = openReadOnly(path); errors.Is(err, fs.ErrNotExist) {
			f, err = nil, nil // nothing to read
		}
	}
	if err != nil {
		return nil, fmt.Errorf("tuner journal: %w", err)
	}
	j := newJournal(f, path, maxBytes)
	j.ro = ro
	if ro != nil {
		j.stats.WriteError = fmt.Sprintf("tuner journal %s: %v", path, ro)
		if f != nil {
			if err := j.load(); err != nil {
				f.Close()
				return nil, err
			}
		}
		j.torn = j.stats.TornBytes > 0 // cut off once the file can be written
		return j, nil
	}
	j.dirUnsynced = true
	if err := j.load(); err != nil {
		f.Close()
		return nil, err
	}
	removeLeftoverTemps(path)
	if j.stats.TornBytes > 0 {
		// A tail that cannot be cut off does not stop the start: the
		// compaction replaces it or, where that fails too, the next record
		// cuts it off first (mend).
		j.torn = truncateFile(f, j.size) != nil
	}
	if j.records > j.keptRecords() || j.dropped() > 0 {
		if err := j.compactLocked(); err != nil {
			// The file stays as it is: acting waits for a write that
			// succeeds.
			j.stats.WriteError, j.stats.CompactError = err.Error(), err.Error()
		}
	}
	return j, nil
}

// ReadJournalOriginals returns the originals the journal at path holds
// open, changing nothing: no file is created, no lock taken, no torn tail
// cut and nothing compacted (what an exporter with the tuner off reports,
// while another may be writing it). A journal that does not exist holds
// none.
func ReadJournalOriginals(path string) ([]Original, error) {
	open, _, err := ReadJournal(path)
	return open, err
}

// ReadJournal is ReadJournalOriginals with what the read dropped
// (JournalStats' TornBytes and Dropped): an original a dropped record
// held is not among those returned.
func ReadJournal(path string) ([]Original, JournalStats, error) {
	f, err := openRegularFlag(path, os.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, JournalStats{}, nil
	}
	if err != nil {
		return nil, JournalStats{}, fmt.Errorf("tuner journal: %w", err)
	}
	defer f.Close()
	j := newJournal(f, path, DefaultJournalMaxBytes)
	if err := j.load(); err != nil {
		return nil, JournalStats{}, err
	}
	return j.Originals(), j.Stats(), nil
}

// newJournal is the journal of the open file f at path, nothing loaded.
func newJournal(f *os.File, path string, maxBytes int64) *Journal {
	return &Journal{f: f, path: path, maxBytes: maxBytes, open: map[string]Original{}, stats: JournalStats{Dropped: map[string]int{}}}
}

func (j *Journal) dropped() int {
	n := 0
	for _, c := range j.stats.Dropped {
		n += c
	}
	return n
}

// load reads the records of a journal (notJournal), in bounded memory, and applies the whole ones.
func (j *Journal) load() error {
	if err := notJournal(j.f, j.path); err != nil {
		return err
	}
	br := bufio.NewReaderSize(j.f, recordHeader+MaxRecordBytes+1)
	var off int64
	var bad []BadRecord // the bad lines since the last good record
	drop := func() {
		for _, b := range bad {
			j.stats.Dropped[b.Reason]++
			if b.Reason != "torn" && len(j.stats.Bad) < maxBadNamed {
				j.stats.Bad = append(j.stats.Bad, b)
			}
		}
		bad = bad[:0]
	}
	for ln := 1; ; ln++ {
		line, err := br.ReadSlice('\n')
		n := int64(len(line))
		at := BadRecord{Line: ln, Offset: off}
		if errors.Is(err, bufio.ErrBufferFull) {
			// Over the bound: skip to the end of the line.
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				n += int64(len(line))
			}
			if err == nil {
				at.Reason, at.Detail = "oversize", badDetail(nil, "oversize")
				bad = append(bad, at)
			}
			line = nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("tuner journal %s: %w", j.path, err)
		}
		if errors.Is(err, io.EOF) {
			if n > 0 {
				at.Reason = "torn" // no newline: the last write did not finish
				bad = append(bad, at)
			}
			off += n
			break
		}
		off += n
		rec, why := parseRecord(line)
		if why != "" {
			at.Reason, at.Detail = why, badDetail(line, why)
			bad = append(bad, at)
			continue
		}
		j.apply(rec)
		j.records++
		drop() // bad lines before a good one: corruption inside
		j.size = off
	}
	drop() // after the last whole record: the torn tail
	j.stats.TornBytes = off - j.size
	j.stats.Size = j.size
	return nil
}

// parseRecord decodes and validates one line (with its newline); why is
// the reason it is dropped, "" when it is whole and valid.
func parseRecord(line []byte) (rec Record, why string) {
	body := bytes.TrimSuffix(line, []byte("\n"))
	if len(body) > 0 && body[0] == '{' { // the earlier format
		if len(body) > MaxRecordBytes {
			return rec, "oversize"
		}
	} else {
		if len(body) < recordHeader || string(body[:len(recordMagic)]) != recordMagic {
			return rec, "corrupt"
		}
		h := body[len(recordMagic):recordHeader]
		n, err1 := strconv.ParseUint(string(h[:8]), 16, 32)
		sum, err2 := strconv.ParseUint(string(h[9:17]), 16, 32)
		body = body[recordHeader:]
		if err1 != nil || err2 != nil || h[8] != ' ' || int(n) != len(body) || crc32.Checksum(body, castagnoli) != uint32(sum) {
			return rec, "corrupt"
		}
	}
	if err := json.Unmarshal(body, &rec); err != nil {
		return rec, "corrupt"
	}
	if err := validRecord(rec); err != nil {
		return rec, "invalid"
	}
	return rec, ""
}

// encodeRecord renders rec in the journal's format.
func encodeRecord(rec Record) ([]byte, error) {
	if len(rec.Reason) > maxReasonBytes {
		rec.Reason = rec.Reason[:maxReasonBytes] + "..."
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxRecordBytes {
		return nil, fmt.Errorf("record of %d bytes over the %d-byte bound", len(b), MaxRecordBytes)
	}
	out := make([]byte, 0, recordHeader+len(b)+1)
	out = fmt.Appendf(out, "%s%08x %08x ", recordMagic, len(b), crc32.Checksum(b, castagnoli))
	out = append(out, b...)
	return append(out, '\n'), nil
}

// apply updates the open originals, and the slow loop's records, with
// one valid record.
func (j *Journal) apply(rec Record) {
	k := rec.Target.String()
	switch rec.Event {
	case EventOriginal:
		if _, ok := j.open[k]; ok {
			return // the first original stays
		}
		v, _ := rec.From.decode() // validated
		j.open[k] = Original{Target: rec.Target, Tenant: rec.Tenant, Value: v, At: rec.Time, PIDs: rec.PIDs, Identity: rec.identity()}
	case EventProcesses:
		if o, ok := j.open[k]; ok {
			o.PIDs, o.Identity = rec.PIDs, rec.identity()
			j.open[k] = o
		}
	case EventRestarted:
		if o, ok := j.open[k]; ok {
			o.Restart = &Restart{At: rec.Time, Kin: rec.PIDs, Others: rec.Others}
			j.open[k] = o
		}
	case string(OutcomeApplied), string(OutcomeRolledBack):
		if o, ok := j.open[k]; ok && rec.To != nil {
			o.Set, _ = rec.To.decode() // validated
			o.SetAt = rec.Time
			j.open[k] = o
		}
	case EventRestored:
		delete(j.open, k)
	}
	j.slow.note(rec)
}

// Path returns the journal's file.
func (j *Journal) Path() string { return j.path }

// Stats returns what recovery, compaction and writes did.
func (j *Journal) Stats() JournalStats {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.stats
	s.Bad = slices.Clone(j.stats.Bad)
	s.Dropped = make(map[string]int, len(j.stats.Dropped))
	for k, v := range j.stats.Dropped {
		s.Dropped[k] = v
	}
	return s
}

// Originals returns the originals not yet restored, oldest first.
func (j *Journal) Originals() []Original {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.originalsLocked()
}

func (j *Journal) originalsLocked() []Original {
	out := make([]Original, 0, len(j.open))
	for _, o := range j.open {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b Original) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Target.String(), b.Target.String()))
	})
	return out
}

// openOriginal returns the original of the target k the journal holds
// open, if any.
func (j *Journal) openOriginal(k string) (Original, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	o, ok := j.open[k]
	return o, ok
}

// Append writes rec and syncs the file. A record that is not valid, or
// that could not be written whole, is an error and changes nothing: a
// partial write is cut off again (where that fails, before the next
// record, see mend). The journal is compacted once it grows past its
// bound.
func (j *Journal) Append(rec Record) error {
	if err := validRecord(rec); err != nil {
		return fmt.Errorf("tuner journal %s: %w", j.path, err)
	}
	b, err := encodeRecord(rec)
	if err != nil {
		return fmt.Errorf("tuner journal %s: %w", j.path, err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.write(b); err != nil {
		j.stats.WriteError = err.Error()
		return err
	}
	j.apply(rec)
	j.records++
	j.stats.WriteError = ""
	if j.size > j.maxBytes && j.records > j.keptRecords() {
		if err := j.compactLocked(); err != nil {
			// The record is written (the journal can be written: the
			// next write says otherwise where it cannot); the file stays
			// long until a later compaction succeeds.
			j.stats.CompactError = err.Error()
		}
	}
	return nil
}

// writeFile and truncateFile are the journal's writes and cut-backs
// (tests replace them, to fail part way).
var (
	writeFile    = (*os.File).Write
	truncateFile = (*os.File).Truncate
)

// write appends b and syncs, the journal's directory too where the file's
// name may not be durable yet; on failure the file is cut back to its last
// whole record (where that fails, rewritten from the originals held, and
// where that fails too, mended before the next record).
func (j *Journal) write(b []byte) error {
	if err := j.usedAfterClose(); err != nil {
		return err
	}
	if err := j.writable(); err != nil {
		return fmt.Errorf("tuner journal %s: %w", j.path, err)
	}
	if err := j.relinkLocked(); err != nil {
		return err
	}
	if j.dirUnsynced {
		if err := syncDirectory(j.path); err != nil {
			return fmt.Errorf("tuner journal %s: syncing its directory: %w", j.path, err)
		}
		j.dirUnsynced = false
	}
	at, b, err := j.mend(b)
	if err != nil {
		return fmt.Errorf("tuner journal %s: %w", j.path, err)
	}
	_, err = writeFile(j.f, b)
	if err == nil {
		if err = j.f.Sync(); err != nil {
			err = fmt.Errorf("sync: %w", err)
		}
	}
	if err != nil {
		if cerr := truncateFile(j.f, j.size); cerr != nil {
			// What was written, whole or in part, stays at the end: a
			// whole record would be read as written at the next start,
			// though it was not. The file is rewritten from the originals
			// held, which do not hold it; where that fails too, the next
			// record mends the end first.
			j.torn = true
			if comp := j.compactLocked(); comp != nil {
				err = fmt.Errorf("%w (cutting it back: %v; rewriting it: %v)", err, cerr, comp)
			} else {
				err = fmt.Errorf("%w (cutting it back: %v; rewritten from the originals held)", err, cerr)
			}
		}
		return fmt.Errorf("tuner journal %s: %w", j.path, err)
	}
	j.size, j.torn = at+int64(len(b)), false
	j.stats.Size = j.size
	return nil
}

// mend readies the file for the record b where it may end past the last
// whole record (a failed write not cut back, a torn tail: b would join
// what is there on one line, dropped as corrupt when read): it cuts that
// off now or, where that fails again, starts b on a line of its own, so
// that only what is there is dropped. at is where b goes.
func (j *Journal) mend(b []byte) (at int64, _ []byte, err error) {
	if !j.torn {
		return j.size, b, nil
	}
	if truncateFile(j.f, j.size) == nil {
		j.torn = false
		return j.size, b, nil
	}
	end, err := j.f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, nil, fmt.Errorf("finding the file's end past its last whole record: %w", err)
	}
	var last [1]byte
	if end > j.size {
		if _, err := j.f.ReadAt(last[:], end-1); err != nil || last[0] != '\n' {
			b = append([]byte{'\n'}, b...)
		}
	}
	return end, b, nil
}

// Close closes the file, letting its lock go; every later use of the
// journal fails (a second Close does nothing).
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	f := j.f
	j.f = nil
	if f == nil {
		return nil
	}
	return f.Close()
}

// ErrJournalClosed is the error of a use of the journal after Close.
var ErrJournalClosed = errors.New("used after Close")

// usedAfterClose is the error of a use of the journal after Close.
func (j *Journal) usedAfterClose() error {
	if !j.closed {
		return nil
	}
	return fmt.Errorf("tuner journal %s: %w", j.path, ErrJournalClosed)
}
