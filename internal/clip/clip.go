// Package clip makes text from outside the exporter (a program's output, a
// page, an API server's message, a parser's error quoting a body) fit for
// an error message or a log line: control characters and invalid bytes
// escaped, cut to a length, saying how much was cut.
package clip

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text returns s with control characters and invalid UTF-8 escaped (Go's
// escapes: \n, \x00, \u2028), cut once limit bytes are written and ending
// with how many bytes of s were left out. Printable text, spaces and
// quotes pass as they are. A cut falls between characters, never inside
// an escape.
func Text(s string, limit int) string { return text(s, len(s), limit) }

// Bytes is Text of b, reading no more of b than it shows: a parser's error
// may quote the rest of a large page.
func Bytes(b []byte, limit int) string { return Head(b, len(b), limit) }

// Head is Text of a text of n bytes that begins with head, for a text too
// large to build whole: head need hold only its first limit+utf8.UTFMax
// bytes (or all of it, when shorter), and no more of it is read.
func Head(head []byte, n, limit int) string {
	// every byte read writes at least one, so the cut comes before
	// limit+UTFMax bytes are read
	return text(string(head[:min(len(head), max(limit, 0)+utf8.UTFMax)]), n, limit)
}

// text is Text of s, the first bytes of a text of n bytes.
func text(s string, n, limit int) string {
	var b strings.Builder
	b.Grow(min(len(s), limit) + 24)
	for i, r := range s {
		if b.Len() >= limit {
			fmt.Fprintf(&b, "... (%d more bytes)", n-i)
			break
		}
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"): // an invalid byte, not U+FFFD itself
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r == ' ' || unicode.IsGraphic(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}
