package latency

import (
	"errors"
	"fmt"
)

// A text line may name its metric inside its braces, quoted, as a name
// outside the legacy characters must be: {"name",label="value",...} (the
// text parser takes the one quoted token among the braces that is not
// followed by '=', wherever it stands). The text filter reads that name
// to pass on, count and match such a line as it does a line of the bare
// name: only the source's families, the series its matchers pick.

// errQuotedNameCut is the error of a line that begins with its braces
// and whose first piece (64 KiB) ends before they name its metric.
var errQuotedNameCut = errors.New("a line beginning with '{' names no metric in its first 64 KiB")

// quotedFamily is the metric name of the sample line t that begins with
// its braces (found: false where its braces close without one, or the
// line ends unclosed: a line the parser would refuse, of no family the
// source reads). Where t is the first piece of a line it does not end,
// and ends before the name, the filter fails with errQuotedNameCut.
func (f *textFilter) quotedFamily(t []byte) (name []byte, found bool) {
	name, found, cut := quotedName(t)
	if cut && f.cut {
		f.err = fmt.Errorf("parse: line %d: %w", f.lineNo, errQuotedNameCut)
	}
	return name, found
}

// quotedName reads the braces that t begins with: the quoted token not
// followed by '=', unescaped (found), or none where they close first;
// cut where t ends before either.
func quotedName(t []byte) (name []byte, found, cut bool) {
	i := 1 // past '{'
	for {
		if i = skipBlanks(t, i); i >= len(t) {
			return nil, false, true
		}
		start, quoted := i, t[i] == '"'
		switch {
		case t[i] == '}':
			return nil, false, false
		case quoted:
			if i = quotedEnd(t, i); i < 0 {
				return nil, false, true
			}
		default: // a bare label name
			for i < len(t) && t[i] != '=' && t[i] != ',' && t[i] != '}' && t[i] != ' ' && t[i] != '\t' {
				i++
			}
		}
		tok := t[start:i]
		if i = skipBlanks(t, i); i >= len(t) {
			return nil, false, true
		}
		switch {
		case t[i] != '=' && quoted:
			return unescapeName(tok[1 : len(tok)-1]), true, false
		case t[i] == ',' && len(tok) == 0:
			i++ // an empty pair: the parser's to refuse
			continue
		case t[i] != '=':
			return nil, false, false // a bare token without a value: malformed
		}
		// a label's value, then ',' or '}'
		if i = skipBlanks(t, i+1); i >= len(t) {
			return nil, false, true
		}
		if t[i] != '"' {
			return nil, false, false
		}
		if i = quotedEnd(t, i); i < 0 {
			return nil, false, true
		}
		if i = skipBlanks(t, i); i >= len(t) {
			return nil, false, true
		}
		if t[i] != ',' {
			return nil, false, false // '}': no name, or malformed
		}
		i++
	}
}

// skipBlanks is the index of the first byte of t from i that is not a
// space or a tab.
func skipBlanks(t []byte, i int) int {
	for i < len(t) && (t[i] == ' ' || t[i] == '\t') {
		i++
	}
	return i
}

// quotedEnd is the index past the closing quote of the quoted string
// that begins at t[i], -1 where t ends first.
func quotedEnd(t []byte, i int) int {
	for i++; i < len(t); i++ {
		switch t[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// unescapeName is a quoted name's text without its escapes (\\, \" and
// \n; another escape, which the parser refuses, kept as written).
func unescapeName(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+1 < len(b) {
			switch b[i+1] {
			case '\\', '"':
				out = append(out, b[i+1])
				i++
				continue
			case 'n':
				out = append(out, '\n')
				i++
				continue
			}
		}
		out = append(out, b[i])
	}
	return out
}
