package tuner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A record dropped at open (corrupt, invalid, oversize) may have held an
// original no start restores: the operator checks that setting by hand,
// and so needs to know where the record was and, where its JSON still
// reads, which setting it names. The open's compaction removes it from
// the file, so what the open found is all there is to go on.

// maxBadNamed bounds the dropped records named in the stats: a journal
// garbled throughout names its first ones.
const maxBadNamed = 16

// BadRecord is where a record dropped at open was, and why.
type BadRecord struct {
	Line   int    // its line in the file, from 1
	Offset int64  // the byte its line begins at, from 0
	Reason string // corrupt, invalid or oversize
	// Detail says what is wrong with it and, where its JSON reads, the
	// event and target it names (as the record says: not to be trusted).
	Detail string
}

// String is the record's place and what is wrong with it.
func (b BadRecord) String() string {
	return fmt.Sprintf("line %d (byte %d): %s: %s", b.Line, b.Offset, b.Reason, b.Detail)
}

// badDetail says what is wrong with line (with its newline), dropped for
// why: the validation's error of an invalid record, the framing of a
// corrupt one, and the event and target its JSON names, where it reads.
func badDetail(line []byte, why string) string {
	if why == "oversize" {
		return fmt.Sprintf("longer than the %d-byte bound", MaxRecordBytes)
	}
	body := bytes.TrimSuffix(line, []byte("\n"))
	detail := "not a record"
	switch {
	case len(body) > 0 && body[0] == '{':
		detail = "JSON that does not read"
	case len(body) >= recordHeader && string(body[:len(recordMagic)]) == recordMagic:
		body = body[recordHeader:]
		detail = "its length or checksum does not match its JSON"
	case len(body) >= len(recordMagic) && body[0] == 'J' && body[2] == ' ':
		detail = fmt.Sprintf("a record of format %q, not %q (written by another version of the exporter?)", body[:2], recordMagic[:2])
		if i := bytes.IndexByte(body, '{'); i >= 0 {
			body = body[i:]
		}
	default:
		return fmt.Sprintf("%s: %q", detail, prefix(body, 40))
	}
	var rec Record
	if err := json.Unmarshal(body, &rec); err != nil {
		return detail
	}
	if why == "invalid" {
		detail = prefix([]byte(printable(validRecord(rec).Error())), 300) // (it may quote the record's text)
	}
	return fmt.Sprintf("%s; it reads as %q of %q", detail, prefix([]byte(rec.Event), 40), prefix([]byte(rec.Target.String()), 300))
}

// printable is s with what is not printable as '?'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return '?'
	}, s)
}

// prefix is b's first n bytes at most, cut at a rune's start.
func prefix(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n]) + "..."
}
