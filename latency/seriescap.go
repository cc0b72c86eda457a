package latency

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// maxSeries bounds the distinct series of the families a source reads,
// counted as they are decoded (before matchers pick among them): what a
// scrape and its tracker cost follows the series, each a few hundred bytes
// decoded and kept until the next delta, whatever the page's bytes (49,990
// series of one bucket, 2.4 MiB of text under the default max_bytes, cost
// 74 MiB at the peak of a scrape and 11 MiB kept). A real page has tens to
// hundreds: a model's histogram is one series, Triton's counters a few per
// model and version. A source over it fails its scrape and changes nothing.
const maxSeries = 4096

// errTooManySeries is the error of a source over maxSeries.
var errTooManySeries = errors.New("series in the source's families")

// seriesSeed keys the series' hashes: one a process, so that no page can
// choose label sets whose hashes collide to pass as fewer series.
var seriesSeed = maphash.MakeSeed()

// seriesSet counts the distinct series of a source's families as the
// decoders meet them. A series is one label set of one family, its le and
// quantile labels left out (a histogram's buckets and a summary's
// quantiles are one series), its _bucket, _count and _sum lines one with
// the family's. Label sets are compared as written: the same labels in
// another order count twice, as no client writes them.
type seriesSet struct {
	seen    map[uint64]struct{}
	stopped bool // maxCounted were counted: there may be more
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

// protoFamily counts the series of a MetricFamily message named name,
// whose wire format countFields has checked: each metric (field 4), by its
// label pairs (field 1 of a metric: name 1, value 2).
func (s *seriesSet) protoFamily(name string, msg []byte, want map[string]bool) {
	base := familyBase(name, want)
	eachField(msg, func(num protowire.Number, v []byte) {
		if num != 4 {
			return
		}
		var h maphash.Hash
		h.SetSeed(seriesSeed)
		h.WriteString(base)
		h.WriteByte(0)
		eachField(v, func(num protowire.Number, pair []byte) {
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
			if ln := string(lname); ln == "le" || ln == "quantile" {
				return
			}
			writeToken(&h, lname, lvalue)
		})
		s.add(h.Sum64())
	})
}

// writeToken adds one label pair to a series' hash.
func writeToken(h *maphash.Hash, name, value []byte) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(name)))
	h.Write(n[:])
	h.Write(name)
	binary.LittleEndian.PutUint64(n[:], uint64(len(value)))
	h.Write(n[:])
	h.Write(value)
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
// quantile (a quoted metric name inside them, {"name",...}, is hashed as
// a pair of its own).
type lineSeries struct {
	line, tok maphash.Hash
	phase     int // 0: before '{'; 1: between the braces; 2: after '}'
	quoted    bool
	escaped   bool
	inValue   bool     // past the current pair's '='
	name      [10]byte // the first bytes of the pair's name
	nameLen   int
	skip      bool // the pair is le or quantile
	empty     bool // nothing of the pair hashed yet
}

// reset begins a line of the family base ("" where the line begins with
// its braces).
func (l *lineSeries) reset(base string) {
	l.line.SetSeed(seriesSeed)
	l.tok.SetSeed(seriesSeed)
	l.line.WriteString(base)
	l.line.WriteByte(0)
	l.phase, l.quoted, l.escaped = 0, false, false
	l.startPair()
}

func (l *lineSeries) startPair() {
	l.tok.Reset()
	l.inValue, l.nameLen, l.skip, l.empty = false, 0, false, true
}

// endPair adds the current pair, unless it is le or quantile.
func (l *lineSeries) endPair() {
	if !l.empty && !l.skip {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], l.tok.Sum64())
		l.line.Write(n[:])
	}
	l.startPair()
}

// feed reads the next piece of the line.
func (l *lineSeries) feed(piece []byte) {
	for _, c := range piece {
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
		case c == '"':
			l.quoted = true
		case c == ' ' || c == '\t':
			continue
		case c == '=':
			l.inValue = true
			n := string(l.name[:min(l.nameLen, len(l.name))])
			l.skip = l.nameLen <= len(l.name) && (n == "le" || n == `"le"` || n == "quantile" || n == `"quantile"`)
		case c == ',' || c == '}':
			l.endPair()
			if c == '}' {
				l.phase = 2
			}
			continue
		}
		if !l.inValue {
			if l.nameLen < len(l.name) {
				l.name[l.nameLen] = c
			}
			l.nameLen++
		}
		l.tok.WriteByte(c)
		l.empty = false
	}
}

// sum is the line's series, once the line is read.
func (l *lineSeries) sum() uint64 {
	if l.phase == 1 {
		l.endPair() // a line cut short: what it held
	}
	return l.line.Sum64()
}
