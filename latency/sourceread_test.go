package latency

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestSourceReadAtFirstRead: a source not read yet is not down. Its Status
// says so (SourceRead false, and SourceUp false) from the tracking's start
// until its first read, which makes it read whether it succeeds, fails or
// is refused. A reload that restarts its counters (a new Key) keeps the
// source's last read, up or down, where it reads the same URL (a down
// source's source_up is not absent till the new counters' first read: an
// alert's `for:` on it would start over), and makes it not read yet where
// the URL changed; one that keeps the counters keeps it read.
func TestSourceReadAtFirstRead(t *testing.T) {
	tests := []struct {
		name   string
		status int    // the server's answer; 0: never asked
		body   string // with a 200
		reload string // the Key of a Set after the read; "": none
		moved  bool   // the Set's source at another URL
		read   bool
		up     bool
		errs   uint64
		// in the error after the reload, the one read's; "": none
		lastErr string
	}{
		{name: "not read yet", read: false, up: false},
		{name: "the first read answered", status: http.StatusOK, body: vllmText("5"), read: true, up: true},
		{name: "the first read failed", status: http.StatusInternalServerError, read: true, up: false, errs: 1},
		{name: "the first answer refused (no histogram)", status: http.StatusOK, body: "# TYPE other counter\nother 1\n", read: true, up: false, errs: 1},
		{name: "the first answer refused (not a count)", status: http.StatusOK, body: vllmText("-5"), read: true, up: false, errs: 1},
		{name: "read, then a reload that keeps the counters", status: http.StatusOK, body: vllmText("5"), reload: "a", read: true, up: true},
		{name: "read, then a reload that restarts them", status: http.StatusOK, body: vllmText("5"), reload: "a2", read: true, up: true},
		{name: "read, then a reload that restarts them at another URL", status: http.StatusOK, body: vllmText("5"), reload: "a2", moved: true, read: false, up: false},
		{name: "down, then a reload that restarts them", status: http.StatusInternalServerError, reload: "a2", read: true, up: false, lastErr: "500"},
		{name: "down, then a reload that restarts them at another URL", status: http.StatusInternalServerError, reload: "a2", moved: true, read: false, up: false},
		{name: "down, then a reload that keeps them", status: http.StatusInternalServerError, reload: "a", read: true, up: false, errs: 1, lastErr: "500"},
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
			spec := func(key string, url string) []Spec {
				return []Spec{{Name: "a", Key: key, Source: &Source{URL: url, Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20},
					Objective: &Objective{Quantile: 0.9, Target: time.Second}, Window: time.Minute}}
			}
			p.Set(spec("a", srv.URL), 15*time.Second)
			if tc.status != 0 {
				p.Refresh(context.Background())
			}
			if tc.reload != "" {
				url := srv.URL
				if tc.moved {
					url += "/other"
				}
				p.Set(spec(tc.reload, url), 15*time.Second)
			}
			st, ok := p.Status("a")
			if !ok {
				t.Fatal("source not tracked")
			}
			if st.SourceRead != tc.read || st.SourceUp != tc.up || st.ScrapeErrorsTotal != tc.errs {
				t.Errorf("read %v, up %v, %d scrape errors (%q); want read %v, up %v, %d", st.SourceRead, st.SourceUp, st.ScrapeErrorsTotal, st.LastError, tc.read, tc.up, tc.errs)
			}
			if tc.reload != "" && (tc.lastErr == "") != (st.LastError == "") || !strings.Contains(st.LastError, tc.lastErr) {
				t.Errorf("error %q after the reload; want one with %q", st.LastError, tc.lastErr)
			}
		})
	}
}

// A tracker's first successful read is its baseline: the counters start
// there and nothing is counted, so its window is empty however busy the
// source. Its Status says so (Measured false, the source up) until a later
// read counts a change; a reload that restarts the counters starts over,
// one that keeps them keeps it measured.
func TestMeasuredAfterBaseline(t *testing.T) {
	tests := []struct {
		name     string
		reads    []string // the answers' counts ("": a failed read)
		reload   string   // the Key of a Set after the reads; "": none
		after    []string // reads after the reload
		measured bool
		window   float64 // requests in the window
	}{
		{name: "one read: the baseline", reads: []string{"1000"}, measured: false},
		{name: "a failed read, then one answered: the baseline", reads: []string{"", "1000"}, measured: false},
		{name: "two reads: measured", reads: []string{"1000", "1300"}, measured: true, window: 300},
		{name: "two reads of the same counts: measured, no request", reads: []string{"1000", "1000"}, measured: true},
		{name: "measured, then a reload that restarts the counters and one read", reads: []string{"1000", "1300"}, reload: "a2", after: []string{"1600"}, measured: false},
		{name: "measured, then a reload that restarts them and two reads", reads: []string{"1000", "1300"}, reload: "a2", after: []string{"1600", "1900"}, measured: true, window: 300},
		{name: "measured, then a reload that keeps them", reads: []string{"1000", "1300"}, reload: "a", measured: true, window: 300},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var count string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if count == "" {
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				_, _ = w.Write([]byte(vllmText(count)))
			}))
			defer srv.Close()
			clock := gpu.NewManualClock(time.Unix(1000, 0))
			p := NewPool(Options{Clock: clock, HTTPClient: srv.Client()})
			spec := func(key string) []Spec {
				return []Spec{{Name: "a", Key: key, Source: &Source{URL: srv.URL, Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20},
					Objective: &Objective{Quantile: 0.9, Target: time.Second}, Window: time.Minute}}
			}
			read := func(counts []string) {
				for _, c := range counts {
					count = c
					p.Refresh(context.Background())
					clock.Advance(15 * time.Second)
				}
			}
			p.Set(spec("a"), 15*time.Second)
			read(tc.reads)
			if tc.reload != "" {
				p.Set(spec(tc.reload), 15*time.Second)
				read(tc.after)
			}
			st, ok := p.Status("a")
			if !ok {
				t.Fatal("source not tracked")
			}
			if !st.SourceUp || st.Measured != tc.measured || st.WindowRequests != tc.window {
				t.Errorf("up %v, measured %v, %v requests in the window (%q); want up, measured %v, %v", st.SourceUp, st.Measured, st.WindowRequests, st.LastError, tc.measured, tc.window)
			}
		})
	}
}
