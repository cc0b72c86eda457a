package latency

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// A protobuf exposition that repeats one label set 20,000 times (720 KB,
// under the default max_bytes) is read in well under a second, each
// repeat a series of its own: the repeats' keys were found by trying
// suffixes from 1 up for each, which cost the square of their number
// (16,000 repeats took three and a half minutes of CPU per scrape).
func TestRepeatedSeriesLinear(t *testing.T) {
	const n = 20000
	mf := &dto.MetricFamily{Name: proto.String("vllm:e2e_request_latency_seconds"), Type: dto.MetricType_HISTOGRAM.Enum()}
	for range n {
		mf.Metric = append(mf.Metric, &dto.Metric{Label: []*dto.LabelPair{{Name: proto.String("model_name"), Value: proto.String("m")}},
			Histogram: &dto.Histogram{SampleCount: proto.Uint64(1), SampleSum: proto.Float64(0.05),
				Bucket: []*dto.Bucket{{UpperBound: proto.Float64(0.1), CumulativeCount: proto.Uint64(1)}}}})
	}
	var body bytes.Buffer
	if err := expfmt.NewEncoder(&body, protoFormat).Encode(mf); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", string(protoFormat))
		_, _ = w.Write(body.Bytes())
	}))
	defer srv.Close()
	src := &Source{URL: srv.URL, Preset: PresetVLLME2E, Timeout: 5 * time.Second, MaxBytes: 4 << 20}
	tr := newSLOTracker(Spec{Name: "x", Source: src, Objective: &Objective{Quantile: 0.9, Target: time.Second}, Window: time.Hour})
	sc := &scraper{httpc: srv.Client()}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		for i := range 2 { // the second scrape takes the delta series by series
			if err := sc.scrapeOnce(context.Background(), tr, time.Unix(int64(15*i), 0)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(90 * time.Second):
		// Linear, the two take about a second under the race detector;
		// quadratic, minutes: the margin is wide both ways, so that a
		// loaded machine does not fail it.
		t.Fatalf("two scrapes of %d repeated series not done after %v", n, time.Since(start).Round(time.Second))
	}
	tr.mu.Lock()
	got := len(tr.prev.series)
	tr.mu.Unlock()
	if got != n {
		t.Errorf("%d series kept, want %d: each repeat one", got, n)
	}
}
