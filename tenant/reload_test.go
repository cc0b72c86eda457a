package tenant

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// TestReloadRefusesHostileFiles: a reload of a file with no tenants, one
// the caller's Check refuses, or through a symlink to a device, a FIFO or
// an oversized file, fails with an error naming the file, is counted, and
// leaves the last good tenants in use, logging nothing: the caller logs
// the error once (the pipeline, in the reload's outcome); with AllowEmpty
// an empty file is installed, which is logged.
func TestReloadRefusesHostileFiles(t *testing.T) {
	dir := t.TempDir()
	good := "tenants:\n  - name: a\n    selectors: [{uid: 1}]\n"
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", MaxConfigBytes)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		content    string // written to the file, or
		target     string // the file becomes a symlink to this
		allowEmpty bool
		check      func(*Config) error // BuilderOptions.Check
		want       string              // "" : the reload succeeds
	}{
		{name: "zero bytes", content: "", want: "defines no tenants"},
		{name: "no tenants", content: "tenants: []\n", want: "defines no tenants"},
		{name: "defaults only", content: "defaults: {scrape_interval: 10s}\n", want: "defines no tenants"},
		{name: "empty allowed", content: "", allowEmpty: true},
		{name: "symlink to /dev/zero", target: "/dev/zero", want: "not a regular file (a character device)"},
		{name: "symlink to a FIFO", target: fifo, want: "not a regular file (a named pipe)"},
		{name: "symlink to a large file", target: big, want: fmt.Sprintf("larger than the limit of %d bytes", MaxConfigBytes)},
		{name: "refused by the caller's check", content: "tenants:\n  - name: b\n    selectors: [{uid: 2}]\n", want: "tenant b is not in the scenario",
			check: func(c *Config) error {
				if c.TenantByName("b") != nil {
					return fmt.Errorf("%s: tenant b is not in the scenario", c.File)
				}
				return nil
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logs := &testutil.SyncBuffer{}
			b, file := fileBuilder(t, good, BuilderOptions{AllowEmpty: tc.allowEmpty, Check: tc.check, Logger: log.NewLogfmtLogger(logs)})
			if tc.target != "" {
				if err := os.Remove(file); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(tc.target, file); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(file, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			err := b.Reload(file)
			s := b.Build(nil, gpu.SamplerStats{})
			if tc.want == "" {
				if err != nil || len(b.Config().Tenants) != 0 || !s.Config.LastReloadSuccessful {
					t.Fatalf("reload: %v, %d tenants, status %+v", err, len(b.Config().Tenants), s.Config)
				}
				if !strings.Contains(logs.String(), `level=info msg="tenants file reloaded"`) {
					t.Errorf("log %q, want the reload logged", logs)
				}
				return
			}
			if logs.String() != "" {
				t.Errorf("the failed reload logged, where its caller logs the error it returns:\n%s", logs)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), file) {
				t.Fatalf("reload: %v, want an error naming %s with %q", err, file, tc.want)
			}
			if s.Config.LastReloadSuccessful || s.Config.ReloadsTotal != 1 || s.Config.ReloadFailuresTotal != 1 {
				t.Errorf("status %+v", s.Config)
			}
			if ts := b.Config().Tenants; len(ts) != 1 || ts[0].Name != "a" {
				t.Errorf("tenants after the failed reload: %+v", ts)
			}
		})
	}
}

// A reload made quietly (one whose lines the pipeline holds back: a
// client asking for reloads faster than they are logged) installs the
// file and counts the reload as Reload does, logging nothing.
func TestReloadQuietlyInstallsWithoutLogging(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	b, file := fileBuilder(t, "tenants:\n  - name: a\n    selectors: [{uid: 1}]\n", BuilderOptions{Logger: log.NewLogfmtLogger(logs)})
	if err := os.WriteFile(file, []byte("tenants:\n  - name: b\n    selectors: [{uid: 2}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.ReloadQuietly(file); err != nil {
		t.Fatal(err)
	}
	s := b.Build(nil, gpu.SamplerStats{})
	if ts := b.Config().Tenants; len(ts) != 1 || ts[0].Name != "b" || s.Config.ReloadsTotal != 1 || !s.Config.LastReloadSuccessful {
		t.Errorf("after a quiet reload: tenants %+v, status %+v, want b installed and the reload counted", ts, s.Config)
	}
	if logs.String() != "" {
		t.Errorf("a quiet reload logged:\n%s", logs)
	}
}

// TestLatencySourceLimits: max_bytes has a ceiling and follow_redirects
// takes one of three policies; errors name file:line.
func TestLatencySourceLimits(t *testing.T) {
	for _, tc := range []struct{ src, want, follow string }{
		{`{url: "http://h/m", preset: tgi, max_bytes: 200MiB}`, "t.yaml:4: latency_source.max_bytes 200MiB is above the ceiling of 64MiB", ""},
		{`{url: "http://h/m", preset: tgi, max_bytes: 64MiB}`, "", "same-host"},
		{`{url: "http://h/m", preset: tgi, follow_redirects: any}`, "", "any"},
		{`{url: "http://h/m", preset: tgi, follow_redirects: none}`, "", "none"},
		{`{url: "http://h/m", preset: tgi, follow_redirects: always}`, `t.yaml:4: latency_source.follow_redirects "always" is not one of same-host, any, none`, ""},
	} {
		cfg, err := ParseConfig("t.yaml", []byte("tenants:\n  - name: a\n    selectors: [{uid: 1}]\n    latency_source: "+tc.src+"\n"))
		switch {
		case tc.want != "":
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: err %v, want %q", tc.src, err, tc.want)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.src, err)
		case cfg.Tenants[0].LatencySource.FollowRedirects != tc.follow || latencySpecs(cfg)[0].Source.FollowRedirects != tc.follow:
			t.Errorf("%s: follow_redirects %q, want %q", tc.src, cfg.Tenants[0].LatencySource.FollowRedirects, tc.follow)
		}
	}
}

// TestLoadConfigMemoryBounded: the densest YAML a tenants file may hold (a
// flow list of one-character scalars, as long as the file may be) costs
// about a hundred bytes a byte to parse; the file's bound keeps that well
// under the chart's 256 MiB memory limit (at 4 MiB it was 450 MB).
func TestLoadConfigMemoryBounded(t *testing.T) {
	file := filepath.Join(t.TempDir(), "dense.yaml")
	if err := os.WriteFile(file, []byte("x: ["+strings.Repeat("0,", MaxConfigBytes/2-4)+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	alloc := testutil.Allocated(func() { _, err = LoadConfig(file) })
	if err == nil || !strings.Contains(err.Error(), `unknown key "x"`) {
		t.Fatalf("error %v", err)
	}
	if alloc > 160<<20 {
		t.Errorf("parsing %d bytes allocated %d MB", MaxConfigBytes, alloc>>20)
	}
}

// TestReloadDoesNotHoldSamples: a reload reads and checks the file before
// it takes the lock a sample takes too, so that a sample goes on while a
// slow file (here one that exhausts the overlap check's budget, about a
// second) is checked, and sees the reload only once it is done.
func TestReloadDoesNotHoldSamples(t *testing.T) {
	b, file := fileBuilder(t, "tenants:\n  - name: a\n    selectors: [{uid: 1}]\n", BuilderOptions{})
	long := strings.Repeat("a", 1<<14)
	slow := fmt.Sprintf("tenants:\n  - {name: a, selectors: [{executable: %q}]}\n  - {name: b, selectors: [{executable: %q}]}\n", "*"+long+"?b*", long+long)
	if err := os.WriteFile(file, []byte(slow), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Reload("") }()
	time.Sleep(100 * time.Millisecond) // the reload is under way
	snap := b.Build(nil, gpu.SamplerStats{})
	if c := snap.Config; c.ReloadsTotal != 0 || c.ReloadFailuresTotal != 0 {
		t.Errorf("the sample waited for the reload: it saw %+v", c)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "cost too much to check for overlaps") {
		t.Fatalf("reload: %v", err)
	}
	if c := b.Build(nil, gpu.SamplerStats{}).Config; c.ReloadsTotal != 1 || c.ReloadFailuresTotal != 1 || b.Config().Tenants[0].Selectors[0].UID == nil {
		t.Errorf("after the reload: %+v, tenants %+v", c, b.Config().Tenants)
	}
}

// reloadingPods is a PodMapper without pods whose Mapping, which Build asks
// before it attributes a sample, runs reload once: a reload that lands
// while a sample is being built.
type reloadingPods struct {
	fixedPods
	reload func()
}

func (p *reloadingPods) Mapping() *kube.Mapping {
	if f := p.reload; f != nil {
		p.reload = nil
		f()
	}
	return nil
}

// TestReloadDuringBuild: a sample being built when a reload removes a
// tenant is attributed by one configuration, the new one. Attributed by
// the one it read before the reload, it put back the attribution state of
// the removed tenant after the reload had dropped it, and from then on
// every snapshot kept that tenant's context switches: a series of a tenant
// the file no longer has, until the next reload.
func TestReloadDuringBuild(t *testing.T) {
	pods := &reloadingPods{}
	b, file := fileBuilder(t, sharedTenants, BuilderOptions{Clock: gpu.NewManualClock(time.Unix(0, 0)), Pods: pods})
	b.Build(sharedReadings(gpu.SharingTimeSlice, 1000), gpu.SamplerStats{})
	b.Build(sharedReadings(gpu.SharingTimeSlice, 1600), gpu.SamplerStats{})

	chatOnly := strings.Replace(sharedTenants, "  - name: train\n    class: batch\n    selectors: [{uid: 1002}]\n", "", 1)
	pods.reload = func() {
		if err := os.WriteFile(file, []byte(chatOnly), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := b.Reload(""); err != nil {
			t.Fatal(err)
		}
	}
	s := b.Build(sharedReadings(gpu.SharingTimeSlice, 2000), gpu.SamplerStats{})
	if pods.reload != nil {
		t.Fatal("the reload did not run during the sample")
	}
	for _, ti := range s.Tenants {
		if ti.Name == "train" {
			t.Errorf("the sample built during the reload lists the removed tenant train: %+v", s.Tenants)
		}
	}
	for i := range 2 {
		s = b.Build(sharedReadings(gpu.SharingTimeSlice, 2400+uint64(i)*400), gpu.SamplerStats{})
		for _, k := range s.KeptContextSwitches {
			if k.Tenant == "train" {
				t.Errorf("sample %d after the reload keeps the removed tenant's context switches: %+v", i+1, s.KeptContextSwitches)
			}
		}
	}
}

// TestReloadTrackerKeyFollowsEffectiveWindow: a reload keeps a tenant's
// latency counters unless its source, quantile, target or window changed
// (docs/tenants.md, Reload): the window it is judged over, its own
// slo.window where set, else defaults.slo_window. (A change of
// defaults.slo_window restarted the counters of a tenant with its own
// window too.)
func TestReloadTrackerKeyFollowsEffectiveWindow(t *testing.T) {
	file := func(defaults, slo string) string {
		return "defaults: {" + defaults + "}\ntenants:\n  - name: chat\n    selectors: [{uid: 1}]\n" +
			"    slo: {quantile: 0.99, " + slo + "}\n    latency_source: {url: \"http://10.0.0.5:8000/metrics\", preset: vllm-e2e}\n"
	}
	for _, tc := range []struct {
		name          string
		before, after string
		restart       bool
	}{
		{"own window, default changed", file("slo_window: 5m", "target: 1s, window: 10m"), file("slo_window: 6m", "target: 1s, window: 10m"), false},
		{"own window, default given", file("", "target: 1s, window: 10m"), file("slo_window: 6m", "target: 1s, window: 10m"), false},
		{"own window set to the default", file("slo_window: 5m", "target: 1s"), file("slo_window: 5m", "target: 1s, window: 5m"), false},
		{"own window changed", file("slo_window: 5m", "target: 1s, window: 10m"), file("slo_window: 5m", "target: 1s, window: 20m"), true},
		{"default window changed", file("slo_window: 5m", "target: 1s"), file("slo_window: 6m", "target: 1s"), true},
		{"own window dropped", file("slo_window: 5m", "target: 1s, window: 10m"), file("slo_window: 5m", "target: 1s"), true},
		{"target changed", file("slo_window: 5m", "target: 1s, window: 10m"), file("slo_window: 6m", "target: 2s, window: 10m"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := ParseConfig("t.yaml", []byte(tc.before))
			if err != nil {
				t.Fatal(err)
			}
			after, err := ParseConfig("t.yaml", []byte(tc.after))
			if err != nil {
				t.Fatal(err)
			}
			a, b := latencySpecs(before)[0], latencySpecs(after)[0]
			if restart := a.Key != b.Key; restart != tc.restart {
				t.Errorf("windows %s then %s: counters restart %v, want %v (keys %q, %q)", a.Window, b.Window, restart, tc.restart, a.Key, b.Key)
			}
		})
	}
}

// TestSampleDuringInstall: a sample that takes the attribution lock while
// a reload installs a file is attributed by one configuration with that
// configuration's state. The reload stored the new file before it took
// the lock: a sample between the two was attributed by the file that
// removed tenant batch with the state of the old one, and served batch
// (carried forward while the GPU's process list is refused) under a
// configuration without it.
func TestSampleDuringInstall(t *testing.T) {
	// the sample's XID is logged once it has released the attribution
	// lock, before it waits for the reload's
	released := make(chan struct{}, 1)
	logger := log.LoggerFunc(func(kv ...any) error {
		if len(kv) > 3 && kv[3] == "XID event" {
			released <- struct{}{}
		}
		return nil
	})
	b, file := fileBuilder(t, memTenants, BuilderOptions{Clock: gpu.NewManualClock(time.Unix(0, 0)), Logger: logger})
	b.Build(mpsDevice(100, 0.6, wholeProc(1, "vllm", 0.4, 20*gib), wholeProc(2, "train", 0.2, 10*gib)), gpu.SamplerStats{})
	b.Build(mpsDevice(101, 0.6, wholeProc(1, "vllm", 0.4, 20*gib), wholeProc(2, "train", 0.2, 10*gib)), gpu.SamplerStats{})
	if err := os.WriteFile(file, []byte(strings.Replace(memTenants, "name: batch", "name: training", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	refused := func(sec int64) *gpu.Readings {
		r := mpsDevice(sec, 0.6)
		r.Devices[0].ProcessesUnread = true
		r.Devices[0].Events = []gpu.Event{{Kind: gpu.EventXID, Code: 79}}
		return r
	}
	during := make(chan *Snapshot, 1)
	b.beforeInstall = func() {
		b.beforeInstall = nil
		go func() { during <- b.Build(refused(102), gpu.SamplerStats{}) }()
		<-released
	}
	if err := b.Reload(""); err != nil {
		t.Fatal(err)
	}
	// attributed by the old file, batch is the old file's; by the new
	// one (which lists training), it is no tenant's
	s := <-during
	if u, ok := usageIn(s, "")["batch"]; ok && slices.ContainsFunc(s.Tenants, func(i Info) bool { return i.Name == "training" }) {
		t.Errorf("the sample taken during the install, attributed by the new file, serves batch, which that file removed: SM %v, context switches %v",
			deref(u.SMActive), deref(u.ContextSwitchesTotal))
	}
	if u, ok := usageIn(b.Build(refused(103), gpu.SamplerStats{}), "")["batch"]; ok {
		t.Errorf("tenant batch, removed by the reload, served after it: SM %v", deref(u.SMActive))
	}
}

// TestReloadUnchangedFileKeepsState: a reload of the file in use,
// unchanged (a POST /-/reload anyone reaching the port may send), installs
// nothing: it logged every standing conflict and share.min over-commitment
// again and counted the conflicts again (vgpu_attribution_conflicts_total),
// each reload. It succeeds and is counted; a file changed, if only by a
// comment, is installed, its conflicts logged afresh.
func TestReloadUnchangedFileKeepsState(t *testing.T) {
	const cfg = `tenants:
  - name: chat
    selectors: [{executable: python3}]
  - name: train
    selectors: [{uid: 1002}]
  - name: other
    selectors: [{executable: vllm}]
    share: {min: 0.6}
  - name: tools
    selectors: [{uid: 0}]
    share: {min: 0.5}
`
	logs := &testutil.SyncBuffer{}
	b, file := fileBuilder(t, cfg, BuilderOptions{Logger: log.NewLogfmtLogger(logs)})
	at := time.Unix(100, 0)
	sample := func() *Snapshot {
		r := sharedReadings(gpu.SharingTimeSlice, 0)
		at = at.Add(time.Second)
		r.Time = at
		return b.Build(r, gpu.SamplerStats{})
	}
	counts := func() (conflicts, shares int) {
		return strings.Count(logs.String(), "matches more than one tenant"), strings.Count(logs.String(), "share.min guarantees")
	}
	sample()
	if c, s := counts(); c != 1 || s != 1 {
		t.Fatalf("the file's first sample logged %d conflicts and %d over-commitments, want 1 and 1:\n%s", c, s, logs)
	}
	var s *Snapshot
	for i := range 10 {
		reload := b.ReloadQuietly
		if i == 9 {
			reload = b.Reload
		}
		if err := reload(""); err != nil {
			t.Fatal(err)
		}
		s = sample()
	}
	if c, sh := counts(); c != 1 || sh != 1 || s.Attribution.ConflictsTotal != 1 {
		t.Errorf("10 reloads of the file unchanged: %d conflicts and %d over-commitments logged, %d conflicts counted; want 1, 1 and 1",
			c, sh, s.Attribution.ConflictsTotal)
	}
	if c := s.Config; c.ReloadsTotal != 10 || c.ReloadFailuresTotal != 0 || !c.LastReloadSuccessful {
		t.Errorf("reload status %+v: want 10 reloads, all successful", c)
	}
	if !strings.Contains(logs.String(), `msg="tenants file unchanged; the configuration in use is kept as it is"`) || strings.Contains(logs.String(), "tenants file reloaded") {
		t.Errorf("the logged reload of the file unchanged is not logged as such:\n%s", logs)
	}
	if err := os.WriteFile(file, []byte(cfg+"# edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(""); err != nil {
		t.Fatal(err)
	}
	s = sample()
	if c, sh := counts(); c != 2 || sh != 2 || s.Attribution.ConflictsTotal != 2 || !strings.Contains(logs.String(), "tenants file reloaded") {
		t.Errorf("a reload of the file changed: %d conflicts and %d over-commitments logged, %d counted; want each logged and counted again:\n%s",
			c, sh, s.Attribution.ConflictsTotal, logs)
	}
}
