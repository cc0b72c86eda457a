package latency

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// TestScrapeHeaders: a scrape names the exporter and its version, prefers
// the exposition formats it parses, and says its timeout.
func TestScrapeHeaders(t *testing.T) {
	h, last := testutil.KeepHeaders(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(vllmText("5")))
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	testutil.CheckUserAgent(t, func(string) http.Header {
		src := &Source{URL: srv.URL, Preset: PresetVLLME2E, Timeout: 2500 * time.Millisecond, MaxBytes: 1 << 20}
		if _, err := (&scraper{httpc: srv.Client()}).fetch(context.Background(), src); err != nil {
			t.Fatal(err)
		}
		h := last()
		if a := h.Get("Accept"); !strings.Contains(a, "application/vnd.google.protobuf") || !strings.Contains(a, "text/plain;version=0.0.4") {
			t.Errorf("Accept %q", a)
		}
		if v := h.Get("X-Prometheus-Scrape-Timeout-Seconds"); v != "2.5" {
			t.Errorf("X-Prometheus-Scrape-Timeout-Seconds %q, want 2.5", v)
		}
		return h
	})
}
