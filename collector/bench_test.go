package collector

import (
	"io"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// BenchmarkScrape8GPU renders a full snapshot of 8 GPUs with 7 MIG
// instances each and 32 tenants with SLOs through every collector
// (Exporter.Collect only).
func BenchmarkScrape8GPU(b *testing.B) {
	e := newExporter(b, bigSnapshot(8, 32))
	n := 0
	count := make(chan prometheus.Metric)
	go func() {
		e.Collect(count)
		close(count)
	}()
	for range count {
		n++
	}
	ch := make(chan prometheus.Metric, n+64)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		e.Collect(ch)
		for len(ch) > 0 {
			<-ch
		}
	}
	b.ReportMetric(float64(n), "metrics/op")
}

// BenchmarkGather8GPU is a whole scrape of the same snapshot: registry
// gather (sorting, consistency checks) and text encoding.
func BenchmarkGather8GPU(b *testing.B) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newExporter(b, bigSnapshot(8, 32)))
	b.ReportAllocs()
	for b.Loop() {
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				b.Fatal(err)
			}
		}
	}
}
