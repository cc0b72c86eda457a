package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/pipeline"
	"github.com/vgpu-exporter/vgpu_exporter/webconf"
)

// A reload asked for by POST /-/reload logs what one asked for by SIGHUP
// logs, line for line and field for field, but for its source: the
// failure naming file:line, the success, and a reload without a tenants
// file (before, the HTTP failure's message differed, and HTTP logged
// nothing where SIGHUP logged that it was ignored).
func TestReloadLoggedAlikeForHTTPAndSIGHUP(t *testing.T) {
	for _, c := range []struct {
		name, file string
		bad        bool
		want       string // in the SIGHUP's line
	}{
		{"failed", "/etc/tenants.yaml", true, `level=error msg="reload failed, the files named keep their previous configuration unless their error says otherwise" source=SIGHUP err="/etc/tenants.yaml:1: bad"`},
		{"reloaded", "/etc/tenants.yaml", false, `level=info msg="reloaded the configuration" source=SIGHUP`},
		{"no tenants file", "", false, `level=info msg="reload ignored" source=SIGHUP`},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := freeAddr(t)
			cfg := testConfig(t, "--web.listen-address="+addr, "--sample.interval=1h")
			b := &fakeBuilder{bad: c.bad}
			out := &testutil.SyncBuffer{}
			logger := log.NewLogfmtLogger(out)
			svc := newService(&fakeSource{}, b, c.file, gpu.NewManualClock(time.Unix(1e9, 0)), time.Hour, logger)
			hup := make(chan os.Signal, 1)
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			done := make(chan error, 1)
			go func() { done <- svc.serve(ctx, cfg, newFakeCollectorFor, hup) }()
			base := "http://" + addr
			waitUntil(t, "the server to answer", func() bool { c, _ := httpGet(base + "/-/healthy"); return c == 200 })
			reloadLines := func() []string {
				var l []string
				for _, line := range strings.Split(out.String(), "\n") {
					if strings.Contains(line, "source=") && strings.Contains(line, "reload") {
						l = append(l, line)
					}
				}
				return l
			}
			hup <- syscall.SIGHUP
			waitUntil(t, "the SIGHUP's line", func() bool { return len(reloadLines()) == 1 })
			resp, err := http.Post(base+"/-/reload", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			waitUntil(t, "the POST's line", func() bool { return len(reloadLines()) >= 2 })
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			l := reloadLines()
			norm := regexp.MustCompile(`source=\S+`)
			if len(l) != 2 || !strings.Contains(l[0], c.want) || !strings.Contains(l[1], "source=http") ||
				norm.ReplaceAllString(l[0], "") != norm.ReplaceAllString(l[1], "") {
				t.Errorf("reload lines:\n%s\nwant the SIGHUP's and the POST's alike but for the source, the first holding %s", strings.Join(l, "\n"), c.want)
			}
		})
	}
}

// A --web.config.file found bad by a reload, by SIGHUP or POST
// /-/reload, is logged once per reload: in the reload's outcome, naming
// the file and its line (before, a line of its own said it too, so each
// reload logged the problem twice).
func TestBadWebConfigReloadLoggedOnce(t *testing.T) {
	webCfg, base, logs, hup, _ := serveWebConfig(t)
	if err := os.WriteFile(webCfg, []byte("basic_auth_users:\n  prom: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	count := func(substrs ...string) int { return countLines(logs.String(), substrs...) }
	hup <- syscall.SIGHUP
	waitUntil(t, "the SIGHUP's reload", func() bool { return count(reloadFailed) == 1 })
	req, _ := http.NewRequest("POST", base+"/-/reload", nil)
	req.SetBasicAuth("prom", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitUntil(t, "the POST's reload", func() bool { return count(reloadFailed) == 2 })
	if n, named := count("line 2"), count(reloadFailed, webCfg, "line 2"); n != 2 || named != 2 {
		t.Errorf("the bad file's problem logged %d times over 2 reloads (%d in the reloads' outcomes naming %s), want once each:\n%s", n, named, webCfg, logs)
	}
}

// reloadFailed is the outcome line of a failed reload (pipeline.LogReload).
const reloadFailed = `msg="reload failed, the files named keep their previous configuration unless their error says otherwise"`

// countLines is the number of lines of logs holding every one of substrs.
func countLines(logs string, substrs ...string) int {
	n := 0
	for l := range strings.Lines(logs) {
		all := true
		for _, s := range substrs {
			all = all && strings.Contains(l, s)
		}
		if all {
			n++
		}
	}
	return n
}

// A --tenants.config found bad by a reload, by SIGHUP or POST /-/reload,
// is logged once per reload: in the reload's outcome, at error level,
// naming the file and its line (before, the builder logged each problem
// on a line of its own too, so each reload logged it twice); the reload
// is still counted as failed.
func TestBadTenantsFileReloadLoggedOnce(t *testing.T) {
	tenants := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(tenants, []byte("tenants:\n  - name: a\n    selectors: [{uid: 1000}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cfg := testConfig(t, "--backend=sim", "--web.listen-address="+addr, "--tenants.config="+tenants)
	logs := &testutil.SyncBuffer{}
	svc, err := buildOn(cfg, gpu.RealClock{}, log.NewLogfmtLogger(logs))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	hup := make(chan os.Signal, 1)
	go func() { done <- svc.serve(ctx, cfg, newCollector, hup) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	base := "http://" + addr
	waitUntil(t, "the server to answer", func() bool { c, _ := httpGet(base + "/-/healthy"); return c == 200 })
	if err := os.WriteFile(tenants, []byte("tenants:\n  - name: a\n    selectors: [{uid: x}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const problem = `:3: uid must be an integer`
	count := func(substrs ...string) int { return countLines(logs.String(), substrs...) }
	hup <- syscall.SIGHUP
	waitUntil(t, "the SIGHUP's reload", func() bool { return count(reloadFailed) == 1 })
	resp, err := http.Post(base+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("POST /-/reload of a bad tenants file: %d, want 500", resp.StatusCode)
	}
	waitUntil(t, "the POST's reload", func() bool { return count(reloadFailed) == 2 })
	if n, named := count(problem), count("level=error", reloadFailed, tenants+problem); n != 2 || named != 2 {
		t.Errorf("the bad file's problem logged %d times over 2 reloads (%d at error level in the reloads' outcomes naming %s), want once each:\n%s", n, named, tenants, logs)
	}
	waitUntil(t, "the failed reloads counted", func() bool {
		_, body := httpGet(base + "/metrics")
		return strings.Contains(body, "vgpu_config_reload_failures_total 2\n") && strings.Contains(body, "vgpu_config_last_reload_successful 0\n")
	})
}

// A --tenants.config found bad at start fails the start with one line at
// error level, naming the flag and each problem with the file's line once.
func TestBadTenantsFileStartLoggedOnce(t *testing.T) {
	tenants := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(tenants, []byte("tenants:\n  - name: a\n    selectors: [{uid: x}]\n    bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	app := kingpin.New("vgpu_exporter", "")
	app.Terminate(nil)
	var stdout, stderr strings.Builder
	code := run(ctx, app, []string{"--backend=sim", "--web.listen-address=127.0.0.1:0", "--tenants.config=" + tenants}, &stdout, &stderr)
	logs := stderr.String()
	if code != 1 || countLines(logs, "level=error") != 1 ||
		countLines(logs, "level=error", `msg="cannot start"`, "--tenants.config: "+tenants+":3: uid must be an integer", tenants+":4: unknown key") != 1 ||
		strings.Count(logs, "uid must be an integer") != 1 || strings.Count(logs, "unknown key") != 1 {
		t.Errorf("exit %d, log:\n%s\nwant exit 1 and one error line naming --tenants.config and each problem once", code, logs)
	}
}

// A check's failure that is the system's (out of descriptors or memory),
// retried at each check, is logged as such, not as an invalid file (before,
// it blamed the file, every 5 s while it lasted).
func TestWebSystemFailureLoggedApart(t *testing.T) {
	system := fmt.Errorf("web.yml: %w", &os.PathError{Op: "open", Path: "/proc/self/fd/9", Err: syscall.EMFILE})
	invalid := errors.New("web.yml: yaml: line 2: did not find expected node content")
	for _, c := range []struct {
		inMemory  bool
		err       error
		want, not string
	}{
		{true, system, "the system's failure, not the file's): retried at each check; the last good configuration stays in use", "invalid"},
		{false, system, "the system's failure, not the file's): retried at each check; exporter-toolkit reads the file as it is", "invalid"},
		{true, invalid, "changed but is invalid; keeping the last good configuration", "system"},
		{false, invalid, "changed but is invalid; " + webconf.InvalidInUse, "system"},
	} {
		msg := webFailedMsg(c.inMemory, c.err)
		if !strings.Contains(msg, c.want) || strings.Contains(msg, c.not) {
			t.Errorf("in memory %v, %v: %q, want it to say %q and not %q", c.inMemory, c.err, msg, c.want, c.not)
		}
	}
}

// A change of the web configuration found invalid is logged as what it
// costs: the last good configuration kept where the exporter keeps copies
// in memory, the invalid edit in use where exporter-toolkit reads the file
// itself (outside Linux, memfd_create refused; before, both said the last
// good was kept).
func TestWebInvalidLoggedByMode(t *testing.T) {
	for _, c := range []struct {
		inMemory  bool
		want, not string
	}{
		{true, "keeping the last good configuration", "in use"},
		{false, "the invalid edit is in use", "last good"},
	} {
		msg := webFailedMsg(c.inMemory, errors.New("web.yml: yaml: line 2: did not find expected node content"))
		if !strings.Contains(msg, c.want) || strings.Contains(msg, c.not) {
			t.Errorf("in memory %v: %q, want it to say %q and not %q", c.inMemory, msg, c.want, c.not)
		}
	}
}

// POST /-/reload, which needs no authentication without a web
// configuration, cannot flood the log: 1000 requests write the first
// reload's line, the next line, once an interval on, sums those not
// logged up, and a failure after successes is logged at once (before,
// each request wrote a line: 1000 lines).
func TestReloadFloodOverHTTPLogBounded(t *testing.T) {
	addr := freeAddr(t)
	cfg := testConfig(t, "--web.listen-address="+addr, "--sample.interval=1h")
	b := &fakeBuilder{}
	logs := &testutil.SyncBuffer{}
	clock := gpu.NewManualClock(time.Unix(1e9, 0).UTC())
	svc := newService(&fakeSource{}, b, "/etc/tenants.yaml", clock, time.Hour, log.NewLogfmtLogger(logs))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.serve(ctx, cfg, newFakeCollectorFor, make(chan os.Signal)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	base := "http://" + addr
	waitUntil(t, "the server to answer", func() bool { c, _ := httpGet(base + "/-/healthy"); return c == 200 })
	for _, step := range []struct {
		name    string
		advance time.Duration
		bad     bool
		summary string // the line logged once the clock advanced; "": none
		posts   int
		code    int
		want    string // the one line the posts write; "": none
	}{
		{name: "a flood", posts: 1000, code: 200, want: `level=info msg="reloaded the configuration" source=http`},
		{name: "an interval on", advance: pipeline.AskedLogEvery, posts: 1, code: 200,
			summary: `level=info msg="reloaded the configuration (the last of the reloads asked for whose lines were held back)" source=http asked_at=2001-09-09T01:46:40Z not_logged=999`},
		{name: "more within it", posts: 10, code: 200},
		{name: "a failure after successes", bad: true, posts: 1, code: 500, want: `level=error msg="reload failed, the files named keep their previous configuration unless their error says otherwise" source=http err="/etc/tenants.yaml:1: bad" not_logged=11`},
	} {
		before := len(logs.String())
		clock.Advance(step.advance)
		if step.summary != "" {
			waitUntil(t, step.name+": the summary of the reloads held back", func() bool { return strings.Contains(logs.String()[before:], "\n") })
			if got := logs.String()[before:]; got != step.summary+"\n" {
				t.Errorf("%s: the summary logged:\n%s\nwant:\n%s", step.name, got, step.summary)
			}
		}
		b.mu.Lock()
		b.bad = step.bad
		b.mu.Unlock()
		before = len(logs.String())
		for range step.posts {
			resp, err := http.Post(base+"/-/reload", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != step.code {
				t.Fatalf("%s: POST /-/reload: %d, want %d", step.name, resp.StatusCode, step.code)
			}
		}
		got := logs.String()[before:]
		if n := strings.Count(got, "\n"); (step.want == "" && n != 0) || (step.want != "" && (n != 1 || !strings.Contains(got, step.want))) {
			t.Errorf("%s: %d POST /-/reload logged %d lines:\n%s\nwant %q", step.name, step.posts, n, got, step.want)
		}
	}
}
