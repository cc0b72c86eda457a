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

func parseTrace(path string, r io.Reader, maxRows int) (*trace, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	head, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: empty: a trace begins with a header naming TIMESTAMP, ContextTokens and GeneratedTokens", path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s:1: reading header: %v", path, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	ti, ok1 := col["TIMESTAMP"]
	ci, ok2 := col["ContextTokens"]
	gi, ok3 := col["GeneratedTokens"]
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("%s:1: header must name TIMESTAMP, ContextTokens and GeneratedTokens", path)
	}
	tr := &trace{}
	var first time.Time
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		if len(tr.offsets) >= maxRows {
			return nil, fmt.Errorf("%s:%d: more than %d requests in the scenario's traces", path, line, maxTraceRows)
		}
		ts, err := time.Parse(traceTimeLayout, strings.TrimSpace(rec[ti]))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: bad TIMESTAMP %q", path, line, rec[ti])
		}
		c, err1 := strconv.Atoi(strings.TrimSpace(rec[ci]))
		g, err2 := strconv.Atoi(strings.TrimSpace(rec[gi]))
		if err1 != nil || err2 != nil || c < 0 || g < 0 {
			return nil, fmt.Errorf("%s:%d: bad token counts %q, %q", path, line, rec[ci], rec[gi])
		}
		if c > maxTokens || g > maxTokens {
			return nil, fmt.Errorf("%s:%d: token counts %d, %d: at most %d each (as context_tokens and generated_tokens)", path, line, c, g, maxTokens)
		}
		if len(tr.offsets) == 0 {
			first = ts
		}
		off := ts.Sub(first)
		if off > maxTraceSpan {
			return nil, fmt.Errorf("%s:%d: trace longer than %v", path, line, maxTraceSpan)
		}
		if n := len(tr.offsets); n > 0 && off < tr.offsets[n-1] {
			return nil, fmt.Errorf("%s:%d: timestamps go backwards", path, line)
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
