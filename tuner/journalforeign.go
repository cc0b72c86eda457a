package tuner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// notJournal returns an error when f, the file at path, is not a tuner
// journal: it has a line that is not blank and none that is or begins
// like one of the journal's records (recordMagic; or a JSON object alone
// on its line, the earlier format, torn or not at the file's end). Such a file is another file named by
// mistake (a tenants file, /etc/passwd): read as a journal, each of its
// lines would be dropped as corrupt and the file cut to nothing by the
// torn tail's cut and the compaction, so it is refused and left as it is.
// A journal that holds no whole record (a crash in its first write, a
// record whose every line a disk error spoiled) keeps a line that begins
// with the magic, or a prefix of it at its end, and is read as before.
// f is read from its start with ReadAt: its offset does not move.
func notJournal(f *os.File, path string) error {
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, 1<<62), recordHeader+MaxRecordBytes+1)
	first, lineNo := 0, 0
	var firstText []byte
	for {
		line, err := br.ReadSlice('\n')
		long := errors.Is(err, bufio.ErrBufferFull)
		if err != nil && !long && !errors.Is(err, io.EOF) {
			return fmt.Errorf("tuner journal %s: %w", path, err)
		}
		if len(line) == 0 {
			break // the end
		}
		lineNo++
		last := errors.Is(err, io.EOF)
		body := bytes.TrimRight(line, "\r\n")
		switch {
		case len(bytes.TrimSpace(body)) == 0:
		case bytes.HasPrefix(body, []byte(recordMagic)),
			last && len(body) < len(recordMagic) && bytes.HasPrefix([]byte(recordMagic), body),
			body[0] == '{' && (last || !long && json.Valid(body)):
			return nil
		case first == 0:
			first, firstText = lineNo, bytes.Clone(body[:min(len(body), 40)])
		}
		for errors.Is(err, bufio.ErrBufferFull) { // the rest of a long line
			_, err = br.ReadSlice('\n')
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return fmt.Errorf("tuner journal %s: %w", path, err)
			}
			break
		}
	}
	if first == 0 {
		return nil // empty, or blank lines only
	}
	return notJournalError{fmt.Errorf("tuner journal %s: not a tuner journal, left as it is: no line of it is a journal record (line %d begins %q, a record begins %q): name a file of its own for --tuner.journal (one that does not exist yet is created)",
		path, first, firstText, recordMagic)}
}

// notJournalError is notJournal's finding that a file is not a journal
// (not an error reading it).
type notJournalError struct{ error }

func (e notJournalError) Unwrap() error { return e.error }

// foreignFile is a file found at the journal's path that is not a journal
// (relinkLocked), and the error it made: the same file, of the same size,
// modification time and status change time (changeTime: a rewrite that
// puts the modification time back, cp -p or touch -r, still changes it),
// is not read again (each round and each write would read it in full),
// until it changes.
type foreignFile struct {
	fi  os.FileInfo
	err error
}

// same reports whether fi is still the file f was found as.
func (f *foreignFile) same(fi os.FileInfo) bool {
	return f != nil && os.SameFile(f.fi, fi) && f.fi.Size() == fi.Size() && f.fi.ModTime().Equal(fi.ModTime()) &&
		changeTime(f.fi).Equal(changeTime(fi))
}
