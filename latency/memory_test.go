package latency

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// maxPages are bodies of one source at the 64 MiB ceiling, each a shape
// that costs memory a different way.
func maxPages(tb testing.TB, limit int) map[string][]byte {
	var block bytes.Buffer // 64 KiB of another family's lines
	for i := 0; block.Len() < 64<<10; i++ {
		fmt.Fprintf(&block, "process_other_metric{instance=\"node-%d\",path=\"/a/b/c/%d\"} %d\n", i, i, i)
	}
	pad := func(b *bytes.Buffer, n int) {
		for b.Len()+block.Len() < n {
			b.Write(block.Bytes())
		}
	}
	out := map[string][]byte{}
	// Other families: only the small histogram is the source's.
	var b bytes.Buffer
	b.WriteString(vllmText("5"))
	pad(&b, limit-200)
	out["other families"] = b.Bytes()
	// The source's histogram itself, past what is decoded of it, its
	// series as long as the line cap allows at the limit.
	b = bytes.Buffer{}
	b.WriteString("# TYPE vllm:e2e_request_latency_seconds histogram\n")
	long := strings.Repeat("x", limit/maxTextLines-60)
	for i := 0; b.Len() < maxWantedBytes+(4<<20); i++ {
		fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_bucket{model_name=\"m%d-%s\",le=\"+Inf\"} 5\n", i, long)
	}
	out["wanted series"] = b.Bytes()
	hist := &dto.MetricFamily{Name: proto.String("vllm:e2e_request_latency_seconds"), Type: dto.MetricType_HISTOGRAM.Enum()}
	for i := 0; i*len(long) < maxWantedBytes+(4<<20); i++ {
		hist.Metric = append(hist.Metric, &dto.Metric{
			Label:     []*dto.LabelPair{{Name: proto.String("model_name"), Value: proto.String(fmt.Sprintf("m%d-%s", i, long))}},
			Histogram: &dto.Histogram{SampleCount: proto.Uint64(5), SampleSum: proto.Float64(1), Bucket: []*dto.Bucket{{UpperBound: proto.Float64(math.Inf(1)), CumulativeCount: proto.Uint64(5)}}}})
	}
	out["protobuf, wanted series"] = delimited(tb, hist)
	// One line of nearly all of it.
	b = bytes.Buffer{}
	b.WriteString(vllmText("5"))
	b.WriteString("# " + strings.Repeat("y", limit-300) + "\n")
	out["one long comment"] = b.Bytes()
	// Delimited protobuf: a huge family of another name, then the source's.
	other := &dto.MetricFamily{Name: proto.String("process_other_metric"), Type: dto.MetricType_GAUGE.Enum()}
	value := strings.Repeat("z", 1000)
	for range (limit - (1 << 20)) / 1020 {
		other.Metric = append(other.Metric, &dto.Metric{Label: []*dto.LabelPair{{Name: proto.String("a"), Value: proto.String(value)}},
			Gauge: &dto.Gauge{Value: proto.Float64(1)}})
	}
	out["protobuf, other family"] = append(delimited(tb, other), protoBody(tb, []byte(vllmText("5")))...)
	return out
}

// delimited is mf as one length-delimited protobuf message.
func delimited(tb testing.TB, mf *dto.MetricFamily) []byte {
	msg, err := proto.Marshal(mf)
	if err != nil {
		tb.Fatal(err)
	}
	return append(protowire.AppendVarint(nil, uint64(len(msg))), msg...)
}

// peakHeap runs f and returns the most the live heap grew above what it
// was before, sampled every millisecond.
func peakHeap(f func()) uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	base := s[0].Value.Uint64()
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > base && v-base > peak.Load() {
				peak.Store(v - base)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(done)
	<-stopped
	return peak.Load()
}

// One source at the 64 MiB ceiling holds at most a small multiple of it,
// whatever shape its body takes.
func TestSourceMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 64 MiB bodies")
	}
	const limit = 64 << 20
	for name, page := range maxPages(t, limit) {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(name, "protobuf") {
					w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
				}
				_, _ = w.Write(page)
			}))
			defer srv.Close()
			src := &Source{URL: srv.URL, Preset: PresetVLLME2E, Timeout: time.Minute, MaxBytes: limit}
			var err error
			peak := peakHeap(func() { _, err = (&scraper{httpc: srv.Client()}).fetch(context.Background(), src) })
			t.Logf("%d-byte body: peak heap %.0f MB (%.1fx the limit), err %v", len(page), float64(peak)/1e6, float64(peak)/limit, err)
			if peak > limit*3/2 {
				t.Errorf("peak heap %d bytes, more than 1.5x the %d-byte limit", peak, limit)
			}
		})
	}
}

// referenceFilter is the text filter as a whole-body line scan: what
// textFilter must pass on, piece by piece.
func referenceFilter(data []byte, want map[string]bool) []byte {
	tf := textFilter{want: want}
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if tf.wanted(line) {
			out.Write(line)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

func FuzzTextFilter(f *testing.F) {
	f.Add([]byte(vllmText("5") + "other 1\n# HELP x y\r\n{\"q\"} 1\nvllm:e2e_request_latency_seconds_sum 3"))
	f.Add([]byte("  # TYPE vllm:e2e_request_latency_seconds histogram\n\n\t\n"))
	f.Add([]byte("{\"vllm:e2e_request_latency_seconds_count\"} 1\n{a=\"}\",\"vllm:e2e_request_latency_seconds_sum\"} 2\n{\"x.y\",\"a\"=\"b\"} 3\n{\"vllm:e2e_request_latency_seconds\\\"\"} 4\n{a=\"1\"} 5\n{\"vllm:e2e_request_latency_seconds_bucket\""))
	want := map[string]bool{"vllm:e2e_request_latency_seconds": true}
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.Count(data, []byte("\n")) >= maxTextLines {
			return
		}
		got, err := io.ReadAll(&textFilter{br: bufio.NewReaderSize(bytes.NewReader(data), 4096), want: want})
		if errors.Is(err, errTooManyLabels) || errors.Is(err, errTooManySeries) || errors.Is(err, errQuotedNameCut) {
			return // a line of the family with more labels than the parser is given, or a series too many, or a name past the buffer
		}
		if err != nil {
			t.Fatal(err)
		}
		if line := bytes.IndexByte(data, '\n'); line > 4000 || (line < 0 && len(data) > 4000) {
			return // a first piece shorter than the line: the name is read from it alone
		}
		if exp := referenceFilter(data, want); !bytes.Equal(got, exp) {
			t.Fatalf("filter passed on %q, want %q", got, exp)
		}
	})
}

// A line of the source's family longer than the read buffer goes through
// whole, in pieces.
func TestTextFilterLongLine(t *testing.T) {
	model := strings.Repeat("m", 300<<10)
	text := "other_metric 1\n" + strings.Replace(vllmText("5"), `le="0.1"`, `le="0.1",model_name="`+model+`"`, 1) + strings.Repeat("# pad\n", 20000)
	fams, err := parseExposition([]byte(text), expfmt.NewFormat(expfmt.TypeTextPlain), []string{"vllm:e2e_request_latency_seconds"})
	if err != nil {
		t.Fatal(err)
	}
	mf := fams["vllm:e2e_request_latency_seconds"]
	if mf == nil || len(fams) != 1 || len(mf.GetMetric()) != 2 || mf.GetMetric()[0].GetLabel()[0].GetValue() != model {
		t.Fatalf("families %v", fams)
	}
}
