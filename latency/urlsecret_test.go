package latency

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

// TestSourceURLSecretsNotShown: a source URL's password (user:PASSWORD@,
// sent as basic auth) and query token are sent with the request, and
// appear neither in the source's error (Status().LastError, which the
// /tuner page shows) nor in its log line, whichever way the scrape fails:
// refused, HTTP 500, HTTP 503 with a Retry-After. The host and path still
// name the source there.
func TestSourceURLSecretsNotShown(t *testing.T) {
	refused := urlmasktest.RefusedAddr(t)
	var rec urlmasktest.Recorder
	answer := func(status int, retryAfter string) string {
		return rec.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(status)
		}))
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
	for _, f := range failures {
		for _, u := range urlmasktest.Cases("scraper", "/metrics", "format=text") {
			t.Run(f.name+"/"+u.Name, func(t *testing.T) {
				rec.Reset()
				var logs bytes.Buffer
				clock := gpu.NewManualClock(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
				p := NewPool(Options{Clock: clock, Logger: log.NewLogfmtLogger(&logs)})
				src := &Source{URL: urlmasktest.Host(u.URL, f.host), Preset: PresetVLLME2E, Timeout: 5 * time.Second, MaxBytes: 1 << 20}
				p.Set([]Spec{{Name: "chat", Key: "k", Source: src, Window: time.Minute}}, 15*time.Second)
				p.Refresh(context.Background())
				st, _ := p.Status("chat")
				shown := urlmasktest.Host(u.Shown, f.host)
				for what, text := range map[string]string{"LastError": st.LastError, "log": logs.String()} {
					if urlmasktest.Shows(text) {
						t.Errorf("%s holds a secret of the URL: %s", what, text)
					}
					if !strings.Contains(text, shown) || !strings.Contains(text, f.wantErr) {
						t.Errorf("%s = %s; want it to name the source as %s and say %q", what, text, shown, f.wantErr)
					}
				}
				if sent := rec.Sent(); f.host != refused && (len(sent) != 1 || sent[0] != u.Asked) {
					t.Errorf("the server was sent (password, query) %q; want %q", sent, u.Asked)
				}
			})
		}
	}
}
