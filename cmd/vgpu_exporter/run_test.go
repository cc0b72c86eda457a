package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"golang.org/x/crypto/bcrypt"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	gpunvml "github.com/vgpu-exporter/vgpu_exporter/gpu/nvml"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/webconf"
)

// fakeSource returns one device per sample and records Close.
type fakeSource struct {
	samples atomic.Int32
	closed  atomic.Bool
	// onClose, when set, runs at Close.
	onClose func()
	fail    bool
	// failAfter makes every sample after the first failAfter fail (0: never).
	failAfter int32
}

func (s *fakeSource) Name() string { return "fake" }
func (s *fakeSource) Sample(context.Context) (*gpu.Readings, error) {
	n := s.samples.Add(1)
	if s.fail || (s.failAfter > 0 && n > s.failAfter) {
		return nil, errors.New("no GPU answered")
	}
	return &gpu.Readings{Backend: "fake"}, nil
}
func (s *fakeSource) Close() error {
	if s.onClose != nil {
		s.onClose()
	}
	s.closed.Store(true)
	return nil
}

// fakeBuilder builds empty snapshots and records reloads and Start. Like
// tenant.Builder, Start returns at once and its background loop ends some
// time after the context: here only once Wait lets it (a loop still busy
// with a latency scrape), so a caller that skips Wait sees it running.
type fakeBuilder struct {
	mu      sync.Mutex
	reloads []string
	started atomic.Bool
	// running is true while the background loop runs.
	running atomic.Bool
	loop    sync.WaitGroup
	gate    chan struct{}
	bad     bool
}

func (b *fakeBuilder) Build(r *gpu.Readings, st gpu.SamplerStats) *tenant.Snapshot {
	return &tenant.Snapshot{Readings: r, Sampler: st}
}

func (b *fakeBuilder) Reload(path string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reloads = append(b.reloads, path)
	if b.bad {
		return fmt.Errorf("%s:1: bad", path)
	}
	return nil
}

func (b *fakeBuilder) Start(ctx context.Context) {
	b.started.Store(true)
	b.gate = make(chan struct{})
	b.running.Store(true)
	b.loop.Go(func() {
		<-ctx.Done()
		<-b.gate
		b.running.Store(false)
	})
}

func (b *fakeBuilder) Wait() {
	if b.gate != nil {
		close(b.gate)
	}
	b.loop.Wait()
}

func (b *fakeBuilder) reloadCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.reloads)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func testConfig(t *testing.T, args ...string) *config {
	t.Helper()
	c, err := parseArgs(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func waitUntil(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServiceServesAndShutsDown(t *testing.T) {
	addr := freeAddr(t)
	cfg := testConfig(t, "--web.listen-address="+addr, "--sample.interval=1h")
	b := &fakeBuilder{}
	loopRanAtClose := atomic.Bool{}
	src := &fakeSource{onClose: func() { loopRanAtClose.Store(b.running.Load()) }}
	// A manual clock: the sampler takes its first sample at once and then
	// waits for the clock, so the test controls every later sample.
	clock := gpu.NewManualClock(time.Unix(1e9, 0))
	svc := newService(src, b, "/etc/tenants.yaml", clock, time.Hour, log.NewNopLogger())
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // a failing test still stops the server
	done := make(chan error, 1)
	go func() { done <- svc.serve(ctx, cfg, newFakeCollectorFor, hup) }()

	base := "http://" + addr
	waitUntil(t, "the server to answer", func() bool { c, _ := httpGet(base + "/-/healthy"); return c == 200 })
	waitUntil(t, "readiness", func() bool { c, _ := httpGet(base + "/-/ready"); return c == 200 })
	if !b.started.Load() {
		t.Error("builder Start was not called")
	}
	code, body := httpGet(base + "/metrics")
	if code != 200 || !strings.Contains(body, "vgpu_fake_ratio") || !strings.Contains(body, "vgpu_exporter_build_info") {
		t.Errorf("metrics: %d %q", code, body)
	}

	// Later samples follow the clock.
	waitUntil(t, "the sampler to wait on the clock", func() bool { return clock.Waiters() > 0 })
	clock.Advance(time.Hour)
	waitUntil(t, "a second sample", func() bool { return src.samples.Load() >= 2 })

	// SIGHUP and POST /-/reload both reread the tenants file.
	hup <- syscall.SIGHUP
	waitUntil(t, "the SIGHUP reload", func() bool { return b.reloadCount() == 1 })
	resp, err := http.Post(base+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || b.reloadCount() != 2 || b.reloads[1] != "/etc/tenants.yaml" {
		t.Errorf("POST reload: %d, reloads %v", resp.StatusCode, b.reloads)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not return after cancel")
	}
	if !src.closed.Load() {
		t.Error("source not closed on shutdown")
	}
	if b.running.Load() {
		t.Error("builder background work not stopped")
	}
	if loopRanAtClose.Load() {
		t.Error("the source was closed while the builder's background work still ran")
	}
	if c, _ := httpGet(base + "/-/healthy"); c != 0 {
		t.Error("server still answers after shutdown")
	}
}

func TestServiceNotReadyWhileSamplesFail(t *testing.T) {
	addr := freeAddr(t)
	cfg := testConfig(t, "--web.listen-address="+addr, "--web.disable-exporter-metrics")
	src := &fakeSource{fail: true}
	b := &fakeBuilder{}
	svc := newService(src, b, "", gpu.NewManualClock(time.Unix(1e9, 0)), time.Hour, log.NewNopLogger())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // a failing test still stops the server
	done := make(chan error, 1)
	go func() { done <- svc.serve(ctx, cfg, newFakeCollectorFor, nil) }()
	base := "http://" + addr
	waitUntil(t, "a failed sample", func() bool { return src.samples.Load() >= 1 })
	waitUntil(t, "the server to answer", func() bool { c, _ := httpGet(base + "/-/healthy"); return c == 200 })
	if c, body := httpGet(base + "/-/ready"); c != 503 {
		t.Errorf("ready with no snapshot: %d %q", c, body)
	}
	if _, body := httpGet(base + "/metrics"); strings.Contains(body, "go_goroutines") {
		t.Error("exporter metrics served despite --web.disable-exporter-metrics")
	}
	// No tenants file: a reload does not fail and says nothing was read,
	// without calling the builder.
	resp, err := http.Post(base+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Nothing reloaded") {
		t.Errorf("reload without a file: %d %q", resp.StatusCode, body)
	}
	if b.reloadCount() != 0 {
		t.Errorf("the builder reloaded %v without a file", b.reloads)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestServiceListenErrorIsReturned(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := testConfig(t, "--web.listen-address="+l.Addr().String())
	src := &fakeSource{}
	svc := newService(src, &fakeBuilder{}, "", gpu.NewManualClock(time.Unix(1e9, 0)), time.Hour, log.NewNopLogger())
	err = svc.serve(context.Background(), cfg, newFakeCollectorFor, nil)
	if err == nil || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "--web.listen-address="+l.Addr().String()) {
		t.Fatalf("serve on a busy port: %v", err)
	}
	if !src.closed.Load() {
		t.Error("source not closed after a listen error")
	}
}

// nvmlWorks reports whether NVML initializes on this host.
func nvmlWorks() bool {
	probe, err := gpunvml.New(gpunvml.Options{})
	if err != nil {
		return false
	}
	probe.Close()
	return true
}

func TestRunExitCodes(t *testing.T) {
	autoWant, nvmlWant := "--backend=sim", "--backend=nvml"
	if nvmlWorks() {
		autoWant, nvmlWant = "256.0.0.1", "256.0.0.1"
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
		stdout string
	}{
		{[]string{"--sample.interval=0s"}, 2, "--sample.interval must be positive", ""},
		{[]string{"--backend=gpu"}, 2, `--backend: "gpu" is not one of auto, sim, nvml`, ""},
		{[]string{"--no-such-flag"}, 2, "unknown long flag", ""},
		{[]string{"--backend=sim", "--sim.scenario=no-such-scenario", "--web.listen-address=256.0.0.1:1"}, 1, "not a built-in scenario", ""},
		{[]string{"--backend=sim", "--web.listen-address=256.0.0.1:1"}, 1, "256.0.0.1", ""},
		{[]string{"--config.check=/nonexistent/tenants.yaml"}, 1, "/nonexistent/tenants.yaml", ""},
		// Without a driver, auto stops before listening and names
		// --backend=sim; on a host with a GPU it finds NVML and the bad
		// listen address ends the run instead.
		{[]string{"--backend=auto", "--web.listen-address=256.0.0.1:1"}, 1, autoWant, ""},
		{[]string{"--backend=nvml", "--web.listen-address=256.0.0.1:1"}, 1, nvmlWant, ""},
		{[]string{"--log.level=trace"}, 2, "--log.level", ""},
		{[]string{"--tenants.config=/nonexistent/t.yaml", "--backend=sim", "--web.listen-address=256.0.0.1:1"}, 1, "--tenants.config: stat /nonexistent/t.yaml", ""},
		{[]string{"--tenants.config=", "--backend=sim", "--web.listen-address=256.0.0.1:1"}, 2, "--tenants.config must not be empty", ""},
	} {
		var stdout, stderr strings.Builder
		app := kingpin.New("vgpu_exporter", "")
		app.Terminate(nil)
		code := run(context.Background(), app, tc.args, &stdout, &stderr)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", tc.args, code, tc.code, stderr.String())
		}
		if !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%v: stderr %q lacks %q", tc.args, stderr.String(), tc.stderr)
		}
		if !strings.Contains(stdout.String(), tc.stdout) {
			t.Errorf("%v: stdout %q lacks %q", tc.args, stdout.String(), tc.stdout)
		}
	}
}

// A bad --web.config.file stops the start, before the backend opens, with
// the flag and the file named.
func TestRunBadWebConfig(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(broken, []byte("basic_auth_users: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(dir, "missing.yml"), broken} {
		var stdout, stderr strings.Builder
		app := kingpin.New("vgpu_exporter", "")
		app.Terminate(nil)
		args := []string{"--backend=sim", "--web.listen-address=" + freeAddr(t), "--web.config.file=" + f}
		if code := run(context.Background(), app, args, &stdout, &stderr); code != 1 {
			t.Errorf("%s: exit %d, want 1", f, code)
		}
		if want := "--web.config.file=" + f; !strings.Contains(stderr.String(), want) {
			t.Errorf("%s: stderr %q lacks %q", f, stderr.String(), want)
		}
		if strings.Contains(stderr.String(), "SIMULATED") {
			t.Errorf("%s: the backend was opened before the web configuration was checked", f)
		}
	}
}

// Without a driver, auto and nvml exit with an actionable message; auto
// names --backend=sim. On a host with a working driver the test is skipped.
func TestNoDriverMessages(t *testing.T) {
	probe, err := gpunvml.New(gpunvml.Options{})
	if err == nil {
		probe.Close()
		t.Skip("NVML works on this host")
	}
	for _, tc := range []struct {
		backend string
		want    []string
	}{
		{"auto", []string{"--backend=auto", "--backend=sim", "never serves simulated data"}},
		{"nvml", []string{"--backend=nvml", err.Error()}},
	} {
		cfg := testConfig(t, "--backend="+tc.backend)
		_, _, oerr := openSource(cfg, gpu.RealClock{}, log.NewNopLogger())
		if oerr == nil {
			t.Fatalf("%s: no error without a driver", tc.backend)
		}
		for _, w := range tc.want {
			if !strings.Contains(oerr.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.backend, oerr, w)
			}
		}
	}
}

// serveWebConfig serves a fake service, with args, and --web.config.file holding
// basic auth of user prom, password s3cret; it returns the file, the
// base URL, the service's log, its SIGHUP channel and the ticks of its
// checks of the file for a change (a send returns once the check before
// it is done).
func serveWebConfig(t *testing.T, args ...string) (webCfg, base string, logs *testutil.SyncBuffer, hup chan os.Signal, checks chan time.Time) {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webCfg = filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(webCfg, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cfg := testConfig(t, append([]string{"--web.listen-address=" + addr, "--web.config.file=" + webCfg}, args...)...)
	logs = &testutil.SyncBuffer{}
	svc := newService(&fakeSource{}, &fakeBuilder{}, "", gpu.NewManualClock(time.Unix(1e9, 0)), time.Hour, log.NewLogfmtLogger(logs))
	if svc.web, err = webconf.Open(webCfg, maxWebConfigBytes, nil); err != nil { // as start does
		t.Fatal(err)
	}
	checks = make(chan time.Time)
	svc.webChecks = checks
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	hup = make(chan os.Signal, 1)
	go func() { done <- svc.serve(ctx, cfg, newFakeCollectorFor, hup) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	base = "http://" + addr
	waitUntil(t, "the server to answer", func() bool { c, _ := httpGet(base + "/-/healthy"); return c != 0 })
	return webCfg, base, logs, hup, checks
}

// checkWeb has the service's check of --web.config.file (serveWebConfig's
// checks) run n times.
func checkWeb(t *testing.T, checks chan<- time.Time, n int) {
	t.Helper()
	for range n + 1 { // the last send returns once the n-th check is done
		select {
		case checks <- time.Time{}:
		case <-time.After(10 * time.Second):
			t.Fatal("nothing checks --web.config.file for a change")
		}
	}
}

// getAs is the status of a GET of url with basic auth user and pass
// (none where user is empty).
func getAs(t *testing.T, url, user, pass string) int {
	t.Helper()
	code, _ := getBody(t, url, user, pass)
	return code
}

// getBody is getAs with the body answered.
func getBody(t *testing.T, url, user, pass string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// --web.config.file reaches exporter-toolkit: basic auth guards every path.
func TestServiceWebConfigBasicAuth(t *testing.T) {
	_, base, _, _, _ := serveWebConfig(t)
	for _, tc := range []struct {
		user, pass string
		code       int
	}{
		{"", "", http.StatusUnauthorized},
		{"prom", "wrong", http.StatusUnauthorized},
		{"prom", "s3cret", http.StatusOK},
	} {
		if code := getAs(t, base+"/metrics", tc.user, tc.pass); code != tc.code {
			t.Errorf("user %q pass %q: %d, want %d", tc.user, tc.pass, code, tc.code)
		}
	}
}

// A --web.config.file edited into something invalid while the exporter
// runs keeps the last good one serving: scrapes still pass with the old
// credentials (before, each was answered 500 until the file was mended),
// and a reload, by SIGHUP or POST /-/reload, fails naming the file and
// its line, counted by vgpu_web_config_reload_failures_total. A good edit
// takes effect at the next reload.
func TestServiceWebConfigKeptLastGood(t *testing.T) {
	webCfg, base, logs, hup, _ := serveWebConfig(t)
	if err := os.WriteFile(webCfg, []byte("basic_auth_users:\n  prom: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := getAs(t, base+"/metrics", "prom", "s3cret"); code != http.StatusOK {
		t.Errorf("a scrape while the file is broken: %d, want 200 (the last good configuration)", code)
	}
	hup <- syscall.SIGHUP
	failed := `msg="reload failed, the files named keep their previous configuration unless their error says otherwise"`
	waitUntil(t, "the SIGHUP's reload", func() bool { return strings.Contains(logs.String(), failed) })
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, failed) && (!strings.Contains(l, webCfg) || !strings.Contains(l, "line 2")) {
			t.Errorf("the failure logged is %q, want one naming %s and its line 2", l, webCfg)
		}
	}
	req, _ := http.NewRequest("POST", base+"/-/reload", nil)
	req.SetBasicAuth("prom", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Only the file named keeps its previous configuration (before, the
	// answer said the previous configuration stays, as if the tenants
	// file's had too).
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), webCfg) ||
		!strings.Contains(string(body), "the files named keep their previous configuration unless their error says otherwise (any other was reloaded)") {
		t.Errorf("POST /-/reload of the broken file: %d %q, want 500 naming %s as keeping its previous configuration", resp.StatusCode, body, webCfg)
	}
	req, _ = http.NewRequest("GET", base+"/metrics", nil)
	req.SetBasicAuth("prom", "s3cret")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a scrape after the failed reloads: %d, want 200", resp.StatusCode)
	}
	for _, want := range []string{"vgpu_web_config_last_reload_successful 0\n", "vgpu_web_config_reload_failures_total 2\n"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the scrape after the failed reloads lacks %q", want)
		}
	}

	hash, err := bcrypt.GenerateFromPassword([]byte("n3w"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(webCfg, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := getAs(t, base+"/metrics", "prom", "n3w"); code != http.StatusUnauthorized {
		t.Errorf("the new password before a reload: %d, want 401", code)
	}
	hup <- syscall.SIGHUP
	waitUntil(t, "the new password to pass", func() bool { return getAs(t, base+"/metrics", "prom", "n3w") == http.StatusOK })
	if code := getAs(t, base+"/metrics", "prom", "s3cret"); code != http.StatusUnauthorized {
		t.Errorf("the old password after the reload: %d, want 401", code)
	}
}

// SIGHUP is caught from package initialization: one arriving before run
// installs its handlers does not end the process (this test binary).
func TestSIGHUPBeforeRunIsCaught(t *testing.T) {
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // delivery is asynchronous; had it killed us, nothing below would run
}

// An edit of --web.config.file is put in use by the periodic check,
// without a reload (before, only SIGHUP or POST /-/reload did, which the
// chart's reload sidecar cannot send through basic auth): a good one at
// the second check that finds it, a bad one logged once however many checks find it, the
// last good credentials still passing, and a good one after it adopted.
func TestServiceWebConfigCheckedForChanges(t *testing.T) {
	webCfg, base, logs, _, checks := serveWebConfig(t)
	check := func(n int) { t.Helper(); checkWeb(t, checks, n) }
	setPassword := func(pass string) {
		t.Helper()
		hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		testutil.ReplaceFile(t, webCfg, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"))
	}
	count := func(msg string) int {
		n := 0
		for l := range strings.Lines(logs.String()) {
			if strings.Contains(l, msg) && strings.Contains(l, webCfg) {
				n++
			}
		}
		return n
	}
	// Edits are renamed over the file (docs/web-config.md): a check may be
	// under way while one is written.
	const adopted, refused = `msg="web configuration changed; now in use"`, `msg="web configuration changed but is invalid; keeping the last good configuration"`

	check(3)
	setPassword("n3w")
	check(2) // a change settles for one check
	if code := getAs(t, base+"/metrics", "prom", "n3w"); code != http.StatusOK {
		t.Errorf("the new password a check after the edit, without a reload: %d, want 200", code)
	}
	if code := getAs(t, base+"/metrics", "prom", "s3cret"); code != http.StatusUnauthorized {
		t.Errorf("the old password after the edit was adopted: %d, want 401", code)
	}

	testutil.ReplaceFile(t, webCfg, []byte("basic_auth_users:\n  prom: [\n"))
	check(20)
	if code := getAs(t, base+"/metrics", "prom", "n3w"); code != http.StatusOK {
		t.Errorf("the last good password while the file is bad: %d, want 200", code)
	}
	if n := count(refused); n != 1 {
		t.Errorf("the bad edit was logged %d times over 20 checks, want once:\n%s", n, logs)
	}
	setPassword("thr33")
	check(2)
	if code := getAs(t, base+"/metrics", "prom", "thr33"); code != http.StatusOK {
		t.Errorf("the password of the good edit after the bad one: %d, want 200", code)
	}
	if n := count(adopted); n != 2 {
		t.Errorf("%d edits logged as in use, want 2:\n%s", n, logs)
	}
	_, body := getBody(t, base+"/metrics", "prom", "thr33")
	for _, want := range []string{"vgpu_web_config_reloads_total 3\n", "vgpu_web_config_reload_failures_total 1\n", "vgpu_web_config_last_reload_successful 1\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape lacks %q", want)
		}
	}
}
