package latency

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

// manySeries is a text histogram m of n series (label a), each with the
// given number of finite buckets and a count, every count c.
func manySeries(n, buckets, c int) []byte {
	var b bytes.Buffer
	b.WriteString("# TYPE m histogram\n")
	for i := range n {
		for j := range buckets {
			fmt.Fprintf(&b, "m_bucket{a=\"%x\",le=\"%d\"} %d\n", i, j+1, c)
		}
		fmt.Fprintf(&b, "m_count{a=\"%x\"} %d\n", i, c)
	}
	return b.Bytes()
}

// liveHeap is the live heap after a collection.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// BenchmarkScrapeMemory reports, for pages of several shapes under the
// default max_bytes, the most the live heap grows during one scrape (a
// baseline and a delta, the larger) and what one tracker keeps after them.
// Figures, not limits: docs/slo.md ("Memory") quotes them.
func BenchmarkScrapeMemory(b *testing.B) {
	pages := []struct {
		name  string
		body  func(c int) []byte
		proto bool
	}{
		{"tiny series 49990 (text)", func(c int) []byte { return manySeries(49_990, 1, c) }, false},
		{"tiny series 20000 (protobuf)", func(c int) []byte { return protoBody(b, manySeries(20_000, 1, c)) }, true},
		{"tiny series 4096 (text)", func(c int) []byte { return manySeries(4096, 1, c) }, false},
		{"4000 series x 23 buckets (text)", func(c int) []byte { return manySeries(4000, 23, c) }, false},
		{"3000 series x 23 buckets (protobuf)", func(c int) []byte { return protoBody(b, manySeries(3000, 23, c)) }, true},
		{"100 series x 20 buckets (text)", func(c int) []byte { return manySeries(100, 20, c) }, false},
	}
	for _, pg := range pages {
		b.Run(pg.name, func(b *testing.B) {
			bodies := [][]byte{pg.body(10), pg.body(20)}
			n := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if pg.proto {
					w.Header().Set("Content-Type", string(protoFormat))
				}
				_, _ = w.Write(bodies[n%2])
				n++
			}))
			defer srv.Close()
			src := &Source{URL: srv.URL, Metric: "m", Timeout: time.Minute, MaxBytes: 4 << 20}
			sc := &scraper{httpc: srv.Client()}
			var peak, kept uint64
			var lastErr error
			for b.Loop() {
				base := liveHeap()
				tr := newSLOTracker(Spec{Name: "t", Source: src, Objective: &Objective{Quantile: 0.99, Target: time.Second}, Window: time.Minute})
				tr.setInterval(15 * time.Second)
				for i := range 2 {
					p := peakHeap(func() { lastErr = sc.scrapeOnce(context.Background(), tr, time.Unix(int64(15*i), 0)) })
					peak = max(peak, p)
				}
				kept = max(kept, liveHeap()-min(base, liveHeap()))
				runtime.KeepAlive(tr)
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
			b.ReportMetric(float64(kept)/(1<<20), "kept-MiB")
			b.ReportMetric(float64(len(bodies[0]))/(1<<20), "body-MiB")
			if lastErr != nil {
				b.Logf("%s: %v", pg.name, lastErr)
			}
		})
	}
}
