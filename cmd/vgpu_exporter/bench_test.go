package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/common/expfmt"

	"github.com/vgpu-exporter/vgpu_exporter/collector"
	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// BenchmarkScrape measures one /metrics request over a snapshot of the
// default built-in scenario, with the exporter's own metrics.
func BenchmarkScrape(b *testing.B) {
	h := serviceHandler(b, sampledService(b, "--backend=sim"), selfRegistry())
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != 200 {
			b.Fatalf("code %d", rec.Code)
		}
		io.Copy(io.Discard, rec.Body)
	}
}

// BenchmarkScrapeVsNodeExporter serves the eight-GPU scenario through the
// exporter's handler and, in the same run, scrapes a node_exporter
// (prometheus-node-exporter on PATH) as often, and reports each one's CPU
// time per series served and their ratio. Skipped without node_exporter.
func BenchmarkScrapeVsNodeExporter(b *testing.B) {
	svc := sampledService(b, "--backend=sim", "--sim.scenario=eight-gpu-hot")
	benchVsNodeExporter(b, serviceHandler(b, svc, selfRegistry()))
}

// sampledService builds the service the flags args describe and samples
// it once; its source is closed when the benchmark ends.
func sampledService(b *testing.B, args ...string) *service {
	b.Helper()
	cfg, err := parseArgs(b, args...)
	if err != nil {
		b.Fatal(err)
	}
	svc, err := build(cfg, log.NewNopLogger())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.src.Close() })
	if err := svc.Sampler().SampleOnce(context.Background()); err != nil {
		b.Fatal(err)
	}
	return svc
}

// BenchmarkScrapeAtScale is BenchmarkScrapeVsNodeExporter on 8 GPUs of 7
// MIG instances each running 512 processes of 64 tenants, every tenant
// with an SLO read from a latency source; it also reports the
// distribution of a scrape's time in the handler (p50, p99).
func BenchmarkScrapeAtScale(b *testing.B) {
	vllm := []byte(`# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="0.1"} 90
vllm:e2e_request_latency_seconds_bucket{le="0.5"} 99
vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 100
vllm:e2e_request_latency_seconds_sum 9
vllm:e2e_request_latency_seconds_count 100
`)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(vllm) }))
	defer app.Close()
	const gpus, migs, procs, tenants = 8, 7, 512, 64
	var yaml strings.Builder
	yaml.WriteString("tenants:\n")
	for t := range tenants {
		fmt.Fprintf(&yaml, "  - name: t%02d\n    class: latency\n    selectors: [{executable: app%d}]\n    slo: {quantile: 0.99, target: 250ms}\n    latency_source: {url: %q, preset: vllm-e2e}\n", t, t, app.URL)
	}
	tcfg, err := tenant.ParseConfig("bench.yaml", []byte(yaml.String()))
	if err != nil {
		b.Fatal(err)
	}
	pool := latency.NewPool(latency.Options{})
	bl, err := tenant.NewBuilder(tcfg, tenant.BuilderOptions{Latency: pool})
	if err != nil {
		b.Fatal(err)
	}
	bl.Refresh(context.Background())
	r := &gpu.Readings{Backend: "bench"}
	for g := range gpus {
		d := gpu.Device{Index: g, UUID: fmt.Sprintf("GPU-%d", g), Name: "NVIDIA H100", Up: true, MIGEnabled: true,
			MemoryTotalBytes: 80 << 30, MemoryUsedBytes: 40 << 30, Activity: gpu.Activity{SMActive: gpu.Float(0.5), DRAMActive: gpu.Float(0.25)}}
		for m := 1; m <= migs; m++ {
			d.MIG = append(d.MIG, gpu.MIGInstance{UUID: fmt.Sprintf("MIG-%d-%d", g, m), GPUInstanceID: m, Profile: "1g.10gb", SMCount: 16,
				MemoryTotalBytes: 10 << 30, MemoryUsedBytes: 5 << 30, Activity: gpu.Activity{SMActive: gpu.Float(0.5), DRAMActive: gpu.Float(0.25), Source: "gpm"}})
		}
		for p := range procs / gpus {
			mem := uint64(1 << 28)
			d.Processes = append(d.Processes, gpu.Process{PID: uint32(g*1000 + p), Name: fmt.Sprintf("app%d", (g*procs/gpus+p)%tenants),
				Type: gpu.ProcessCompute, GPUInstanceID: 1 + p%migs, UID: 1000, UsedMemoryBytes: &mem})
		}
		r.Devices = append(r.Devices, d)
	}
	svc := newService(&fixedSource{r: r}, bl, "", gpu.RealClock{}, time.Second, log.NewNopLogger())
	if err := svc.Sampler().SampleOnce(context.Background()); err != nil {
		b.Fatal(err)
	}
	benchVsNodeExporter(b, serviceHandler(b, svc, selfRegistry()))
}

// The scenario test/scrape-latency/scrape-latency.sh runs the exporter on
// has the scale it is measured at: 8 GPUs of 7 MIG instances, 512
// processes of 64 tenants, each tenant with a latency source.
func TestScrapeLatencyScenarioScale(t *testing.T) {
	clock := gpu.NewManualClock(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
	svc, err := buildOn(testConfig(t, "--backend=sim", "--sim.scenario=../../test/scrape-latency/scale.yaml"), clock, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer svc.src.Close()
	clock.Advance(time.Second)
	if err := svc.Sampler().SampleOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	snap := svc.Snapshot()
	var migs, procs int
	for _, d := range snap.Readings.Devices {
		migs += len(d.MIG)
		procs += len(d.Processes)
	}
	if got := [...]int{len(snap.Readings.Devices), migs, procs, len(snap.Tenants), len(snap.SLOs)}; got != [...]int{8, 56, 512, 64, 64} {
		t.Errorf("GPUs, MIG instances, processes, tenants, SLOs: %v, want 8, 56, 512, 64, 64", got)
	}
	for _, u := range snap.Usage {
		if u.Tenant == tenant.Unassigned && u.Processes > 0 {
			t.Errorf("%d processes unassigned on GPU %d", u.Processes, u.GPU)
		}
	}
}

// discardWriter is a ResponseWriter that drops the body, as a socket
// would take it: the recorder's growing buffer is not the handler's cost.
type discardWriter struct{ header http.Header }

func (w discardWriter) Header() http.Header       { return w.header }
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (discardWriter) WriteHeader(int)             {}

// fixedSource returns the same readings at every sample.
type fixedSource struct{ r *gpu.Readings }

func (fixedSource) Name() string                                     { return "bench" }
func (s *fixedSource) Sample(context.Context) (*gpu.Readings, error) { return s.r, nil }
func (fixedSource) Close() error                                     { return nil }

// benchVsNodeExporter scrapes h and, in the same loop, a node_exporter
// started for the run, and reports the series h serves, each one's CPU
// time per series, their ratio, and the p50 and p99 of h's scrape time.
// Skipped without node_exporter.
//
// Both are asked for gzip, as Prometheus asks by default, and neither
// response is decoded: what is timed and charged is the server's work up
// to the last byte of its response (for h, from the call of ServeHTTP to
// its return, all bytes written). Prometheus's scrape_duration_seconds of
// the same target is longer: it runs from sending the request until the
// body has been read, gunzipped and its samples appended, so it also
// holds the network, the decompression and Prometheus's own parsing.
func benchVsNodeExporter(b *testing.B, h http.Handler) {
	ne, err := exec.LookPath("prometheus-node-exporter")
	if err != nil {
		if ne, err = exec.LookPath("node_exporter"); err != nil {
			b.Skip("no node_exporter on PATH")
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(ne, "--web.listen-address="+addr)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	neURL := "http://" + addr + "/metrics"
	var neSeries int
	for range 100 {
		if resp, err := http.Get(neURL); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			neSeries = countSeries(string(body))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if neSeries == 0 {
		b.Fatal("node_exporter did not answer")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	series := countSeries(rec.Body.String())

	neReq, err := http.NewRequest("GET", neURL, nil)
	if err != nil {
		b.Fatal(err)
	}
	neReq.Header.Set("Accept-Encoding", "gzip")

	var ours, theirs time.Duration
	var took []time.Duration
	for b.Loop() {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		t0, c0 := time.Now(), selfCPU()
		h.ServeHTTP(discardWriter{header: http.Header{}}, req)
		ours += selfCPU() - c0
		took = append(took, time.Since(t0))

		n0 := childCPU(b, cmd.Process.Pid)
		// With Accept-Encoding set here, the transport leaves the body
		// compressed.
		resp, err := http.DefaultClient.Do(neReq)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		theirs += childCPU(b, cmd.Process.Pid) - n0
	}
	n := float64(b.N)
	oursPer := ours.Seconds() * 1e6 / n / float64(series)
	theirsPer := theirs.Seconds() * 1e6 / n / float64(neSeries)
	b.ReportMetric(float64(series), "series")
	b.ReportMetric(oursPer, "cpu-us/series")
	b.ReportMetric(theirsPer, "node-cpu-us/series")
	if theirsPer > 0 {
		b.ReportMetric(oursPer/theirsPer, "cpu-ratio")
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1e3, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1e3, "p99-ms")
}

func countSeries(body string) int {
	n := 0
	for line := range strings.SplitSeq(body, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			n++
		}
	}
	return n
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// childCPU is process pid's user+system CPU time from /proc (clock ticks
// of 10 ms, so it is summed over many scrapes).
func childCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// BenchmarkSelfMetrics measures the exporter's own metrics (selfRegistry:
// build info, Go runtime, process) rendered for one /metrics request in
// the text format: as served, by collector.Text, and, for comparison,
// gathered into families and encoded by expfmt.
func BenchmarkSelfMetrics(b *testing.B) {
	self := selfRegistry()
	text := collector.NewText(self.Collector())
	for _, bc := range []struct {
		name   string
		render func(*bytes.Buffer) error
	}{
		{"served", func(buf *bytes.Buffer) error { return text.Render(buf, nil) }},
		{"gathered", func(buf *bytes.Buffer) error {
			mfs, err := self.Gather()
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
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if err := bc.render(&buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len()), "bytes/render")
		})
	}
}
