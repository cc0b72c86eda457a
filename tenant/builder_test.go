package tenant

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
)

func TestBuildNoTenantsFile(t *testing.T) {
	b, err := NewBuilder(nil, BuilderOptions{Clock: gpu.NewManualClock(time.Unix(0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	mem := uint64(1 << 30)
	r := &gpu.Readings{Devices: []gpu.Device{
		{Index: 0, UUID: "GPU-a", Up: true, Mode: gpu.SharingTimeSlice, Processes: []gpu.Process{
			{PID: 10, Name: "python", GPUInstanceID: -1, UID: -1, UsedMemoryBytes: &mem, SMUtil: gpu.Float(0.3)},
			{PID: 11, Name: "vllm", GPUInstanceID: -1, UID: -1, UsedMemoryBytes: &mem, SMUtil: gpu.Float(0.2)},
		}},
		{Index: 1, UUID: "GPU-b", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true, MIG: []gpu.MIGInstance{
			{UUID: "MIG-1", GPUInstanceID: 1, Activity: gpu.Activity{SMActive: gpu.Float(0.5)}},
			{UUID: "MIG-2", GPUInstanceID: 2},
		}, Processes: []gpu.Process{{PID: 12, GPUInstanceID: 1, ComputeInstanceID: 0, UID: -1}}},
	}}
	s := b.Build(r, gpu.SamplerStats{})
	if len(s.Tenants) != 0 {
		t.Fatalf("tenants %v", s.Tenants)
	}
	// MIG-2 has no process and no tenant's selector names it: nobody's
	if len(s.Usage) != 2 {
		t.Fatalf("usage %+v", s.Usage)
	}
	for _, u := range s.Usage {
		if u.Tenant != Unassigned {
			t.Errorf("usage for %q, want only %q", u.Tenant, Unassigned)
		}
	}
	// no GPM on GPU-a: no SM share, but the processes' kernel-busy time
	if u := s.Usage[0]; u.Processes != 2 || u.SMActive != nil || u.KernelBusy == nil || *u.KernelBusy != 0.5 || u.MemoryUsedBytes != 2<<30 || len(u.PIDs) != 2 {
		t.Errorf("time-sliced usage %+v", u)
	}
	if u := s.Usage[1]; u.GPUInstance != "1" || *u.SMActive != 0.5 || u.Processes != 1 {
		t.Errorf("MIG 1 usage %+v", u)
	}
}

// BenchmarkBuild attributes a host of 8 time-sliced GPUs with 32 processes
// each to 16 tenants.
func BenchmarkBuild(b *testing.B) {
	yaml := "tenants:\n"
	for i := 0; i < 16; i++ {
		yaml += "  - name: t" + strconv.Itoa(i) + "\n    selectors: [{executable: \"app" + strconv.Itoa(i) + "\"}, {cgroup: \"/kubepods.slice/*pod" + strconv.Itoa(i) + "_*\"}]\n"
	}
	bl := mustBuilder(b, yaml, BuilderOptions{})
	r := &gpu.Readings{}
	for g := 0; g < 8; g++ {
		d := gpu.Device{Index: g, UUID: "GPU-" + strconv.Itoa(g), Up: true, Mode: gpu.SharingTimeSlice,
			Activity: gpu.Activity{SMActive: gpu.Float(0.9), DRAMActive: gpu.Float(0.5)}, ContextSwitchesTotal: gpu.Uint(100)}
		for p := 0; p < 32; p++ {
			mem := uint64(1 << 30)
			d.Processes = append(d.Processes, gpu.Process{
				PID: uint32(g*100 + p), Name: "app" + strconv.Itoa(p%17), UID: 1000, GPUInstanceID: -1,
				Cgroup: "/kubepods.slice/kubepods-pod" + strconv.Itoa(p%16) + "_x.slice/cri-containerd-ab.scope",
				SMUtil: gpu.Float(0.02), MemUtil: gpu.Float(0.01), UsedMemoryBytes: &mem,
			})
		}
		r.Devices = append(r.Devices, d)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = bl.Build(r, gpu.SamplerStats{})
	}
}

// TestReloadWhileRunning: a reload adds and removes latency sources of a
// started builder; the new source is scraped by its own loop.
func TestReloadWhileRunning(t *testing.T) {
	app := &testutil.FakeApp{Body: map[string][]byte{"a": fixture(t, "vllm-1.txt"), "b": fixture(t, "tgi-1.txt")}}
	clock := gpu.NewManualClock(time.Unix(0, 0))
	b, file := fileBuilder(t, "tenants:\n  - name: a\n    selectors: [{uid: 1}]\n    latency_source: {url: \"sim://a\", preset: vllm-e2e}\n",
		BuilderOptions{Clock: clock, Latency: latency.NewPool(latency.Options{Clock: clock, AppMetrics: app})})
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Start(ctx)
	wait := func(cond func(*Snapshot) bool) *Snapshot {
		deadline := time.Now().Add(20 * time.Second)
		for {
			s := b.Build(nil, gpu.SamplerStats{})
			if cond(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("condition never met: %+v", s.SLOs)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait(func(s *Snapshot) bool { return len(s.SLOs) == 1 && s.SLOs[0].SourceUp })
	write("tenants:\n  - name: b\n    selectors: [{uid: 2}]\n    latency_source: {url: \"sim://b\", preset: tgi}\n")
	if err := b.Reload(file); err != nil {
		t.Fatal(err)
	}
	s := wait(func(s *Snapshot) bool { return len(s.SLOs) == 1 && s.SLOs[0].Tenant == "b" && s.SLOs[0].SourceUp })
	if len(s.Tenants) != 1 || s.Tenants[0].Name != "b" {
		t.Errorf("tenants %+v", s.Tenants)
	}
	// That a's loop stopped is checked where the loops live, by
	// TestPoolSetWhileRunning in package latency.
}

// countingApp counts the reads of each sim:// application.
type countingApp struct {
	testutil.FakeApp
	mu    sync.Mutex
	reads int
}

func (c *countingApp) AppMetrics(app string, w io.Writer) error {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.FakeApp.AppMetrics(app, w)
}

func (c *countingApp) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// TestStartStopsOnCancel: every goroutine Start and a later Reload begin
// (two latency loops, the kubelet loop, a loop a reload added) returns once
// Start's context is cancelled, and no source is read after that.
func TestStartStopsOnCancel(t *testing.T) {
	app := &countingApp{FakeApp: testutil.FakeApp{Body: map[string][]byte{"a": fixture(t, "vllm-1.txt"), "b": fixture(t, "tgi-1.txt"), "c": fixture(t, "tgi-1.txt")}}}
	pods := &loopPods{}
	two := "tenants:\n" +
		"  - name: a\n    selectors: [{uid: 1}]\n    latency_source: {url: \"sim://a\", preset: vllm-e2e}\n" +
		"  - name: b\n    selectors: [{uid: 2}]\n    latency_source: {url: \"sim://b\", preset: tgi}\n"
	clock := gpu.NewManualClock(time.Unix(0, 0))
	b, file := fileBuilder(t, two, BuilderOptions{Clock: clock, Latency: latency.NewPool(latency.Options{Clock: clock, AppMetrics: app}), Pods: pods})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Start(ctx)
	three := two + "  - name: c\n    selectors: [{uid: 3}]\n    latency_source: {url: \"sim://c\", preset: tgi}\n"
	if err := os.WriteFile(file, []byte(three), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(file); err != nil {
		t.Fatal(err)
	}
	// hang guard only: the loops run on their own goroutines
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := b.Build(nil, gpu.SamplerStats{})
		up := 0
		for _, st := range s.SLOs {
			if st.SourceUp {
				up++
			}
		}
		if up == 3 && s.Kubelet.Up {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("loops never ran: %+v %+v", s.SLOs, s.Kubelet)
		}
		time.Sleep(5 * time.Millisecond)
		clock.Advance(time.Second) // a and b, started together, are first read 7.5 s apart
	}

	cancel()
	done := make(chan struct{})
	go func() { b.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("background goroutines still running 20 s after the context was cancelled")
	}
	reads := app.count()
	clock.Advance(time.Hour)
	if n := app.count(); n != reads {
		t.Errorf("sources read %d times after the loops stopped", n-reads)
	}
}

// TestBuildDoesNotWaitOnLatencySource: while a latency source hangs in the
// middle of a scrape, Build answers with the source's last known state.
func TestBuildDoesNotWaitOnLatencySource(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	b := mustBuilder(t, "tenants:\n  - name: a\n    selectors: [{uid: 1}]\n    latency_source: {url: \""+srv.URL+"\", preset: tgi, timeout: 10s}\n",
		BuilderOptions{Latency: latency.NewPool(latency.Options{HTTPClient: srv.Client()})})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); b.Wait() }()
	b.Start(ctx)
	<-entered // the scrape is now stuck in the source
	done := make(chan *Snapshot)
	go func() { done <- b.Build(sharedReadings(gpu.SharingTimeSlice, 1), gpu.SamplerStats{}) }()
	select {
	case s := <-done:
		if len(s.SLOs) != 1 || s.SLOs[0].Tenant != "a" || s.SLOs[0].ScrapeErrorsTotal != 0 {
			t.Errorf("SLOs during a stuck scrape: %+v", s.SLOs)
		}
	case <-time.After(20 * time.Second): // hang guard
		t.Fatal("Build waited on the latency source")
	}
}

// TestSourceFailureLogged: a latency source that fails is logged once with
// its URL (not at every scrape), and its recovery once.
func TestSourceFailureLogged(t *testing.T) {
	app := &testutil.FakeApp{Body: map[string][]byte{"chat": fixture(t, "vllm-1.txt")}, Err: errors.New("connection refused")}
	var logs bytes.Buffer
	logger := log.NewLogfmtLogger(log.NewSyncWriter(&logs))
	b := mustBuilder(t, "tenants:\n  - name: chat\n    selectors: [{uid: 1}]\n    latency_source: {url: \"sim://chat\", preset: vllm-e2e}\n",
		BuilderOptions{Latency: latency.NewPool(latency.Options{AppMetrics: app, Logger: logger}), Logger: logger})
	ctx := context.Background()
	for range 3 {
		b.Refresh(ctx)
	}
	if n := strings.Count(logs.String(), "latency source failed"); n != 1 || !strings.Contains(logs.String(), "sim://chat: connection refused") {
		t.Errorf("%d failure lines, want 1 naming the URL:\n%s", n, logs.String())
	}
	app.SetErr(nil)
	b.Refresh(ctx)
	b.Refresh(ctx)
	if n := strings.Count(logs.String(), "latency source recovered"); n != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", n, logs.String())
	}
}
