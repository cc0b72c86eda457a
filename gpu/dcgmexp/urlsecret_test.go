package dcgmexp

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/urlmask/urlmasktest"
)

// TestSourceURLSecretsNotShown: a dcgm-exporter URL's password
// (user:PASSWORD@, sent as basic auth) and query token are sent with the
// request, and appear in none of the Source's log lines, whichever way
// the scrape goes: refused, HTTP 500, a page whose series are skipped
// (the skipped-series and unmatched-GPU warnings name the URL too). The
// host and path still name the source there.
func TestSourceURLSecretsNotShown(t *testing.T) {
	refused := urlmasktest.RefusedAddr(t)
	var rec urlmasktest.Recorder
	answer := func(status int, body string) string {
		return rec.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}))
	}
	outcomes := []struct {
		name    string
		host    string
		wantLog string
	}{
		{"refused", refused, "connection refused"},
		{"HTTP 500", answer(500, "boom"), "HTTP 500 Internal Server Error"},
		{"series skipped", answer(200, "DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\"} 0.5\n"), "dcgm-exporter series skipped"},
	}
	for _, o := range outcomes {
		for _, u := range urlmasktest.Cases("scraper", "/metrics", "format=text") {
			t.Run(o.name+"/"+u.Name, func(t *testing.T) {
				rec.Reset()
				var logs bytes.Buffer
				clock := gpu.NewManualClock(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
				s, err := New(&fakeSource{rd: innerReadings()}, Options{URL: urlmasktest.Host(u.URL, o.host),
					Timeout: 5 * time.Second, Logger: log.NewLogfmtLogger(&logs), Clock: clock})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if _, err := s.Sample(context.Background()); err != nil {
					t.Fatal(err)
				}
				text := logs.String()
				if urlmasktest.Shows(text) {
					t.Errorf("the log holds a secret of the URL:\n%s", text)
				}
				shown := urlmasktest.Host(u.Shown, o.host)
				if !strings.Contains(text, shown) || !strings.Contains(text, o.wantLog) {
					t.Errorf("log:\n%s\nwant it to name the source as %s and say %q", text, shown, o.wantLog)
				}
				if sent := rec.Sent(); o.host != refused && (len(sent) != 1 || sent[0] != u.Asked) {
					t.Errorf("the server was sent (password, query) %q; want %q", sent, u.Asked)
				}
			})
		}
	}
}

// TestNewURLSecretsNotInErrors: New's errors about a URL it refuses quote
// it with its password and query values masked, url.Parse's reason
// included.
func TestNewURLSecretsNotInErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"ftp://scraper:hunter2@h:9400/metrics?token=s3cr3t", `"ftp://scraper:xxxxx@h:9400/metrics?token=xxxxx": want http(s)`},
		{"http://scraper:hunt/er2@h:9400/metrics?token=s3cr3t", `"http://scraper:xxxxx@h:9400/metrics?token=xxxxx": invalid port`},
		{"http://%zz?token=s3cr3t", `"http://%zz?token=xxxxx": invalid URL escape`},
	} {
		_, err := New(&fakeSource{}, Options{URL: tc.url})
		if err == nil {
			t.Fatalf("New took %s", tc.url)
		}
		if msg := err.Error(); strings.Contains(msg, "hunt") || strings.Contains(msg, "er2") || strings.Contains(msg, "s3cr3t") || !strings.Contains(msg, tc.want) {
			t.Errorf("New(%s) = %v, want no secret and %q", tc.url, err, tc.want)
		}
	}
}
