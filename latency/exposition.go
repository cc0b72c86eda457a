package latency

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
)

// Decoding limits. The body itself is at most max_bytes; these bound what
// decoding it may cost beyond that, whatever the body claims: only the
// families a source reads are decoded, and those may hold at most
// maxElements protobuf fields (a series, a label, a bucket: each costs a
// few dozen bytes decoded from as few as two) or maxTextLines text lines.
const (
	maxElements  = 250_000
	maxTextLines = 100_000
	// maxWantedBytes bounds the bytes of the source's own families that
	// are decoded, whatever max_bytes allows: their decoded form costs a
	// few times their size, and a real histogram family is a few KiB per
	// model (a thousand models of 30 buckets: about 6 MiB).
	maxWantedBytes = 16 << 20
	// maxLabels bounds the label pairs of one series (one text line):
	// the text parser checks a line's label names for duplicates anew
	// after each label, which costs the square of their number (a line
	// of 16,000 labels, 150 KB, took 22 s), and so costs a body of such
	// lines time in proportion to its size times this limit. Real series
	// have a handful.
	maxLabels = 32
)

// errTooMany is returned when a body holds more than the limits above.
var errTooMany = errors.New("too many series, labels or buckets in the source's families")

// errTooManyLabels is returned when a text line holds more than maxLabels
// label pairs.
var errTooManyLabels = fmt.Errorf("more than %d labels", maxLabels)

// errWantedTooLarge is returned when the source's families are over
// maxWantedBytes.
var errWantedTooLarge = fmt.Errorf("parse: the source's families are larger than %d MiB", maxWantedBytes>>20)

// parseExposition decodes the families named in names (all of them when
// names is nil) from a /metrics body in the given format: delimited
// protobuf, or text for any other. See decodeExposition.
func parseExposition(data []byte, format expfmt.Format, names []string) (map[string]*dto.MetricFamily, error) {
	return decodeExposition(bytes.NewReader(data), int64(len(data)), format, names, nil)
}

// decodeExposition decodes the families named in names (all of them when
// names is nil) from a /metrics body of at most size bytes, read as a
// stream: the body is never held whole. Of the families named, only the
// series the matchers pick are decoded, counted against maxSeries (all
// of them without matchers): a family none of whose series match is
// decoded empty, or with one series of its own (text), whom extract's
// matchers pass over; process_start_time_seconds is decoded whole. Text is filtered line by line
// before the parser sees it, so only the wanted families' lines are
// decoded; protobuf is read one delimited message at a time, each length
// prefix checked against what size leaves before anything is allocated for
// it. Memory thus stays within the largest single message (protobuf) or a
// read buffer (text), plus the wanted families decoded.
func decodeExposition(r io.Reader, size int64, format expfmt.Format, names []string, matchers map[string]string) (map[string]*dto.MetricFamily, error) {
	var want map[string]bool
	if names != nil {
		want = map[string]bool{}
		for _, n := range names {
			want[n] = true
		}
	}
	m := newSeriesMatch(matchers)
	if want == nil {
		m = nil // all of every family
	}
	if format != "" && format.FormatType() == expfmt.TypeProtoDelim {
		return decodeProtoDelim(r, size, want, m)
	}
	return decodeText(r, want, m)
}

// decodeProtoDelim decodes varint-length-delimited MetricFamily messages.
func decodeProtoDelim(r io.Reader, size int64, want map[string]bool, match *seriesMatch) (map[string]*dto.MetricFamily, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	out := map[string]*dto.MetricFamily{}
	budget := maxElements
	desc := (&dto.MetricFamily{}).ProtoReflect().Descriptor()
	var buf []byte // one message at a time, reused
	var wanted int64
	var series seriesSet
	for off := int64(0); ; {
		head, err := br.Peek(binary.MaxVarintLen64)
		if len(head) == 0 {
			if errors.Is(err, io.EOF) && series.over() {
				return nil, series.err(true)
			}
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		msgSize, n := protowire.ConsumeVarint(head)
		if n < 0 {
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, fmt.Errorf("parse: protobuf length prefix at byte %d: %w", off, protowire.ParseError(n))
		}
		_, _ = br.Discard(n)
		start := off
		off += int64(n)
		if rest := uint64(size - off); msgSize > rest {
			// More than the body may hold: count what follows (reading
			// no further than the size limit) to say so.
			follow, err := io.Copy(io.Discard, br)
			if err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("parse: protobuf message at byte %d claims %d bytes, but only %d follow (truncated or not delimited protobuf)", start, msgSize, follow)
		}
		if uint64(cap(buf)) < msgSize {
			buf = make([]byte, msgSize)
		}
		msg := buf[:msgSize]
		if got, err := io.ReadFull(br, msg); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("parse: protobuf message at byte %d claims %d bytes, but only %d follow (truncated or not delimited protobuf)", start, msgSize, got)
			}
			return nil, err
		}
		off += int64(msgSize)
		name, err := familyName(msg)
		if err != nil {
			return nil, fmt.Errorf("parse: protobuf message at byte %d: %w", off-int64(msgSize), err)
		}
		if want != nil && !want[name] {
			continue
		}
		if want != nil {
			msg = series.protoFamily(name, msg, want, match) // the matching series
		}
		if series.over() {
			continue // counted on, decoded no more
		}
		if wanted += int64(len(msg)); want != nil && wanted > maxWantedBytes {
			return nil, errWantedTooLarge
		}
		if err := countFields(msg, desc, &budget, 0); err != nil {
			return nil, fmt.Errorf("parse: family %s: %w", clip.Text(name, maxQuoted), err)
		}
		mf := &dto.MetricFamily{}
		if err := proto.Unmarshal(msg, mf); err != nil {
			return nil, fmt.Errorf("parse: family %s: %w", clip.Text(name, maxQuoted), err)
		}
		merge(out, mf)
	}
}

// familyName reads a MetricFamily's name (field 1) without decoding the
// rest; it also checks that the message is well formed at its top level.
func familyName(msg []byte) (string, error) {
	name := ""
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return "", protowire.ParseError(n)
		}
		msg = msg[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(msg)
			if n < 0 {
				return "", protowire.ParseError(n)
			}
			name = string(v)
			msg = msg[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, msg)
		if n < 0 {
			return "", protowire.ParseError(n)
		}
		msg = msg[n:]
	}
	return name, nil
}

// countFields walks msg as a message of type md, charging one unit of
// budget per field (and per element of a packed field), down into the
// nested messages, and fails once the budget is spent or the wire format
// is broken.
func countFields(msg []byte, md protoreflect.MessageDescriptor, budget *int, depth int) error {
	if depth > 8 {
		return errors.New("messages nested too deep")
	}
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return protowire.ParseError(n)
		}
		msg = msg[n:]
		n = protowire.ConsumeFieldValue(num, typ, msg)
		if n < 0 {
			return protowire.ParseError(n)
		}
		val := msg[:n]
		msg = msg[n:]
		*budget--
		if typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(val)
			fd := md.Fields().ByNumber(num)
			switch {
			case fd == nil:
			case fd.Kind() == protoreflect.MessageKind:
				if err := countFields(v, fd.Message(), budget, depth+1); err != nil {
					return err
				}
			case fd.IsList():
				*budget -= len(v) / 8 // packed scalars: at most 8 bytes decoded per byte
			}
		}
		if *budget < 0 {
			return errTooMany
		}
	}
	return nil
}

// decodeText decodes the text format, handing the parser only the lines
// of wanted families (name, name_bucket, name_count, name_sum and their
// HELP and TYPE lines), at most maxTextLines of them; of
// process_start_time_seconds its first block alone, the family dropped
// where a second comes (textFilter.startTwice).
func decodeText(r io.Reader, want map[string]bool, match *seriesMatch) (map[string]*dto.MetricFamily, error) {
	in := r
	var tf *textFilter
	if want != nil {
		tf = &textFilter{br: bufio.NewReaderSize(r, 64<<10), want: want, match: match}
		in = tf
	}
	dec := expfmt.NewDecoder(in, expfmt.NewFormat(expfmt.TypeTextPlain))
	out := map[string]*dto.MetricFamily{}
	for {
		mf := &dto.MetricFamily{}
		err := dec.Decode(mf)
		if tf != nil && tf.err != nil && !errors.Is(tf.err, io.EOF) {
			return nil, tf.err // the filter's own error, or the body's
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe expfmt.ParseError
			if tf != nil && errors.As(err, &pe) {
				pe.Line = tf.bodyLine(pe.Line) // the parser counts the lines passed on
				err = pe
			}
			return nil, fmt.Errorf("parse: %s", clip.Text(err.Error(), maxQuoted))
		}
		merge(out, mf)
	}
	if tf != nil && tf.startTwice {
		delete(out, startTimeMetric) // ambiguous: no start time
	}
	return out, nil
}

// textFilter reads a text exposition and passes on only the lines of the
// wanted families, a line at a time without holding it whole: a line
// longer than the read buffer goes through in pieces, or is skipped
// piece by piece.
type textFilter struct {
	br      *bufio.Reader
	want    map[string]bool
	lines   int
	bytes   int    // passed on so far
	pending []byte // what is left to pass on of the current piece
	inLine  bool   // the last piece did not end its line
	keep    bool   // the current line is passed on
	scratch []byte
	err     error // sticky: the body's error, too many lines, or io.EOF
	// shifts maps the lines passed on back to the body's: from each
	// shift's line passed on, the body's line number is shift.by more,
	// one entry per run of lines passed on together.
	shifts []lineShift
	// process_start_time_seconds: only its first block is passed on. A
	// second (two registries' texts concatenated, each with its process
	// collector) would fail the parser ("second TYPE line") and names no
	// one process: startTwice then drops the start time (decodeText).
	startBlock  int // 0: none yet; 1: in the first; 2: the first ended
	startHelp   bool
	startType   bool
	startSample bool // a sample of the first block passed on
	startTwice  bool

	// series counts the series of the lines passed on (seriesSet); past
	// maxSeries (over), the lines are counted on to the end of the body,
	// not passed on. counting: the current line's series is being read
	// by lineSeries.
	series     seriesSet
	lineSeries lineSeries
	counting   bool
	over       bool
	// match checks a sample line against the source's matchers (nil: all
	// match), on the line's first piece: a line that does not match is
	// neither passed on nor counted, but the first of each name
	// (witnessed), so that its family is decoded though none of its
	// series match, as it would be whole (extract tells a family absent
	// from one without the tenant's series). At most one line for each
	// name the source reads.
	match     *seriesMatch
	witnessed map[string]bool

	// The current line, read in pieces: its number in the body, whether
	// its first piece does not end it, and, for a sample line passed on,
	// its label pairs so far (each an '=' outside quotes) and where the
	// scan stands in a quoted string.
	lineNo  int
	cut     bool
	sample  bool
	name    []byte // the line's metric name, as its first piece holds it
	labels  int
	quoted  bool
	escaped bool
}

func (f *textFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		piece, err := f.br.ReadSlice('\n')
		if len(piece) > 0 {
			if !f.inLine {
				f.lineNo++
				f.labels, f.quoted, f.escaped = 0, false, false
				f.cut = piece[len(piece)-1] != '\n' && (err == nil || errors.Is(err, bufio.ErrBufferFull))
				f.keep = f.wanted(piece) // and the name of a sample line
				if f.err != nil {
					return 0, f.err
				}
				t := bytes.TrimLeft(piece, " \t")
				f.sample = f.keep && len(t) > 0 && t[0] != '#'
				if f.sample {
					f.countSeries()
					f.lineSeries.feed(piece)
					ended := piece[len(piece)-1] == '\n' || err != nil && !errors.Is(err, bufio.ErrBufferFull)
					if !f.lineSeries.matches(ended) {
						f.counting = false
						f.keep = f.witness()
						f.sample = f.keep
					}
				}
				if f.over { // past maxSeries: counted, no longer passed on
					f.keep, f.sample = false, false
				}
				if f.keep || f.counting {
					if f.lines++; f.lines > maxTextLines {
						f.err = fmt.Errorf("parse: more than %d lines of the source's families", maxTextLines)
						if f.over {
							f.err = f.series.err(false)
						}
						return 0, f.err
					}
				}
				if by := f.lineNo - f.lines; f.keep && (len(f.shifts) == 0 || f.shifts[len(f.shifts)-1].by != by) {
					f.shifts = append(f.shifts, lineShift{from: f.lines, by: by})
				}
			}
			if f.counting && f.inLine {
				f.lineSeries.feed(piece) // the first piece was fed above
			}
			if f.keep {
				if f.bytes += len(piece); f.bytes > maxWantedBytes {
					f.err = errWantedTooLarge
					return 0, f.err
				}
			}
			if f.sample && f.countLabels(piece) > maxLabels {
				f.err = fmt.Errorf("parse: line %d: series %s has %w", f.lineNo, clip.Text(string(f.name), maxQuoted), errTooManyLabels)
				return 0, f.err
			}
			f.inLine = piece[len(piece)-1] != '\n'
			if !f.inLine {
				f.seriesCounted()
			}
			if f.keep {
				f.pending = piece
				if bytes.HasSuffix(piece, []byte("\r\n")) { // as a line scanner would read it
					f.scratch = append(append(f.scratch[:0], piece[:len(piece)-2]...), '\n')
					f.pending = f.scratch
				}
			}
		}
		switch {
		case err == nil || errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			if f.inLine && f.keep { // the last line, without its newline
				last := bytes.TrimSuffix(f.pending, []byte("\r")) // as a line scanner would read it
				f.pending = append(last[:len(last):len(last)], '\n')
			}
			f.seriesCounted()
			f.inLine, f.err = false, io.EOF
			if f.over {
				f.err = f.series.err(true)
			}
		default:
			f.err = err
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// countSeries begins reading the series of the current sample line, of
// a family the source reads (f.name).
func (f *textFilter) countSeries() {
	base, m := familyBase(string(f.name), f.want), f.match
	if base == startTimeMetric {
		m = nil // the start time whole
	}
	f.lineSeries.reset(base, m)
	f.counting = true
}

// witness says whether the current line, which does not match, is passed
// on all the same: the first of its name.
func (f *textFilter) witness() bool {
	if f.witnessed[string(f.name)] {
		return false
	}
	if f.witnessed == nil {
		f.witnessed = map[string]bool{}
	}
	f.witnessed[string(f.name)] = true
	return true
}

// seriesCounted counts the series of the line just read, if it was read
// for one, and marks the filter over maxSeries when it is the one too many.
func (f *textFilter) seriesCounted() {
	if !f.counting {
		return
	}
	f.counting = false
	f.series.add(f.lineSeries.sum())
	f.over = f.series.over()
}

// startLine says whether a line of process_start_time_seconds (a HELP or
// TYPE line, or a sample) is passed on: those of its first block, no
// second HELP or TYPE line in it and none after its sample (the parser
// refuses a TYPE after samples: a bare sample of one registry's text
// followed by another's block). Any other marks the start time ambiguous
// (startTwice) and is dropped.
func (f *textFilter) startLine(help, comment bool) bool {
	second := f.startTwice || f.startBlock == 2 ||
		(comment && (f.startSample || help && f.startHelp || !help && f.startType))
	if second {
		f.startTwice = true
		return false
	}
	f.startBlock = 1
	f.startHelp = f.startHelp || (comment && help)
	f.startType = f.startType || (comment && !help)
	f.startSample = f.startSample || !comment
	return true
}

// lineShift is where a run of lines passed on starts, and how far its
// lines' numbers in the body are past their numbers as passed on.
type lineShift struct{ from, by int }

// bodyLine is the body's line number of the n-th line passed on (from 1),
// as the text parser's errors count them.
func (f *textFilter) bodyLine(n int) int {
	i, found := slices.BinarySearchFunc(f.shifts, n, func(s lineShift, n int) int { return cmp.Compare(s.from, n) })
	if !found {
		i--
	}
	if i < 0 {
		return n
	}
	return n + f.shifts[i].by
}

// countLabels adds the label pairs in piece, the next piece of a sample
// line, to the line's count and returns it: each pair has one '=' outside
// quotes, and only a quoted string may hold an escaped '"'.
func (f *textFilter) countLabels(piece []byte) int {
	for _, c := range piece {
		switch {
		case f.escaped:
			f.escaped = false
		case f.quoted && c == '\\':
			f.escaped = true
		case c == '"':
			f.quoted = !f.quoted
		case !f.quoted && c == '=':
			f.labels++
		}
	}
	return f.labels
}

// wanted says whether the line that begins with piece is passed on; of a
// sample line, it sets f.name to the metric name it begins with (bare or,
// inside its braces, quoted), as far as piece holds it.
func (f *textFilter) wanted(piece []byte) bool {
	t := bytes.TrimRight(bytes.TrimLeft(piece, " \t"), "\r\n")
	var name []byte
	comment, help := false, false
	switch {
	case len(t) == 0:
		return false
	case t[0] == '#':
		fs := bytes.Fields(t[1:])
		if len(fs) < 2 || (string(fs[0]) != "TYPE" && string(fs[0]) != "HELP") {
			return false // a comment
		}
		name, comment, help = fs[1], true, string(fs[0]) == "HELP"
	case t[0] == '{':
		var found bool
		if name, found = f.quotedFamily(t); !found {
			return false
		}
		f.name = append(f.name[:0], name...)
	default:
		end := bytes.IndexAny(t, "{ \t")
		if end < 0 {
			end = len(t)
		}
		name = t[:end]
		f.name = append(f.name[:0], name...)
	}
	s := string(name)
	if s == startTimeMetric && f.want[s] {
		return f.startLine(help, comment)
	}
	if f.startBlock == 1 {
		f.startBlock = 2 // another family's line ends the start time's block
	}
	if f.want[s] {
		return true
	}
	for _, suf := range []string{"_bucket", "_count", "_sum"} {
		if len(s) > len(suf) && s[len(s)-len(suf):] == suf && f.want[s[:len(s)-len(suf)]] {
			return true
		}
	}
	return false
}

// merge adds mf to out, appending its series to a family of the same name.
func merge(out map[string]*dto.MetricFamily, mf *dto.MetricFamily) {
	if prev, ok := out[mf.GetName()]; ok {
		prev.Metric = append(prev.Metric, mf.Metric...)
		return
	}
	out[mf.GetName()] = mf
}

// maxQuoted bounds what of a source's own text (a name, a parser's
// message quoting the body) an error carries; maxErrLen bounds a whole
// error message as it is logged and reported.
const (
	maxQuoted = 120
	maxErrLen = 512
)

// families are the family names a source reads, for parseExposition:
// its histogram (Triton: its counters) and the answering process's start
// time (one line, where it is served).
func families(src *Source) []string {
	if src.Preset == PresetTriton {
		out := []string{tritonSuccessMetric, tritonFailureMetric, tritonDurationMetric,
			tritonHistogramMetric, tritonSummaryMetric, startTimeMetric}
		for _, n := range []string{tritonHistogramMetric, tritonSummaryMetric} {
			out = append(out, n+"_bucket", n+"_count", n+"_sum")
		}
		return out
	}
	names := presetMetrics[src.Preset]
	if src.Metric != "" {
		names = []string{src.Metric}
	}
	out := append([]string(nil), names...)
	for _, n := range names {
		out = append(out, n+"_bucket", n+"_count", n+"_sum")
	}
	return append(out, startTimeMetric)
}

func labelsMatch(m *dto.Metric, matchers map[string]string) bool {
	for k, want := range matchers {
		got := ""
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k {
				got = lp.GetValue()
				break
			}
		}
		if got != want {
			return false
		}
	}
	return true
}

func labelString(m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return ""
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, lp := range m.GetLabel() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", lp.GetName(), lp.GetValue())
	}
	b.WriteByte('}')
	return clip.Text(b.String(), maxQuoted)
}

// extract picks the source's histogram (or Triton's counters) out of an
// exposition, with the answering process's start time.
func extract(src *Source, fams map[string]*dto.MetricFamily) (histo, error) {
	var h histo
	var err error
	if src.Preset == PresetTriton {
		h, err = extractTriton(fams, src.Matchers)
	} else {
		names := presetMetrics[src.Preset]
		if src.Metric != "" {
			names = []string{src.Metric}
		}
		h, _, err = extractHistogram(fams, names, src.Matchers)
	}
	h.start = processStart(fams)
	return h, err
}

// startTimeMetric is the start time of the process that serves an
// exposition, in seconds since the epoch, as Prometheus clients' process
// collectors serve it.
const startTimeMetric = "process_start_time_seconds"

// processStart is the exposition's process_start_time_seconds, 0 when it
// has none, or several series or blocks (not one process's: decodeText
// drops a text exposition's family of several blocks), or a value that
// could not be a time.
func processStart(fams map[string]*dto.MetricFamily) float64 {
	mf := fams[startTimeMetric]
	if mf == nil || len(mf.GetMetric()) != 1 {
		return 0
	}
	m := mf.GetMetric()[0]
	v := math.NaN()
	switch {
	case m.GetGauge() != nil:
		v = m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		v = m.GetUntyped().GetValue()
	case m.GetCounter() != nil:
		v = m.GetCounter().GetValue()
	}
	if !(v > 0) || math.IsInf(v, 1) { // NaN fails v > 0
		return 0
	}
	return v
}
