package main

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/webconf"
)

// A --web.config.file emptied while the exporter runs (`: > web.yml`)
// does not turn basic auth off: the check refuses it until a restart,
// logs it once at error naming the file and the restart, and counts it
// as a failed reload; a request without credentials is still refused,
// POST /-/reload among them. (Before, within 10 s every request was
// served without authentication, logged at info as a change now in use.)
func TestServiceWebConfigAuthRemovalRefused(t *testing.T) {
	webCfg, base, logs, _, checks := serveWebConfig(t)
	checkWeb(t, checks, 1)
	testutil.ReplaceFile(t, webCfg, nil)
	checkWeb(t, checks, 5)
	for _, r := range []struct{ method, path string }{{"GET", "/metrics"}, {"GET", "/tuner"}, {"POST", "/-/reload"}} {
		req, _ := http.NewRequest(r.method, base+r.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s without credentials after the file was emptied: %d, want 401", r.method, r.path, resp.StatusCode)
		}
	}
	if code := getAs(t, base+"/metrics", "prom", "s3cret"); code != http.StatusOK {
		t.Errorf("the last good password after the file was emptied: %d, want 200", code)
	}
	var refused []string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "basic auth") {
			refused = append(refused, l)
		}
	}
	if len(refused) != 1 || !strings.Contains(refused[0], "level=error") || !strings.Contains(refused[0], "web_config_file="+webCfg) ||
		!strings.Contains(refused[0], "takes a restart") || strings.Contains(logs.String(), "now in use") {
		t.Errorf("the removal of basic auth logged as %q, want one line at error naming %s and the restart, none saying it is in use:\n%s", refused, webCfg, logs)
	}
	_, body := getBody(t, base+"/metrics", "prom", "s3cret")
	for _, want := range []string{"vgpu_web_config_last_reload_successful 0\n", "vgpu_web_config_reload_failures_total 1\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape lacks %q", want)
		}
	}
}

// A change refused until a restart (TLS turned on or off, basic auth
// removed) is logged as such, not as an invalid file.
func TestWebRestartLoggedApart(t *testing.T) {
	restart := fmt.Errorf("web.yml: it removes basic auth: %w", webconf.ErrRestart)
	for _, c := range []struct {
		inMemory  bool
		err       error
		want, not string
	}{
		{true, restart, "changed in a way that takes a restart; keeping the last good configuration", "invalid"},
		{false, restart, "changed in a way that takes a restart; exporter-toolkit reads the file as it is", "last good"},
		{true, errors.New("web.yml: yaml: line 2"), "changed but is invalid", "restart"},
	} {
		msg := webFailedMsg(c.inMemory, c.err)
		if !strings.Contains(msg, c.want) || strings.Contains(msg, c.not) {
			t.Errorf("in memory %v, %v: %q, want it to say %q and not %q", c.inMemory, c.err, msg, c.want, c.not)
		}
	}
}

// --web.disable-exporter-metrics leaves out the exporter's runtime
// (go_*, process_*, promhttp_*, build info), not the web configuration's
// state: vgpu_web_config_* are still served, so that a refused reload and
// a certificate about to expire still alert. (Before, they went with the
// rest, and VGPUExporterCertificateExpiresSoon could never fire.)
func TestWebConfigMetricsWithoutExporterMetrics(t *testing.T) {
	_, base, _, _, _ := serveWebConfig(t, "--web.disable-exporter-metrics")
	for _, path := range []string{"/metrics", "/metrics?collect[]=gpu"} {
		_, body := getBody(t, base+path, "prom", "s3cret")
		for _, want := range []string{"vgpu_web_config_last_reload_successful 1\n", "vgpu_web_config_reloads_total 0\n", "vgpu_web_config_reload_failures_total 0\n"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s with --web.disable-exporter-metrics lacks %q:\n%s", path, want, body)
			}
		}
		for _, not := range []string{"go_goroutines", "process_", "promhttp_", "vgpu_exporter_build_info"} {
			if strings.Contains(body, not) {
				t.Errorf("%s with --web.disable-exporter-metrics serves %s", path, not)
			}
		}
	}
}
