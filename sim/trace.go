package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
)

// trace is a replayed request trace: arrival offsets from the first request
// and, per request, context (prompt) and generated token counts.
//
// The shipped trace, scenarios/replay/azure-llm-2023-conv.csv, is a subset of
// the Azure Public Dataset (AzureLLMInferenceTrace_conv), licensed CC BY 4.0;
// attribution: Patel et al., "Splitwise: Efficient generative LLM inference
// using phase splitting", ISCA 2024.
type trace struct {
	offsets   []time.Duration
	context   []int
	generated []int
	span      time.Duration // last offset plus the mean gap, the loop period
}

const maxTraceSpan = 30 * 24 * time.Hour

// maxTraceBytes bounds a trace file (the shipped one is 0.7 MB); a FIFO or
// a device is refused before it is read.
const maxTraceBytes = 256 << 20

// maxTraceRows bounds the requests of a scenario's traces together (each
// file read once, however many tenants replay it): 24 bytes a request in
// memory, and seconds to read. The shipped trace has 19,366.
const maxTraceRows = 4 << 20

// maxTraceRate bounds a trace's mean arrival rate as replayed, requests a
// second (its requests over its span, times its speedup): arrival.rate's
// limit. A faster replay would arrive faster than the engine can be run,
// and a trace whose every request has one timestamp (a span of 0) would
// loop without time passing.
const maxTraceRate = 1e6

const traceTimeLayout = "2006-01-02 15:04:05.9999999"

// tracePath is the trace file a scenario file names as file: relative to
// the scenario file's directory (the current directory for a scenario
// parsed without a file), in fsys when the scenario came from one
// (slash-separated, where an absolute or escaping name is refused when it
// is opened), else on the operating system's files.
func tracePath(fsys fs.FS, scenarioFile, file string) string {
	if fsys != nil {
		if path.IsAbs(file) {
			return file
		}
		return path.Join(path.Dir(scenarioFile), file)
	}
	if !filepath.IsAbs(file) && scenarioFile != "" {
		file = filepath.Join(filepath.Dir(scenarioFile), file)
	}
	return filepath.Clean(file)
}

// loadTrace reads a CSV with a header naming TIMESTAMP, ContextTokens and
// GeneratedTokens (other columns are ignored), of at most maxRows requests,
// from fsys (nil: the operating system's files). Errors name file:line.
func loadTrace(fsys fs.FS, path string, maxRows int) (*trace, error) {
	f, err := fileread.OpenFS(fsys, path, maxTraceBytes)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseTrace(path, f, maxRows)
}

// rate is t's mean arrival rate replayed at speedup, requests a second
// (+Inf for a span of 0).
func (t *trace) rate(speedup float64) float64 {
	return float64(len(t.offsets)) * speedup / t.span.Seconds()
}

// maxTraceRecordBytes bounds a trace's record (a row; a quoted field may
// spread it over lines): the shipped trace's are about 40 bytes.
// encoding/csv builds a record's fields whole before it returns them, about
// 40 bytes of memory a field, so that one line of 32 MiB of commas took
// 3 GB; a record of this bound takes a few MB at the most.
const maxTraceRecordBytes = 64 << 10

// recordTooLong is the error of a record over maxTraceRecordBytes.
type recordTooLong struct{ line int }

func (e *recordTooLong) Error() string {
	return fmt.Sprintf("a row longer than %d bytes (a trace's rows are tens of bytes)", maxTraceRecordBytes)
}

// recordLimiter reads r for a csv.Reader and fails once a record, from a
// line break outside quotes to the next, is over maxTraceRecordBytes: it
// hands on no byte past the bound, so the csv.Reader never holds more of
// a record. A '"' opens or closes a quoted field as csv reads it where
// the CSV is well formed ("" in a quoted field twice); where it is not,
// the csv.Reader refuses the line that holds it before it reads on.
type recordLimiter struct {
	r      io.Reader
	n      int  // bytes of the record so far
	quoted bool // inside a quoted field
	lines  int  // line breaks read
	start  int  // the line the record starts on
	err    error
}

func (l *recordLimiter) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	for i, c := range p[:n] {
		if l.n == 0 {
			l.start = l.lines + 1
		}
		l.n++
		if l.n > maxTraceRecordBytes {
			l.err = &recordTooLong{line: l.start}
			return i, l.err
		}
		switch {
		case c == '"':
			l.quoted = !l.quoted
		case c == '\n':
			l.lines++
			if !l.quoted {
				l.n = 0
			}
		}
	}
	return n, err
}

// traceError is "path:line: msg" for err, an error of csv.Reader's Read:
// the line of a *csv.ParseError or of a record too long is the file's,
// where csv counts the lines it has read (blank ones and those a quoted
// field spans included).
func traceError(path, what string, err error) error {
	var pe *csv.ParseError
	var long *recordTooLong
	switch {
	case errors.As(err, &long):
		return fmt.Errorf("%s:%d: %s%v", path, long.line, what, long)
	case errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount):
		return fmt.Errorf("%s:%d: %s%v", path, pe.Line, what, pe.Err)
	case errors.As(err, &pe):
		return fmt.Errorf("%s:%d: %s%v (column %d)", path, pe.Line, what, pe.Err, pe.Column)
	}
	return fmt.Errorf("%s: %s%v", path, what, err)
}

func parseTrace(path string, r io.Reader, maxRows int) (*trace, error) {
	cr := csv.NewReader(&recordLimiter{r: r})
	cr.ReuseRecord = true
	head, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: empty: a trace begins with a header naming TIMESTAMP, ContextTokens and GeneratedTokens", path)
	}
	if err != nil {
		return nil, traceError(path, "reading header: ", err)
	}
	headLine, _ := cr.FieldPos(0)
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	ti, ok1 := col["TIMESTAMP"]
	ci, ok2 := col["ContextTokens"]
	gi, ok3 := col["GeneratedTokens"]
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("%s:%d: header must name TIMESTAMP, ContextTokens and GeneratedTokens", path, headLine)
	}
	tr := &trace{}
	var first time.Time
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, traceError(path, "", err)
		}
		// each line the file's, of the record's start or of its field
		line, _ := cr.FieldPos(0)
		lineOf := func(field int) int { l, _ := cr.FieldPos(field); return l }
		if len(tr.offsets) >= maxRows {
			return nil, fmt.Errorf("%s:%d: more than %d requests in the scenario's traces", path, line, maxTraceRows)
		}
		ts, err := time.Parse(traceTimeLayout, strings.TrimSpace(rec[ti]))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: bad TIMESTAMP %q", path, lineOf(ti), rec[ti])
		}
		c, err1 := strconv.Atoi(strings.TrimSpace(rec[ci]))
		g, err2 := strconv.Atoi(strings.TrimSpace(rec[gi]))
		if err1 != nil || err2 != nil || c < 0 || g < 0 {
			return nil, fmt.Errorf("%s:%d: bad token counts %q, %q", path, lineOf(min(ci, gi)), rec[ci], rec[gi])
		}
		if c > maxTokens || g > maxTokens {
			return nil, fmt.Errorf("%s:%d: token counts %d, %d: at most %d each (as context_tokens and generated_tokens)", path, lineOf(min(ci, gi)), c, g, maxTokens)
		}
		if len(tr.offsets) == 0 {
			first = ts
		}
		off := ts.Sub(first)
		if off > maxTraceSpan {
			return nil, fmt.Errorf("%s:%d: trace longer than %v", path, lineOf(ti), maxTraceSpan)
		}
		if n := len(tr.offsets); n > 0 && off < tr.offsets[n-1] {
			return nil, fmt.Errorf("%s:%d: timestamps go backwards", path, lineOf(ti))
		}
		tr.offsets = append(tr.offsets, off)
		tr.context = append(tr.context, max(c, 1))
		tr.generated = append(tr.generated, max(g, 1))
	}
	if len(tr.offsets) == 0 {
		return nil, fmt.Errorf("%s: trace has no requests", path)
	}
	n := len(tr.offsets)
	gap := time.Second
	if n > 1 {
		gap = tr.offsets[n-1] / time.Duration(n-1)
	}
	tr.span = tr.offsets[n-1] + gap
	return tr, nil
}
