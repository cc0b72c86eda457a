package latency

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

// TestSourceURLSecretsNotShown: a source URL's password (user:PASSWORD@,
// sent as basic auth) and query token are sent with the request, and
// appear neither in the source's error (Status().LastError, which the
// /tuner page shows) nor in its log line, whichever way the scrape fails:
// refused, HTTP 500, HTTP 503 with a Retry-After. The host and path still
// name the source there.
func TestSourceURLSecretsNotShown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close()
	var mu sync.Mutex
	var sent []string // the basic-auth password and query of each request
	answer := func(status int, retryAfter string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, pw, _ := r.BasicAuth()
			mu.Lock()
			sent = append(sent, pw+" "+r.URL.RawQuery)
			mu.Unlock()
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(status)
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	failures := []struct {
		name    string
		host    string
		wantErr string
	}{
		{"refused", refused, "connection refused"},
		{"HTTP 500", answer(500, ""), "HTTP 500 Internal Server Error"},
		{"HTTP 503 Retry-After", answer(503, "120"), "HTTP 503 Service Unavailable; retrying after"},
	}
	urls := []struct {
		name, url, shown string // url's HOST is the failure's host
		asked            string // what the server is to be sent
	}{
		{"password", "http://scraper:hunter2@HOST/metrics", "http://scraper:xxxxx@HOST/metrics", "hunter2 "},
		{"query token", "http://HOST/metrics?token=s3cr3t&format=text", "http://HOST/metrics?token=xxxxx&format=xxxxx", " token=s3cr3t&format=text"},
		{"both", "http://scraper:hunter2@HOST/metrics?token=s3cr3t", "http://scraper:xxxxx@HOST/metrics?token=xxxxx", "hunter2 token=s3cr3t"},
	}
	for _, f := range failures {
		for _, u := range urls {
			t.Run(f.name+"/"+u.name, func(t *testing.T) {
				mu.Lock()
				sent = nil
				mu.Unlock()
				var logs bytes.Buffer
				clock := gpu.NewManualClock(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
				p := NewPool(Options{Clock: clock, Logger: log.NewLogfmtLogger(&logs)})
				src := &Source{URL: strings.Replace(u.url, "HOST", f.host, 1), Preset: PresetVLLME2E, Timeout: 5 * time.Second, MaxBytes: 1 << 20}
				p.Set([]Spec{{Name: "chat", Key: "k", Source: src, Window: time.Minute}}, 15*time.Second)
				p.Refresh(context.Background())
				st, _ := p.Status("chat")
				shown := strings.Replace(u.shown, "HOST", f.host, 1)
				for what, text := range map[string]string{"LastError": st.LastError, "log": logs.String()} {
					if strings.Contains(text, "hunter2") || strings.Contains(text, "s3cr3t") {
						t.Errorf("%s holds a secret of the URL: %s", what, text)
					}
					if !strings.Contains(text, shown) || !strings.Contains(text, f.wantErr) {
						t.Errorf("%s = %s; want it to name the source as %s and say %q", what, text, shown, f.wantErr)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if f.host != refused && (len(sent) != 1 || sent[0] != u.asked) {
					t.Errorf("the server was sent (password, query) %q; want %q", sent, u.asked)
				}
			})
		}
	}
}
