package latency

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestSourceReadAtFirstRead: a source not read yet is not down. Its Status
// says so (SourceRead false, and SourceUp false) from the tracking's start
// until its first read, which makes it read whether it succeeds, fails or
// is refused; a reload that restarts its counters (a new Key) makes it not
// read yet again, one that keeps them keeps it read.
func TestSourceReadAtFirstRead(t *testing.T) {
	tests := []struct {
		name   string
		status int    // the server's answer; 0: never asked
		body   string // with a 200
		reload string // the Key of a Set after the read; "": none
		read   bool
		up     bool
		errs   uint64
	}{
		{name: "not read yet", read: false, up: false},
		{name: "the first read answered", status: http.StatusOK, body: vllmText("5"), read: true, up: true},
		{name: "the first read failed", status: http.StatusInternalServerError, read: true, up: false, errs: 1},
		{name: "the first answer refused (no histogram)", status: http.StatusOK, body: "# TYPE other counter\nother 1\n", read: true, up: false, errs: 1},
		{name: "the first answer refused (not a count)", status: http.StatusOK, body: vllmText("-5"), read: true, up: false, errs: 1},
		{name: "read, then a reload that keeps the counters", status: http.StatusOK, body: vllmText("5"), reload: "a", read: true, up: true},
		{name: "read, then a reload that restarts them", status: http.StatusOK, body: vllmText("5"), reload: "a2", read: false, up: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			clock := gpu.NewManualClock(time.Unix(1000, 0))
			p := NewPool(Options{Clock: clock, HTTPClient: srv.Client()})
			spec := func(key string) []Spec {
				return []Spec{{Name: "a", Key: key, Source: &Source{URL: srv.URL, Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20},
					Objective: &Objective{Quantile: 0.9, Target: time.Second}, Window: time.Minute}}
			}
			p.Set(spec("a"), 15*time.Second)
			if tc.status != 0 {
				p.Refresh(context.Background())
			}
			if tc.reload != "" {
				p.Set(spec(tc.reload), 15*time.Second)
			}
			st, ok := p.Status("a")
			if !ok {
				t.Fatal("source not tracked")
			}
			if st.SourceRead != tc.read || st.SourceUp != tc.up || st.ScrapeErrorsTotal != tc.errs {
				t.Errorf("read %v, up %v, %d scrape errors (%q); want read %v, up %v, %d", st.SourceRead, st.SourceUp, st.ScrapeErrorsTotal, st.LastError, tc.read, tc.up, tc.errs)
			}
		})
	}
}
