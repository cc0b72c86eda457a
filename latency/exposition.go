package latency

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Decoding limits. The body itself is at most max_bytes; these bound what
// decoding it may cost beyond that, whatever the body claims: only the
// families a source reads are decoded, and those may hold at most
// maxElements protobuf fields (a series, a label, a bucket: each costs a
// few dozen bytes decoded from as few as two) or maxTextLines text lines.
const (
	maxElements  = 250_000
	maxTextLines = 100_000
)

// errTooMany is returned when a body holds more than the limits above.
var errTooMany = errors.New("too many series, labels or buckets in the source's families")

// parseExposition decodes the families named in names (all of them when
// names is nil) from a /metrics body in the given format: delimited
// protobuf, or text for any other. Memory beyond the body stays bounded:
// a length prefix is checked against what the body holds before anything
// is allocated for it.
func parseExposition(data []byte, format expfmt.Format, names []string) (map[string]*dto.MetricFamily, error) {
	var want map[string]bool
	if names != nil {
		want = map[string]bool{}
		for _, n := range names {
			want[n] = true
		}
	}
	if format != "" && format.FormatType() == expfmt.TypeProtoDelim {
		return parseProtoDelim(data, want)
	}
	return parseText(data, want)
}

// parseProtoDelim decodes varint-length-delimited MetricFamily messages.
func parseProtoDelim(data []byte, want map[string]bool) (map[string]*dto.MetricFamily, error) {
	out := map[string]*dto.MetricFamily{}
	budget := maxElements
	desc := (&dto.MetricFamily{}).ProtoReflect().Descriptor()
	for off := 0; off < len(data); {
		size, n := protowire.ConsumeVarint(data[off:])
		if n < 0 {
			return nil, fmt.Errorf("parse: protobuf length prefix at byte %d: %w", off, protowire.ParseError(n))
		}
		off += n
		if rest := uint64(len(data) - off); size > rest {
			return nil, fmt.Errorf("parse: protobuf message at byte %d claims %d bytes, but only %d follow (truncated or not delimited protobuf)", off-n, size, rest)
		}
		msg := data[off : off+int(size)]
		off += int(size)
		name, err := familyName(msg)
		if err != nil {
			return nil, fmt.Errorf("parse: protobuf message at byte %d: %w", off-int(size), err)
		}
		if want != nil && !want[name] {
			continue
		}
		if err := countFields(msg, desc, &budget, 0); err != nil {
			return nil, fmt.Errorf("parse: family %s: %w", clip(name), err)
		}
		mf := &dto.MetricFamily{}
		if err := proto.Unmarshal(msg, mf); err != nil {
			return nil, fmt.Errorf("parse: family %s: %w", clip(name), err)
		}
		merge(out, mf)
	}
	return out, nil
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

// parseText decodes the text format, handing the parser only the lines
// of wanted families (name, name_bucket, name_count, name_sum and their
// HELP and TYPE lines), at most maxTextLines of them.
func parseText(data []byte, want map[string]bool) (map[string]*dto.MetricFamily, error) {
	if want != nil {
		var err error
		if data, err = filterText(data, want); err != nil {
			return nil, err
		}
	}
	dec := expfmt.NewDecoder(bytes.NewReader(data), expfmt.NewFormat(expfmt.TypeTextPlain))
	out := map[string]*dto.MetricFamily{}
	for {
		mf := &dto.MetricFamily{}
		err := dec.Decode(mf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parse: %s", clip(err.Error()))
		}
		merge(out, mf)
	}
	return out, nil
}

func filterText(data []byte, want map[string]bool) ([]byte, error) {
	wanted := func(name []byte) bool {
		s := string(name)
		if want[s] {
			return true
		}
		for _, suf := range []string{"_bucket", "_count", "_sum"} {
			if len(s) > len(suf) && s[len(s)-len(suf):] == suf && want[s[:len(s)-len(suf)]] {
				return true
			}
		}
		return false
	}
	var out bytes.Buffer
	lines := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for sc.Scan() {
		line := sc.Bytes()
		t := bytes.TrimLeft(line, " \t")
		var name []byte
		switch {
		case len(t) == 0:
			continue
		case t[0] == '#':
			f := bytes.Fields(t[1:])
			if len(f) < 2 || (string(f[0]) != "TYPE" && string(f[0]) != "HELP") {
				continue // a comment
			}
			name = f[1]
		case t[0] == '{':
			name = nil // a quoted UTF-8 name: kept, the parser reads it
		default:
			end := bytes.IndexAny(t, "{ \t")
			if end < 0 {
				end = len(t)
			}
			name = t[:end]
		}
		if name != nil && !wanted(name) {
			continue
		}
		if lines++; lines > maxTextLines {
			return nil, fmt.Errorf("parse: more than %d lines of the source's families", maxTextLines)
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Bytes(), sc.Err()
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

// clip returns s with control characters and invalid bytes escaped, cut to
// maxQuoted bytes and saying how much was cut: what a source sends never
// reaches a log line raw or long.
func clip(s string) string { return clipTo(s, maxQuoted) }

func clipTo(s string, limit int) string {
	var b strings.Builder
	for i, r := range s {
		if b.Len() >= limit {
			fmt.Fprintf(&b, "... (%d more bytes)", len(s)-i)
			break
		}
		switch {
		case r == utf8.RuneError:
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

// families are the family names a source reads, for parseExposition.
func families(src *Source) []string {
	if src.Preset == PresetTriton {
		out := []string{tritonSuccessMetric, tritonFailureMetric, tritonDurationMetric,
			tritonHistogramMetric, tritonSummaryMetric}
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
	return out
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
	return clip(b.String())
}

// extract picks the source's histogram (or Triton's counters) out of an
// exposition.
func extract(src *Source, fams map[string]*dto.MetricFamily) (histo, error) {
	if src.Preset == PresetTriton {
		return extractTriton(fams, src.Matchers)
	}
	names := presetMetrics[src.Preset]
	if src.Metric != "" {
		names = []string{src.Metric}
	}
	h, _, err := extractHistogram(fams, names, src.Matchers)
	return h, err
}
