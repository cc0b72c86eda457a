package collector

import (
	"bytes"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
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

// scaleSnapshot is about the scrape-latency scenario's snapshot
// (test/scrape-latency): 8 GPUs of 7 MIG instances, 64 tenants with SLOs,
// 9 tenants' usage on each instance (504 usage series of each metric).
func scaleSnapshot(step int) *tenant.Snapshot {
	s := bigSnapshot(8, 64)
	s.Sampler.SamplesTotal = uint64(step)
	s.Usage = s.Usage[:0]
	for i := range 8 {
		for gi := 1; gi <= 7; gi++ {
			for k := range 9 {
				t := (i*7*9 + (gi-1)*9 + k) % 64
				s.Usage = append(s.Usage, tenant.Usage{Tenant: fmt.Sprintf("tenant-%02d", t), Class: "latency", GPU: i,
					UUID: fmt.Sprintf("GPU-%04d", i), GPUInstance: fmt.Sprint(gi), Processes: 1,
					Method: tenant.Apportioned, SMActive: gpu.Float(float64(step%7) / 8), DRAMActive: gpu.Float(0.5),
					MemoryUsedBytes: uint64(step+k) * gib, ContextSwitchesTotal: gpu.Float(float64(step))})
			}
		}
	}
	return s
}

// BenchmarkPublish is what the exporter does once per published snapshot
// at the scrape-latency scale: gather every collector over a new snapshot
// (the values move, the series stay) and encode it as text into the
// memory of the rendering before; BenchmarkPublishText renders the same
// with Text.
func BenchmarkPublish(b *testing.B) {
	benchPublish(b, func(c prometheus.Collector) func(*bytes.Buffer) error {
		reg := prometheus.NewRegistry()
		reg.MustRegister(c)
		return func(buf *bytes.Buffer) error {
			mfs, err := reg.Gather()
			if err != nil {
				return err
			}
			enc := expfmt.NewEncoder(buf, expfmt.NewFormat(expfmt.TypeTextPlain))
			for _, mf := range mfs {
				if err := enc.Encode(mf); err != nil {
					return err
				}
			}
			return nil
		}
	})
}

func BenchmarkPublishText(b *testing.B) {
	benchPublish(b, func(c prometheus.Collector) func(*bytes.Buffer) error {
		t := NewText(c)
		return func(buf *bytes.Buffer) error { return t.Render(buf, nil) }
	})
}

// benchPublish publishes with the renderer newRender returns.
func benchPublish(b *testing.B, newRender func(prometheus.Collector) func(*bytes.Buffer) error) {
	snaps := []*tenant.Snapshot{scaleSnapshot(1), scaleSnapshot(2)}
	var cur atomic.Pointer[tenant.Snapshot]
	cur.Store(snaps[0])
	e, err := NewExporter(cur.Load, nil)
	if err != nil {
		b.Fatal(err)
	}
	render := newRender(e)
	var buf bytes.Buffer
	publish := func() {
		buf.Reset()
		if err := render(&buf); err != nil {
			b.Fatal(err)
		}
	}
	publish()
	cur.Store(snaps[1])
	publish() // the first update with its series cached
	b.ReportAllocs()
	i := 1
	for b.Loop() {
		i++
		cur.Store(snaps[i%2])
		publish()
	}
	b.ReportMetric(float64(buf.Len()), "bytes/publication")
}
