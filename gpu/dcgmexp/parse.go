package dcgmexp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"mime"
	"slices"
	"strconv"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
)

// Key identifies what a dcgm-exporter series describes: a whole GPU (GI -1)
// or one MIG GPU instance of it.
type Key struct {
	UUID string // the physical GPU's UUID (dcgm-exporter's "UUID" label)
	GI   int    // GPU_I_ID, -1 for the whole GPU
}

// Values are the DCGM fields read for one Key; nil when absent.
type Values struct {
	// Profiling ratios (0-1).
	SMActive     *float64 // DCGM_FI_PROF_SM_ACTIVE
	SMOccupancy  *float64 // DCGM_FI_PROF_SM_OCCUPANCY
	DRAMActive   *float64 // DCGM_FI_PROF_DRAM_ACTIVE
	TensorActive *float64 // DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
	// GREngineActive is the fraction of time the graphics/compute engine
	// was busy (DCGM_FI_PROF_GR_ENGINE_ACTIVE): the stand-in for SMActive
	// where a counters file lacks DCGM_FI_PROF_SM_ACTIVE. It is at least
	// SM activity: an engine running a kernel on a few SMs counts as busy.
	GREngineActive *float64

	GPUUtil      *float64 // DCGM_FI_DEV_GPU_UTIL, as a 0-1 ratio
	MemCopyUtil  *float64 // DCGM_FI_DEV_MEM_COPY_UTIL, as a 0-1 ratio
	SMClockHz    *float64 // DCGM_FI_DEV_SM_CLOCK (MHz in the exposition)
	MemClockHz   *float64 // DCGM_FI_DEV_MEM_CLOCK (MHz)
	PowerWatts   *float64 // DCGM_FI_DEV_POWER_USAGE
	TemperatureC *float64 // DCGM_FI_DEV_GPU_TEMP
	EnergyJoules *float64 // DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ)
	FBUsedBytes  *float64 // DCGM_FI_DEV_FB_USED (MiB)
	FBFreeBytes  *float64 // DCGM_FI_DEV_FB_FREE (MiB)

	// Time is the oldest timestamp of the lines whose values were kept;
	// zero when none carried one (dcgm-exporter's own pages carry none).
	Time time.Time
	// Profile is the GPU_I_PROFILE label of a MIG instance's first line
	// that has one ("3g.71gb"), at most maxQuoted bytes; "" where none.
	Profile string
}

// Fields are the parsed DCGM fields by GPU and MIG instance.
type Fields map[Key]*Values

// field says how one DCGM metric maps onto Values: the exposition's value
// must lie in [0, max] (its own unit), is then multiplied by scale, and a
// ratio above 1 (by rounding: at most ratioSlack) is clamped to 1.
type field struct {
	name  string // the metric name, set by init
	idx   int    // its place among the fields, set by init
	set   func(v *Values) **float64
	scale float64
	ratio bool
	max   float64
}

// ratioSlack is the most a ratio may read above 1 by rounding (105 for
// the utilizations in %); a reading beyond it is a broken field, not a
// saturated one, and is skipped rather than clamped to a figure it never
// measured.
const ratioSlack = 1.05

// The ranges are what a GPU can report, with room to spare (for ratios,
// rounding only); a value outside is a broken exporter or field, not a
// reading.
var fields = map[string]field{
	"DCGM_FI_PROF_SM_ACTIVE":               {"", 0, func(v *Values) **float64 { return &v.SMActive }, 1, true, ratioSlack},
	"DCGM_FI_PROF_SM_OCCUPANCY":            {"", 0, func(v *Values) **float64 { return &v.SMOccupancy }, 1, true, ratioSlack},
	"DCGM_FI_PROF_DRAM_ACTIVE":             {"", 0, func(v *Values) **float64 { return &v.DRAMActive }, 1, true, ratioSlack},
	"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE":      {"", 0, func(v *Values) **float64 { return &v.TensorActive }, 1, true, ratioSlack},
	"DCGM_FI_PROF_GR_ENGINE_ACTIVE":        {"", 0, func(v *Values) **float64 { return &v.GREngineActive }, 1, true, ratioSlack},
	"DCGM_FI_DEV_GPU_UTIL":                 {"", 0, func(v *Values) **float64 { return &v.GPUUtil }, 0.01, true, 105},
	"DCGM_FI_DEV_MEM_COPY_UTIL":            {"", 0, func(v *Values) **float64 { return &v.MemCopyUtil }, 0.01, true, 105},
	"DCGM_FI_DEV_SM_CLOCK":                 {"", 0, func(v *Values) **float64 { return &v.SMClockHz }, 1e6, false, 100_000},
	"DCGM_FI_DEV_MEM_CLOCK":                {"", 0, func(v *Values) **float64 { return &v.MemClockHz }, 1e6, false, 100_000},
	"DCGM_FI_DEV_POWER_USAGE":              {"", 0, func(v *Values) **float64 { return &v.PowerWatts }, 1, false, 100_000},
	"DCGM_FI_DEV_GPU_TEMP":                 {"", 0, func(v *Values) **float64 { return &v.TemperatureC }, 1, false, 1000},
	"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": {"", 0, func(v *Values) **float64 { return &v.EnergyJoules }, 1e-3, false, 1e18},
	"DCGM_FI_DEV_FB_USED":                  {"", 0, func(v *Values) **float64 { return &v.FBUsedBytes }, 1 << 20, false, 1 << 30},
	"DCGM_FI_DEV_FB_FREE":                  {"", 0, func(v *Values) **float64 { return &v.FBFreeBytes }, 1 << 20, false, 1 << 30},
}

func init() {
	for i, name := range slices.Sorted(maps.Keys(fields)) {
		f := fields[name]
		f.name, f.idx = name, i
		fields[name] = f
	}
}

// DCGM's blank values, each the base of 16 (base+0 to base+15: blank, not
// found, not supported, not permissioned, ...): what a field DCGM could
// not read holds in place of a reading. dcgm-exporter writes them as they
// are, e.g. an energy counter of 2147483632 mJ.
const (
	int32Blank = 0x7ffffff0         // DCGM_INT32_BLANK
	int64Blank = 0x7ffffffffffffff0 // DCGM_INT64_BLANK
	fp64Blank  = 140737488355328.0  // DCGM_FP64_BLANK, 2^47
	blanks     = 16
)

// blank says whether v is one of DCGM's blank values. The 64-bit integer
// ones all read as 2^63 in a float64.
func blank(v float64) bool {
	in := func(base float64) bool { return v >= base && v <= base+blanks-1 }
	return in(int32Blank) || in(fp64Blank) || in(float64(int64Blank))
}

// Parsing limits: a dcgm-exporter line is a few hundred bytes; the
// warnings of one page are kept up to maxWarnings, then counted; an error
// quotes at most maxQuoted bytes of the page; the fields of at most
// maxKeys GPUs and MIG instances are kept (a host has a few dozen: 64
// GPUs of 7 instances each are 512), the series of others skipped.
const (
	maxLine     = 64 << 10
	maxWarnings = 20
	maxQuoted   = 64
	maxKeys     = 1024
)

// Parse reads a dcgm-exporter /metrics page in the Prometheus text format
// and returns the known DCGM fields by GPU UUID and GPU instance. See
// ParseContext.
func Parse(r io.Reader) (Fields, []string, error) {
	return ParseContext(context.Background(), r)
}

// Format is the exposition format of a page, which says the unit of its
// timestamps.
type Format int

const (
	// FormatText is the Prometheus text format (text/plain;
	// version=0.0.4): timestamps are integer milliseconds.
	FormatText Format = iota
	// FormatOpenMetrics is OpenMetrics (application/openmetrics-text):
	// timestamps are seconds, possibly fractional, and a sample may end
	// with an exemplar ("# {...} value"), which is ignored.
	FormatOpenMetrics
)

// FormatOf returns the format a Content-Type names: OpenMetrics for
// application/openmetrics-text, the text format otherwise.
func FormatOf(contentType string) Format {
	if t, _, err := mime.ParseMediaType(contentType); err == nil && t == "application/openmetrics-text" {
		return FormatOpenMetrics
	}
	return FormatText
}

// ParseContext reads a page in the text format; see ParseFormat.
func ParseContext(ctx context.Context, r io.Reader) (Fields, []string, error) {
	return ParseFormat(ctx, r, FormatText)
}

// ParseFormat reads the page as a stream, line by line, keeping only the
// series of the DCGM fields it knows: the lines of other families are
// skipped unread beyond their name, so memory does not grow with the page.
// Series without a UUID label, with an unparsable GPU_I_ID, with a value
// that is not finite, one of DCGM's blanks or outside its field's range, or of a GPU or MIG
// instance past the first maxKeys are skipped and reported in the
// returned warnings, each naming the field; a malformed line of a
// known field, one over 64 KiB, or ctx ending is an error (naming the
// line). A line over 64 KiB of anything else is skipped unread. When several series describe the same GPU (dcgm-exporter repeats
// a GPU's fields per pod in Kubernetes mode) the first one wins, or the
// newest where they carry timestamps.
func ParseFormat(ctx context.Context, r io.Reader, format Format) (Fields, []string, error) {
	br := bufio.NewReaderSize(r, maxLine+len("\r\n"))
	p := parser{out: Fields{}, uuids: map[string]string{}, format: format, times: map[Key][]time.Time{}}
	for n := 1; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return nil, nil, fmt.Errorf("parsing dcgm-exporter metrics: stopped at line %d: %w", n, context.Cause(ctx))
		}
		b, err := br.ReadSlice('\n')
		long := errors.Is(err, bufio.ErrBufferFull)
		if !long {
			b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r")) // as a line scanner reads it
			long = len(b) > maxLine
		}
		if long {
			// A line over maxLine (its end not counted): one of a known
			// field is an error, another (a comment, another family's
			// long labels) is skipped unread.
			name, _ := metricName(b)
			if _, ok := fields[string(name)]; ok {
				return nil, nil, fmt.Errorf("parsing dcgm-exporter metrics: line %d: %s: longer than %d bytes", n, name, maxLine)
			}
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			b = nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, fmt.Errorf("parsing dcgm-exporter metrics: line %d: %w", n, err)
		}
		if len(b) > 0 {
			if err := p.line(b); err != nil {
				return nil, nil, fmt.Errorf("parsing dcgm-exporter metrics: line %d: %w", n, err)
			}
		}
		if err != nil { // io.EOF
			break
		}
	}
	if p.dropped > 0 {
		p.warnings = append(p.warnings, fmt.Sprintf("and %d more series skipped", p.dropped))
	}
	for k, times := range p.times {
		for _, ts := range times {
			if v := p.out[k]; !ts.IsZero() && (v.Time.IsZero() || ts.Before(v.Time)) {
				v.Time = ts
			}
		}
	}
	return p.out, p.warnings, nil
}

type parser struct {
	format Format
	out    Fields
	uuids  map[string]string // interned UUIDs
	// times are the timestamps of the lines kept, by Key and field
	// (idx); zero for a line without one
	times    map[Key][]time.Time
	warnings []string
	dropped  int
}

// warn keeps the warning msg makes, or counts it once maxWarnings are
// kept (without making it: a page may skip a series on every line).
func (p *parser) warn(msg func() string) {
	if len(p.warnings) >= maxWarnings {
		p.dropped++
		return
	}
	p.warnings = append(p.warnings, msg())
}

// metricName splits a sample line b (as far as b holds it) at the end of
// its metric name: the name and the rest (labels and value); a nil name
// for a comment or an empty line. The name ends at '{', a space or a tab
// only: a name with another byte after it ("DCGM_FI_DEV_GPU_TEMP\r...")
// is another, which the parser does not read, however long its line.
func metricName(b []byte) (name, rest []byte) {
	b = bytes.TrimLeft(b, " \t")
	if len(b) == 0 || b[0] == '#' {
		return nil, nil
	}
	end := bytes.IndexAny(b, "{ \t")
	if end < 0 {
		end = len(b)
	}
	return b[:end], b[end:]
}

// line reads one line: a sample of a known field is stored, anything else
// (comments, HELP and TYPE, other families) is skipped.
func (p *parser) line(b []byte) error {
	metric, rest := metricName(b)
	f, ok := fields[string(metric)]
	if !ok {
		return nil
	}
	name := f.name
	s := sample{b: rest}
	uuid, lowerUUID, gi, profile, err := s.labels()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	v, ts, err := s.value(p.format)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if uuid == nil {
		uuid = lowerUUID
	}
	if len(uuid) == 0 {
		p.warn(func() string { return fmt.Sprintf("%s: series without a UUID label", name) })
		return nil
	}
	u, ok := p.uuids[string(uuid)]
	if !ok {
		if len(p.uuids) >= maxKeys {
			p.warn(func() string {
				return fmt.Sprintf("%s{UUID=%q}: the page names more than %d GPUs; skipped", name, clip.Bytes(uuid, maxQuoted), maxKeys)
			})
			return nil
		}
		u = string(uuid)
		p.uuids[u] = u
	}
	k := Key{UUID: u, GI: -1}
	if gi = bytes.TrimSpace(gi); len(gi) > 0 {
		n, err := strconv.Atoi(string(gi))
		if err != nil || n < 0 {
			p.warn(func() string { return fmt.Sprintf("%s: UUID %q: bad GPU_I_ID %q", name, u, gi) })
			return nil
		}
		k.GI = n
	}
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		p.warn(func() string { return fmt.Sprintf("%s{UUID=%q}: value %v is not finite", name, u, v) })
		return nil
	case blank(v):
		p.warn(func() string {
			return fmt.Sprintf("%s{UUID=%q}: value %v is one of DCGM's blanks (no reading)", name, u, v)
		})
		return nil
	case v < 0 || v > f.max:
		p.warn(func() string {
			return fmt.Sprintf("%s{UUID=%q}: value %g outside its range [0, %g]", name, u, v, f.max)
		})
		return nil
	}
	vals := p.out[k]
	if vals == nil && len(p.out) >= maxKeys {
		p.warn(func() string {
			return fmt.Sprintf("%s{UUID=%q}: the page names more than %d GPUs and MIG instances; skipped", name, u, maxKeys)
		})
		return nil
	}
	if vals == nil {
		vals = &Values{}
		p.out[k] = vals
	}
	if vals.Profile == "" && k.GI >= 0 && len(profile) > 0 {
		vals.Profile = clip.Bytes(profile, maxQuoted)
	}
	times := p.times[k]
	if times == nil {
		times = make([]time.Time, len(fields))
		p.times[k] = times
	}
	// a repeated series (per pod, or of two sources behind a proxy): the
	// first is kept, or the newest where the kept one has a timestamp (a
	// line without one is current)
	if dst, kept := f.set(vals), times[f.idx]; *dst == nil || !kept.IsZero() && (ts.IsZero() || ts.After(kept)) {
		x := v * f.scale
		if f.ratio && x > 1 {
			x = 1
		}
		*dst = &x
		times[f.idx] = ts
	}
	return nil
}

// sample is the rest of a sample line after the metric name.
type sample struct{ b []byte }

func (s *sample) skipSpace() {
	for len(s.b) > 0 && (s.b[0] == ' ' || s.b[0] == '\t') {
		s.b = s.b[1:]
	}
}

// labels reads an optional {name="value",...} and returns the values of
// UUID, uuid, GPU_I_ID and GPU_I_PROFILE (nil when absent).
func (s *sample) labels() (uuid, lowerUUID, gi, profile []byte, err error) {
	s.skipSpace()
	if len(s.b) == 0 || s.b[0] != '{' {
		return nil, nil, nil, nil, nil
	}
	s.b = s.b[1:]
	for {
		s.skipSpace()
		if len(s.b) == 0 {
			return nil, nil, nil, nil, errors.New("unclosed label set")
		}
		if s.b[0] == '}' {
			s.b = s.b[1:]
			return uuid, lowerUUID, gi, profile, nil
		}
		i := 0
		for i < len(s.b) && (s.b[i] == '_' || s.b[i] >= 'a' && s.b[i] <= 'z' || s.b[i] >= 'A' && s.b[i] <= 'Z' || i > 0 && s.b[i] >= '0' && s.b[i] <= '9') {
			i++
		}
		if i == 0 {
			return nil, nil, nil, nil, fmt.Errorf("invalid label name at %s", clip.Bytes(s.b, maxQuoted))
		}
		lname := s.b[:i]
		s.b = s.b[i:]
		s.skipSpace()
		if len(s.b) == 0 || s.b[0] != '=' {
			return nil, nil, nil, nil, fmt.Errorf("label %s: want '='", lname)
		}
		s.b = s.b[1:]
		s.skipSpace()
		val, err := s.quoted()
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("label %s: %w", lname, err)
		}
		switch string(lname) {
		case "UUID":
			uuid = val
		case "uuid":
			lowerUUID = val
		case "GPU_I_ID":
			gi = val
		case "GPU_I_PROFILE":
			profile = val
		}
		s.skipSpace()
		switch {
		case len(s.b) > 0 && s.b[0] == ',':
			s.b = s.b[1:]
		case len(s.b) > 0 && s.b[0] == '}':
		default:
			return nil, nil, nil, nil, fmt.Errorf("label %s: want ',' or '}' after its value", lname)
		}
	}
}

// quoted reads a "..." label value, unescaping \\, \" and \n.
func (s *sample) quoted() ([]byte, error) {
	if len(s.b) == 0 || s.b[0] != '"' {
		return nil, errors.New("value not quoted")
	}
	s.b = s.b[1:]
	var out []byte // nil until an escape is met: the value is s.b[:i]
	for i := 0; i < len(s.b); i++ {
		switch c := s.b[i]; c {
		case '"':
			v := s.b[:i]
			if out != nil {
				v = out
			}
			s.b = s.b[i+1:]
			return v, nil
		case '\\':
			if out == nil {
				out = append([]byte(nil), s.b[:i]...)
			}
			if i+1 == len(s.b) {
				return nil, errors.New("unterminated escape")
			}
			i++
			switch s.b[i] {
			case '\\', '"':
				out = append(out, s.b[i])
			case 'n':
				out = append(out, '\n')
			default:
				return nil, fmt.Errorf("invalid escape \\%c", s.b[i])
			}
		default:
			if out != nil {
				out = append(out, c)
			}
		}
	}
	return nil, errors.New("unterminated label value")
}

// value reads the sample value and its optional timestamp (zero when
// absent): integer milliseconds since the epoch in the text format,
// seconds in OpenMetrics.
func (s *sample) value(format Format) (float64, time.Time, error) {
	if len(s.b) == 0 || (s.b[0] != ' ' && s.b[0] != '\t') {
		return 0, time.Time{}, errors.New("want a space before the value")
	}
	rest := bytes.TrimSpace(s.b)
	if i := bytes.Index(rest, []byte(" # ")); i >= 0 && format == FormatOpenMetrics {
		rest = bytes.TrimSpace(rest[:i]) // an exemplar
	}
	tok, ts := rest, []byte(nil)
	if i := bytes.IndexAny(rest, " \t"); i >= 0 {
		tok, ts = rest[:i], bytes.TrimSpace(rest[i:])
	}
	if len(tok) == 0 || bytes.ContainsAny(ts, " \t") {
		return 0, time.Time{}, fmt.Errorf("want a value and an optional timestamp, got %s", clip.Bytes(s.b, maxQuoted))
	}
	v, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("invalid value %s", clip.Bytes(tok, maxQuoted))
	}
	if len(ts) == 0 {
		return v, time.Time{}, nil
	}
	ms, err := timestamp(ts, format)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("invalid timestamp %s", clip.Bytes(ts, maxQuoted))
	}
	if ms < 0 {
		ms = 0 // before 1970 is as stale as 1970; the zero time means none
	}
	return v, time.UnixMilli(ms), nil
}

// maxSeconds bounds an OpenMetrics timestamp, so that it fits in int64
// milliseconds (year 33658).
const maxSeconds = 1e15

// timestamp returns a timestamp in milliseconds since the epoch.
func timestamp(b []byte, format Format) (int64, error) {
	if format != FormatOpenMetrics {
		return strconv.ParseInt(string(b), 10, 64)
	}
	sec, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(sec) || math.Abs(sec) > maxSeconds {
		return 0, errors.New("not a timestamp")
	}
	return int64(math.Round(sec * 1e3)), nil
}
