package dcgmexp

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestSourceURLSecretsNotShown: a dcgm-exporter URL's password
// (user:PASSWORD@, sent as basic auth) and query token are sent with the
// request, and appear in none of the Source's log lines, whichever way
// the scrape goes: refused, HTTP 500, a page whose series are skipped
// (the skipped-series and unmatched-GPU warnings name the URL too). The
// host and path still name the source there.
func TestSourceURLSecretsNotShown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close()
	var mu sync.Mutex
	var sent []string // the basic-auth password and query of each request
	answer := func(status int, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, pw, _ := r.BasicAuth()
			mu.Lock()
			sent = append(sent, pw+" "+r.URL.RawQuery)
			mu.Unlock()
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
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
	urls := []struct {
		name, url, shown string // url's HOST is the outcome's host
		asked            string // what the server is to be sent
	}{
		{"password", "http://scraper:hunter2@HOST/metrics", "http://scraper:xxxxx@HOST/metrics", "hunter2 "},
		{"query token", "http://HOST/metrics?token=s3cr3t&format=text", "http://HOST/metrics?token=xxxxx&format=xxxxx", " token=s3cr3t&format=text"},
		{"both", "http://scraper:hunter2@HOST/metrics?token=s3cr3t", "http://scraper:xxxxx@HOST/metrics?token=xxxxx", "hunter2 token=s3cr3t"},
	}
	for _, o := range outcomes {
		for _, u := range urls {
			t.Run(o.name+"/"+u.name, func(t *testing.T) {
				mu.Lock()
				sent = nil
				mu.Unlock()
				var logs bytes.Buffer
				clock := gpu.NewManualClock(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
				s, err := New(&fakeSource{rd: innerReadings()}, Options{URL: strings.Replace(u.url, "HOST", o.host, 1),
					Timeout: 5 * time.Second, Logger: log.NewLogfmtLogger(&logs), Clock: clock})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if _, err := s.Sample(context.Background()); err != nil {
					t.Fatal(err)
				}
				text := logs.String()
				if strings.Contains(text, "hunter2") || strings.Contains(text, "s3cr3t") {
					t.Errorf("the log holds a secret of the URL:\n%s", text)
				}
				shown := strings.Replace(u.shown, "HOST", o.host, 1)
				if !strings.Contains(text, shown) || !strings.Contains(text, o.wantLog) {
					t.Errorf("log:\n%s\nwant it to name the source as %s and say %q", text, shown, o.wantLog)
				}
				mu.Lock()
				defer mu.Unlock()
				if o.host != refused && (len(sent) != 1 || sent[0] != u.asked) {
					t.Errorf("the server was sent (password, query) %q; want %q", sent, u.asked)
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
