package tenant

import (
	"context"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
)

// appReads is a FakeApp that counts the reads of each application.
type appReads struct {
	testutil.FakeApp
	mu    sync.Mutex
	reads map[string]int
}

func (a *appReads) AppMetrics(app string, w io.Writer) error {
	a.mu.Lock()
	a.reads[app]++
	a.mu.Unlock()
	return a.FakeApp.AppMetrics(app, w)
}

func (a *appReads) count(app string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reads[app]
}

// TestSourcesReadWhereTenantRuns: with SourcesWhereRunning (the
// exporter's default), one tenants file given to every host has a
// tenant's latency source read and served only by the exporter of a host
// where the tenant has usage, and there until it has had none for its SLO
// window (5m here), the time a GPU it had usage on was not read not
// counted (that another GPU of the host is not read keeps no tenant).
// "search" never runs on this host: its source is never read and no SLO
// of it is served. "chat" runs here (the vllm processes of user 1000).
func TestSourcesReadWhereTenantRuns(t *testing.T) {
	type step struct {
		at     time.Duration // since the start
		chat   bool          // chat's processes are on GPU 0
		down   bool          // GPU 0 is not read
		served []string      // the SLOs served after the step
		// GPU 1, listed with one of these (else not listed): chat's
		// processes on it, or not read
		chat1, down1 bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"tenant runs here, another does not", []step{
			{0, true, false, []string{"chat"}, false, false},
			{15 * time.Second, true, false, []string{"chat"}, false, false},
			{30 * time.Second, true, false, []string{"chat"}, false, false},
		}},
		{"no tenant runs here", []step{
			{0, false, false, nil, false, false},
			{15 * time.Second, false, false, nil, false, false},
		}},
		{"away for less than its window", []step{
			{0, true, false, []string{"chat"}, false, false},
			{15 * time.Second, true, false, []string{"chat"}, false, false},
			{time.Minute, false, false, []string{"chat"}, false, false},
			{5 * time.Minute, false, false, []string{"chat"}, false, false},
			{5*time.Minute + 15*time.Second, true, false, []string{"chat"}, false, false},
		}},
		{"away for its window, then back", []step{
			{0, true, false, []string{"chat"}, false, false},
			{15 * time.Second, true, false, []string{"chat"}, false, false},
			{time.Minute, false, false, []string{"chat"}, false, false},
			{5*time.Minute + 15*time.Second, false, false, nil, false, false},
			{6 * time.Minute, true, false, []string{"chat"}, false, false},
		}},
		{"GPU not read", []step{
			{0, true, false, []string{"chat"}, false, false},
			{15 * time.Second, true, false, []string{"chat"}, false, false},
			{time.Minute, false, true, []string{"chat"}, false, false},
			{10 * time.Minute, false, true, []string{"chat"}, false, false},
			{14 * time.Minute, false, false, []string{"chat"}, false, false},
		}},
		{"away for its window while another GPU is not read", []step{
			{0, true, false, []string{"chat"}, false, false},
			{time.Minute, false, false, []string{"chat"}, false, true},
			{5*time.Minute + 15*time.Second, false, false, nil, false, true},
			{2 * time.Hour, false, false, nil, false, true},
		}},
		{"on a GPU not read, away from another", []step{
			{0, true, false, []string{"chat"}, true, false},
			{15 * time.Second, true, false, []string{"chat"}, true, false},
			{time.Minute, false, false, []string{"chat"}, false, true},
			{10 * time.Minute, false, false, []string{"chat"}, false, true},
			{14 * time.Minute, false, false, []string{"chat"}, false, false},
			{15*time.Minute + 15*time.Second, false, false, nil, false, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Unix(1000, 0)
			clock := gpu.NewManualClock(start)
			app := &appReads{FakeApp: testutil.FakeApp{Body: map[string][]byte{"chat": fixture(t, "vllm-1.txt"), "search": fixture(t, "tgi-1.txt")}}, reads: map[string]int{}}
			b := mustBuilder(t, `tenants:
  - name: chat
    selectors: [{uid: 1000}]
    latency_source: {url: "sim://chat", preset: vllm-e2e}
  - name: search
    selectors: [{uid: 2000}]
    latency_source: {url: "sim://search", preset: tgi}
`, BuilderOptions{Clock: clock, Latency: latency.NewPool(latency.Options{Clock: clock, AppMetrics: app}), SourcesWhereRunning: true})
			ctx := context.Background()
			b.Refresh(ctx) // before the first sample: nothing is known to run here
			for _, st := range tc.steps {
				clock.Set(start.Add(st.at))
				r := sharedReadings(gpu.SharingTimeSlice, 1)
				r.Time = clock.Now()
				if !st.chat {
					r.Devices[0].Processes = slices.DeleteFunc(r.Devices[0].Processes, func(p gpu.Process) bool { return p.UID == 1000 })
				}
				r.Devices[0].Up = !st.down
				if st.chat1 || st.down1 {
					d := gpu.Device{Index: 1, UUID: "GPU-1", Up: !st.down1, Mode: gpu.SharingTimeSlice}
					if st.chat1 {
						d.Processes = slices.DeleteFunc(slices.Clone(sharedReadings(gpu.SharingTimeSlice, 1).Devices[0].Processes), func(p gpu.Process) bool { return p.UID != 1000 })
					}
					r.Devices = append(r.Devices, d)
				}
				b.Build(r, gpu.SamplerStats{})
				b.Refresh(ctx)
				var served []string
				for _, s := range b.Build(r, gpu.SamplerStats{}).SLOs {
					served = append(served, s.Tenant)
				}
				if !slices.Equal(served, st.served) {
					t.Errorf("at %s: SLOs served %v, want %v", st.at, served, st.served)
				}
			}
			if n := app.count("search"); n != 0 {
				t.Errorf("search's source read %d times on a host it does not run on", n)
			}
		})
	}
}

// TestSourcesWhereRunningReload: a reload keeps reading the source of a
// tenant that runs here, its counters going on, and does not read that of
// a tenant it adds that does not run here.
func TestSourcesWhereRunningReload(t *testing.T) {
	clock := gpu.NewManualClock(time.Unix(1000, 0))
	app := &appReads{FakeApp: testutil.FakeApp{Body: map[string][]byte{"chat": fixture(t, "vllm-1.txt"), "search": fixture(t, "tgi-1.txt")}}, reads: map[string]int{}}
	chat := "tenants:\n  - name: chat\n    selectors: [{uid: 1000}]\n    latency_source: {url: \"sim://chat\", preset: vllm-e2e}\n"
	b, file := fileBuilder(t, chat, BuilderOptions{Clock: clock, Latency: latency.NewPool(latency.Options{Clock: clock, AppMetrics: app}), SourcesWhereRunning: true})
	ctx := context.Background()
	build := func() []SLOStatus {
		r := sharedReadings(gpu.SharingTimeSlice, 1)
		r.Time = clock.Now()
		return b.Build(r, gpu.SamplerStats{}).SLOs
	}
	build()
	b.Refresh(ctx)
	clock.Advance(15 * time.Second)
	app.Set("chat", fixture(t, "vllm-2.txt"))
	build()
	b.Refresh(ctx)
	before := build()
	if len(before) != 1 || before[0].RequestsTotal == 0 {
		t.Fatalf("before the reload: SLOs %+v, want chat's with requests", before)
	}
	if err := os.WriteFile(file, []byte(chat+"  - name: search\n    selectors: [{uid: 2000}]\n    latency_source: {url: \"sim://search\", preset: tgi}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(""); err != nil {
		t.Fatal(err)
	}
	clock.Advance(15 * time.Second)
	build()
	b.Refresh(ctx)
	after := build()
	if len(after) != 1 || after[0].Tenant != "chat" || after[0].RequestsTotal < before[0].RequestsTotal {
		t.Errorf("after the reload: SLOs %+v, want chat's alone, its requests at least %v", after, before[0].RequestsTotal)
	}
	if n := app.count("search"); n != 0 {
		t.Errorf("search's source read %d times on a host it does not run on", n)
	}
}

// TestSourcesWhereRunningReloadKubeletDown: a tenant of pods whose new pod
// the last good kubelet mapping does not know (its processes go to
// Unassigned while the kubelet is down) is kept read, its absence known
// only up to that mapping; a reload of the tenants file expires nothing
// (a sample, with the mapping's time, does), so it keeps it read and
// served, its counters going on.
func TestSourcesWhereRunningReloadKubeletDown(t *testing.T) {
	start := time.Unix(1000, 0)
	clock := gpu.NewManualClock(start)
	app := &appReads{FakeApp: testutil.FakeApp{Body: map[string][]byte{"chat": fixture(t, "vllm-1.txt")}}, reads: map[string]int{}}
	pods := &churnPods{}
	yaml := "tenants:\n  - name: chat\n    selectors: [{kubernetes: {namespace: llm}}]\n    latency_source: {url: \"sim://chat\", preset: vllm-e2e}\n"
	b, file := fileBuilder(t, yaml, BuilderOptions{Clock: clock, Pods: pods, Latency: latency.NewPool(latency.Options{Clock: clock, AppMetrics: app}), SourcesWhereRunning: true})
	ctx := context.Background()
	pods.m.Store(podsOn(t, "llm/chat=GPU-0"))
	served := func(pod string) []SLOStatus {
		d := testutil.Device(0, "GPU-0", podProc(100, pod, 0.3))
		d.Mode = gpu.SharingTimeSlice
		r := &gpu.Readings{Time: clock.Now(), Interval: 15 * time.Second, Devices: []gpu.Device{d}}
		b.Build(r, gpu.SamplerStats{})
		b.Refresh(ctx)
		return b.Build(r, gpu.SamplerStats{}).SLOs
	}
	pods.refresh(clock.Now(), false, false)
	if slos := served("chat"); len(slos) != 1 {
		t.Fatalf("SLOs served %+v while chat runs here, want chat's", slos)
	}
	// The kubelet goes down; chat's pod is replaced by chat-2, which the
	// last good mapping does not know: past chat's window (5m) after it.
	var before []SLOStatus
	for at := 15 * time.Second; at <= 10*time.Minute; at += 15 * time.Second {
		clock.Set(start.Add(at))
		pods.refresh(clock.Now(), true, false)
		app.Set("chat", fixture(t, "vllm-2.txt"))
		if before = served("chat-2"); len(before) != 1 {
			t.Fatalf("at %v, the kubelet down: SLOs served %+v, want chat's", at, before)
		}
	}
	if err := os.WriteFile(file, []byte(yaml+"  - name: other\n    selectors: [{uid: 4242}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(""); err != nil {
		t.Fatal(err)
	}
	clock.Advance(15 * time.Second)
	pods.refresh(clock.Now(), true, false)
	if after := served("chat-2"); len(after) != 1 || after[0].RequestsTotal < before[0].RequestsTotal {
		t.Errorf("after a reload, the kubelet still down: SLOs served %+v, want chat's, its requests at least %v", after, before[0].RequestsTotal)
	}
}

// TestInfoSLOWindow: a tenant with a latency source is configured with
// its SLO window (its own, else the file's default) in the snapshot's
// tenants, whether or not its source is read here: under
// SourcesWhereRunning a tenant without usage on this host has no SLO
// status served, and what the tuner judges by the configuration alone
// (a latency tenant that may have been here before the exporter
// restarted) needs it there. A tenant without a source has none, and a
// reload that drops an SLO and its source drops it.
func TestInfoSLOWindow(t *testing.T) {
	clock := gpu.NewManualClock(time.Unix(1000, 0))
	app := &testutil.FakeApp{Body: map[string][]byte{"chat": fixture(t, "vllm-1.txt"), "search": fixture(t, "tgi-1.txt")}}
	head := "defaults:\n  slo_window: 3m\ntenants:\n  - name: embed\n    class: batch\n    selectors: [{uid: 1002}]\n"
	search := "  - name: search\n    class: latency\n    selectors: [{uid: 2000}]\n    latency_source: {url: \"sim://search\", preset: tgi}\n"
	chat := "  - name: chat\n    class: latency\n    selectors: [{uid: 3000}]\n    slo: {quantile: 0.99, target: 1s, window: 10m}\n    latency_source: {url: \"sim://chat\", preset: vllm-e2e}\n"
	b, file := fileBuilder(t, head+search+chat, BuilderOptions{Clock: clock, Latency: latency.NewPool(latency.Options{Clock: clock, AppMetrics: app}), SourcesWhereRunning: true})
	windows := func() map[string]time.Duration {
		r := sharedReadings(gpu.SharingTimeSlice, 1)
		r.Time = clock.Now()
		b.Build(r, gpu.SamplerStats{})
		b.Refresh(context.Background())
		s := b.Build(r, gpu.SamplerStats{})
		if len(s.SLOs) != 0 {
			t.Fatalf("SLOs %+v served for tenants without usage here", s.SLOs)
		}
		out := map[string]time.Duration{}
		for _, in := range s.Tenants {
			out[in.Name] = in.SLOWindow
		}
		return out
	}
	want := map[string]time.Duration{"embed": 0, "search": 3 * time.Minute, "chat": 10 * time.Minute}
	if got := windows(); !maps.Equal(got, want) {
		t.Errorf("SLO windows %v, want %v", got, want)
	}
	if err := os.WriteFile(file, []byte(head+search+chat[:strings.Index(chat, "    slo:")]), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(""); err != nil {
		t.Fatal(err)
	}
	want["chat"] = 0
	if got := windows(); !maps.Equal(got, want) {
		t.Errorf("after a reload that dropped chat's SLO and source: SLO windows %v, want %v", got, want)
	}
}
