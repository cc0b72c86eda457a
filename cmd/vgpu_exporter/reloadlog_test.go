package main

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
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
		{"failed", "/etc/tenants.yaml", true, `level=error msg="reload failed, the files named keep their previous configuration" source=SIGHUP err="/etc/tenants.yaml:1: bad"`},
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
	count := func(substrs ...string) int {
		n := 0
		for l := range strings.Lines(logs.String()) {
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
	const failed = `msg="reload failed, the files named keep their previous configuration"`
	hup <- syscall.SIGHUP
	waitUntil(t, "the SIGHUP's reload", func() bool { return count(failed) == 1 })
	req, _ := http.NewRequest("POST", base+"/-/reload", nil)
	req.SetBasicAuth("prom", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitUntil(t, "the POST's reload", func() bool { return count(failed) == 2 })
	if n, named := count("line 2"), count(failed, webCfg, "line 2"); n != 2 || named != 2 {
		t.Errorf("the bad file's problem logged %d times over 2 reloads (%d in the reloads' outcomes naming %s), want once each:\n%s", n, named, webCfg, logs)
	}
}
