package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"
)

// BenchmarkScrape measures one /metrics request over a snapshot of the
// default built-in scenario, with the exporter's own metrics.
func BenchmarkScrape(b *testing.B) {
	cfg, err := parseArgs(b, "--backend=sim")
	if err != nil {
		b.Fatal(err)
	}
	svc, err := build(cfg, log.NewNopLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer svc.src.Close()
	if err := svc.sampler.SampleOnce(context.Background()); err != nil {
		b.Fatal(err)
	}
	h := serviceHandler(b, svc, selfRegistry())
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
	ne, err := exec.LookPath("prometheus-node-exporter")
	if err != nil {
		if ne, err = exec.LookPath("node_exporter"); err != nil {
			b.Skip("no node_exporter on PATH")
		}
	}
	cfg, err := parseArgs(b, "--backend=sim", "--sim.scenario=eight-gpu-hot")
	if err != nil {
		b.Fatal(err)
	}
	svc, err := build(cfg, log.NewNopLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer svc.src.Close()
	if err := svc.sampler.SampleOnce(context.Background()); err != nil {
		b.Fatal(err)
	}
	h := serviceHandler(b, svc, selfRegistry())

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

	var ours, theirs time.Duration
	for b.Loop() {
		c0 := selfCPU()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		ours += selfCPU() - c0

		n0 := childCPU(b, cmd.Process.Pid)
		resp, err := http.Get(neURL)
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
