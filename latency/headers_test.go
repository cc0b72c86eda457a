package latency

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/version"
)

// TestScrapeHeaders: a scrape names the exporter and its version, prefers
// the exposition formats it parses, and says its timeout.
func TestScrapeHeaders(t *testing.T) {
	defer func(v string) { version.Version = v }(version.Version)
	var got http.Header
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		_, _ = w.Write([]byte(vllmText("5")))
	}))
	defer srv.Close()
	for _, tc := range []struct{ version, wantUA string }{
		{"1.2.3", "vgpu_exporter/1.2.3"},
		{"", "vgpu_exporter"},
	} {
		version.Version = tc.version
		src := &Source{URL: srv.URL, Preset: PresetVLLME2E, Timeout: 2500 * time.Millisecond, MaxBytes: 1 << 20}
		if _, err := (&scraper{httpc: srv.Client()}).fetch(context.Background(), src); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		h := got
		mu.Unlock()
		if ua := h.Get("User-Agent"); ua != tc.wantUA {
			t.Errorf("version %q: User-Agent %q, want %q", tc.version, ua, tc.wantUA)
		}
		if a := h.Get("Accept"); !strings.Contains(a, "application/vnd.google.protobuf") || !strings.Contains(a, "text/plain;version=0.0.4") {
			t.Errorf("Accept %q", a)
		}
		if v := h.Get("X-Prometheus-Scrape-Timeout-Seconds"); v != "2.5" {
			t.Errorf("X-Prometheus-Scrape-Timeout-Seconds %q, want 2.5", v)
		}
	}
}
