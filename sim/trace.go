package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
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

const traceTimeLayout = "2006-01-02 15:04:05.9999999"

// loadTrace reads a CSV with a header naming TIMESTAMP, ContextTokens and
// GeneratedTokens (other columns are ignored). Errors name file:line.
func loadTrace(path string) (*trace, error) {
	f, err := fileread.Open(path, maxTraceBytes)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseTrace(path, f)
}

func parseTrace(path string, r io.Reader) (*trace, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	head, err := cr.Read()
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
		ts, err := time.Parse(traceTimeLayout, strings.TrimSpace(rec[ti]))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: bad TIMESTAMP %q", path, line, rec[ti])
		}
		c, err1 := strconv.Atoi(strings.TrimSpace(rec[ci]))
		g, err2 := strconv.Atoi(strings.TrimSpace(rec[gi]))
		if err1 != nil || err2 != nil || c < 0 || g < 0 {
			return nil, fmt.Errorf("%s:%d: bad token counts %q, %q", path, line, rec[ci], rec[gi])
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
