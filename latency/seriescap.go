package latency

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// maxSeries bounds the distinct series of the families a source reads
// that its matchers pick (all of them without matchers), counted as they
// are decoded: what a scrape and its tracker cost follows the series kept,
// each a few hundred bytes decoded and kept until the next delta, whatever
// the page's bytes (49,990 series of one bucket, 2.4 MiB of text under the
// default max_bytes, cost 74 MiB at the peak of a scrape and 11 MiB kept).
// The series the matchers pass over are neither counted nor kept: each is
// read once as it streams past and dropped (the text filter passes on
// none of its lines, the protobuf decoder cuts it out of its message), so
// a tenant of one model on a server shared by thousands reads its own. A
// real source has tens to hundreds: a model's histogram is one series,
// Triton's counters a few per model and version. A source over it fails
// its scrape and changes nothing.
const maxSeries = 4096

// errTooManySeries is the error of a source over maxSeries.
var errTooManySeries = errors.New("series matching the source in its families")

// seriesSeed keys the series' hashes: one a process, so that no page can
// choose label sets whose hashes collide to pass as fewer series.
var seriesSeed = maphash.MakeSeed()

// seriesSet counts the distinct series of a source's families as the
// decoders meet them. A series is one label set of one family, its le and
// quantile labels left out (a histogram's buckets and a summary's
// quantiles are one series), its _bucket, _count and _sum lines one with
// the family's. A label set is its pairs in any order (each pair hashed
// alone, the pairs' hashes sorted), a quoted label name as the bare one,
// and a line of a quoted metric name, {"name",...}, is one of the family
// so named: written otherwise, a series is not counted twice.
type seriesSet struct {
	seen    map[uint64]struct{}
	stopped bool     // maxCounted were counted: there may be more
	pairs   []uint64 // the current series' pairs' hashes (protoSeries)
}

// maxCounted bounds the series counted, past maxSeries, to say how many
// a page has: as many as the lines of a source's families may be.
const maxCounted = maxTextLines

func (s *seriesSet) add(key uint64) {
	if s.seen == nil {
		s.seen = map[uint64]struct{}{}
	}
	if len(s.seen) >= maxCounted {
		s.stopped = true
		return
	}
	s.seen[key] = struct{}{}
}

// over says whether the series counted are more than a source may have.
func (s *seriesSet) over() bool { return len(s.seen) > maxSeries }

// err is the error of a source over maxSeries: with the number of its
// series where all were counted (complete, and not stopped), else with
// the number counted.
func (s *seriesSet) err(complete bool) error {
	if complete && !s.stopped {
		return fmt.Errorf("parse: %d %w; a source may have at most %d", len(s.seen), errTooManySeries, maxSeries)
	}
	return fmt.Errorf("parse: more than %d %w; a source may have at most %d", len(s.seen), errTooManySeries, maxSeries)
}

// familyBase is the family a line or message named name belongs to for
// counting series: name less a _bucket, _count or _sum suffix where the
// source reads the family so named.
func familyBase(name string, want map[string]bool) string {
	for _, suf := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suf); ok && base != "" && want[base] {
			return base
		}
	}
	return name
}

// protoFamily counts the series of a MetricFamily message named name
// that match (m nil: all of them; the start time's, all of them) and
// cuts the others out of msg, in place: it returns msg less the metrics
// (field 4) that do not match, each metric read by its label pairs (field
// 1 of a metric: name 1, value 2). What is left is checked and decoded
// as the whole message was (countFields: a broken field is its error).
func (s *seriesSet) protoFamily(name string, msg []byte, want map[string]bool, m *seriesMatch) []byte {
	base := familyBase(name, want)
	if base == startTimeMetric {
		m = nil
	}
	out := msg[:0]
	for rest := msg; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 {
			return append(out, rest...)
		}
		size := protowire.ConsumeFieldValue(num, typ, rest[n:])
		if size < 0 {
			return append(out, rest...)
		}
		field := rest[:n+size]
		rest = rest[n+size:]
		if num != 4 || typ != protowire.BytesType {
			out = append(out, field...) // never past rest: a copy down
			continue
		}
		v, _ := protowire.ConsumeBytes(field[n:])
		key, ok := s.protoSeries(base, v, m)
		if !ok {
			continue
		}
		s.add(key)
		out = append(out, field...)
	}
	return out
}

// protoSeries is the series of a metric message of the family base, and
// whether it matches m.
func (s *seriesSet) protoSeries(base string, metric []byte, m *seriesMatch) (uint64, bool) {
	var h maphash.Hash
	h.SetSeed(seriesSeed)
	m.begin()
	s.pairs = s.pairs[:0]
	eachField(metric, func(num protowire.Number, pair []byte) {
		if num != 1 {
			return
		}
		var lname, lvalue []byte
		eachField(pair, func(num protowire.Number, b []byte) {
			switch num {
			case 1:
				lname = b
			case 2:
				lvalue = b
			}
		})
		if i := m.label(lname); i >= 0 {
			m.equal[i] = string(lvalue) == m.values[i]
		}
		if ln := string(lname); ln == "le" || ln == "quantile" {
			return
		}
		h.Reset()
		writeToken(&h, lname, lvalue)
		s.pairs = append(s.pairs, h.Sum64())
	})
	return seriesHash(base, s.pairs), m.matched()
}

// writeToken adds one label pair to a pair's hash.
func writeToken(h *maphash.Hash, name, value []byte) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(name)))
	h.Write(n[:])
	h.Write(name)
	binary.LittleEndian.PutUint64(n[:], uint64(len(value)))
	h.Write(n[:])
	h.Write(value)
}

// seriesHash is the series of the family base whose label pairs hash to
// pairs, in any order: it sorts pairs.
func seriesHash(base string, pairs []uint64) uint64 {
	slices.Sort(pairs)
	var h maphash.Hash
	h.SetSeed(seriesSeed)
	h.WriteString(base)
	h.WriteByte(0)
	var n [8]byte
	for _, p := range pairs {
		binary.LittleEndian.PutUint64(n[:], p)
		h.Write(n[:])
	}
	return h.Sum64()
}

// eachField calls f with each length-delimited field of msg (the others
// skipped); msg's wire format is known good.
func eachField(msg []byte, f func(protowire.Number, []byte)) {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return
		}
		msg = msg[n:]
		if typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(msg)
			if n < 0 {
				return
			}
			f(num, v)
			msg = msg[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, msg)
		if n < 0 {
			return
		}
		msg = msg[n:]
	}
}

// lineSeries hashes the series of one text sample line, read in pieces:
// the family's name, then each label pair between the braces but le and
// quantile, a quoted name without its quotes (a quoted metric name among
// them, {"name",...}, a pair without '=', is the family's, not hashed);
// and checks the pairs against the source's matchers.
type lineSeries struct {
	base    string
	tok     maphash.Hash
	pairs   []uint64     // the pairs' hashes so far
	match   *seriesMatch // nil: the line matches
	phase   int          // 0: before '{'; 1: between the braces; 2: after '}'
	quoted  bool
	escaped bool
	inValue bool   // past the current pair's '='
	name    []byte // the first bytes of the pair's name, at most nameMax
	nameLen int
	skip    bool // the pair is le or quantile
	empty   bool // nothing of the pair read yet
	// label is the matcher whose label the pair is (-1: none), value the
	// bytes of its value read and equal to the matcher's (-1: unequal).
	label, value int
}

// reset begins a line of the family base ("" where the line begins with
// its braces), checked against m (nil: not checked).
func (l *lineSeries) reset(base string, m *seriesMatch) {
	l.base = base
	l.pairs = l.pairs[:0]
	l.tok.SetSeed(seriesSeed)
	l.match = m
	m.begin()
	l.phase, l.quoted, l.escaped = 0, false, false
	l.startPair()
}

func (l *lineSeries) startPair() {
	l.tok.Reset()
	l.inValue, l.nameLen, l.skip, l.empty = false, 0, false, true
	l.name = l.name[:0]
	l.label = -1
}

// endPair adds the current pair, unless it is le or quantile, or no
// pair (a metric name, without '=').
func (l *lineSeries) endPair() {
	if !l.empty && !l.skip && l.inValue {
		l.pairs = append(l.pairs, l.tok.Sum64())
	}
	if l.label >= 0 {
		l.match.equal[l.label] = l.value == len(l.match.tokens[l.label])
	}
	l.startPair()
}

// nameMax is how much of a pair's name is kept: enough for "quantile"
// and for the matchers' names.
func (l *lineSeries) nameMax() int {
	if l.match != nil {
		return max(len(`"quantile"`), l.match.maxName)
	}
	return len(`"quantile"`)
}

// feed reads the next piece of the line.
func (l *lineSeries) feed(piece []byte) {
	for _, c := range piece {
		sep, hash := false, true
		switch {
		case l.phase == 0:
			if c == '{' {
				l.phase = 1
			}
			continue
		case l.phase == 2:
			return
		case l.escaped:
			l.escaped = false
		case l.quoted:
			l.escaped = c == '\\'
			l.quoted = c != '"'
			hash = l.quoted || l.inValue // a quoted name's closing quote
		case c == '"':
			l.quoted = true
			hash = l.inValue // a quoted name's opening quote
		case c == ' ' || c == '\t':
			continue
		case c == '=' && !l.inValue:
			l.inValue, sep = true, true
			l.pairNamed()
		case c == ',' || c == '}':
			l.endPair()
			if c == '}' {
				l.phase = 2
			}
			continue
		}
		switch {
		case !l.inValue:
			if len(l.name) < l.nameMax() {
				l.name = append(l.name, c)
			}
			l.nameLen++
		case sep:
		case l.label >= 0 && l.value >= 0:
			if tok := l.match.tokens[l.label]; l.value < len(tok) && tok[l.value] == c {
				l.value++
			} else {
				l.value = -1
			}
		}
		if hash {
			l.tok.WriteByte(c)
		}
		l.empty = false
	}
}

// pairNamed reads the pair's name, its '=' met: le or quantile, or a
// matcher's label.
func (l *lineSeries) pairNamed() {
	if l.nameLen > len(l.name) {
		return // longer than any of them
	}
	n := string(l.name)
	l.skip = n == "le" || n == `"le"` || n == "quantile" || n == `"quantile"`
	if len(n) >= 2 && n[0] == '"' && n[len(n)-1] == '"' {
		n = n[1 : len(n)-1]
	}
	l.label, l.value = l.match.label([]byte(n)), 0
}

// end ends the line where it is cut short inside its braces: the pair
// read so far is its last.
func (l *lineSeries) end() {
	if l.phase == 1 {
		l.endPair()
		l.phase = 2
	}
}

// decided says whether the line's match is known from what was read:
// its braces closed, or the line ended (ended). A line's first piece
// (64 KiB) may not hold its labels whole: undecided, it is taken as
// matching (counted and kept).
func (l *lineSeries) matches(ended bool) bool {
	if ended {
		l.end()
	}
	if l.match == nil || l.phase != 2 && !ended {
		return true
	}
	return l.match.matched()
}

// sum is the line's series, once the line is read.
func (l *lineSeries) sum() uint64 {
	l.end()
	return seriesHash(l.base, l.pairs)
}
