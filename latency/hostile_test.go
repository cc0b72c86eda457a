package latency

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

var protoFormat = expfmt.NewFormat(expfmt.TypeProtoDelim)

// protoBody re-encodes a text exposition as delimited protobuf (nil when
// the text does not parse).
func protoBody(tb testing.TB, text []byte) []byte {
	tb.Helper()
	fams, err := parseExposition(text, expfmt.NewFormat(expfmt.TypeTextPlain), nil)
	if err != nil {
		return nil
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, protoFormat)
	for _, mf := range fams {
		if err := enc.Encode(mf); err != nil {
			tb.Fatal(err)
		}
	}
	return b.Bytes()
}

// vllmText is a vLLM histogram of count requests, all of them under 0.1 s.
func vllmText(count string) string {
	return fmt.Sprintf(`# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="0.1"} %[1]s
vllm:e2e_request_latency_seconds_bucket{le="+Inf"} %[1]s
vllm:e2e_request_latency_seconds_sum 1
vllm:e2e_request_latency_seconds_count %[1]s
`, count)
}

// hostileServer answers each path with one hostile shape.
func hostileServer(t *testing.T) *httptest.Server {
	t.Helper()
	protoHeader := func(w http.ResponseWriter) { w.Header().Set("Content-Type", string(protoFormat)) }
	claim := func(n uint64) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			protoHeader(w)
			_, _ = w.Write(append(protowire.AppendVarint(nil, n), 0x0a, 0x01, 'x'))
		}
	}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(vllmText("5")))
	}))
	t.Cleanup(other.Close)
	mux := http.NewServeMux()
	mux.HandleFunc("/claim-1TiB", claim(1<<40))
	mux.HandleFunc("/claim-2^50", claim(1<<50))
	mux.HandleFunc("/claim-3GiB", claim(3<<30))
	mux.HandleFunc("/claim-2^64", claim(math.MaxUint64))
	mux.HandleFunc("/truncated", func(w http.ResponseWriter, r *http.Request) {
		protoHeader(w)
		b := protoBody(t, []byte(vllmText("5")))
		_, _ = w.Write(b[:len(b)-3])
	})
	mux.HandleFunc("/bad-varint", func(w http.ResponseWriter, r *http.Request) {
		protoHeader(w)
		_, _ = w.Write(bytes.Repeat([]byte{0xff}, 11))
	})
	var bomb bytes.Buffer // 16 MiB of zeros in about 16 KiB
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	_, _ = zw.Write(make([]byte, 16<<20))
	_ = zw.Close()
	mux.HandleFunc("/gzip-bomb", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(bomb.Bytes())
	})
	mux.HandleFunc("/endless", func(w http.ResponseWriter, r *http.Request) {
		line := []byte("# an endless comment\n")
		for r.Context().Err() == nil {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/slow-body", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("# TYPE vllm:e2e_request_latency_seconds histogram\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes
	})
	for name, v := range map[string]string{"1e300": "1e300", "nan": "NaN", "inf": "+Inf", "negative": "-5", "2^60": "1152921504606846976"} {
		mux.HandleFunc("/count-"+name, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(vllmText(v))) })
	}
	mux.HandleFunc("/redirect-other-port", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/metrics", http.StatusFound)
	})
	mux.HandleFunc("/redirect-same", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/count-ok", http.StatusFound)
	})
	mux.HandleFunc("/count-ok", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(vllmText("5"))) })
	mux.HandleFunc("/drip", func(w http.ResponseWriter, r *http.Request) {
		// a byte at a time, each well within any read timeout
		for _, c := range []byte(strings.Repeat("# a slow comment\n", 1000)) {
			if _, err := w.Write([]byte{c}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	mux.HandleFunc("/closes-mid-body", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		_, _ = w.Write([]byte(vllmText("5")[:60]))
	})
	mux.HandleFunc("/429", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	mux.HandleFunc("/redirect-loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/redirect-loop", http.StatusFound)
	})
	mux.HandleFunc("/bucket-decreases", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="0.1"} 5
vllm:e2e_request_latency_seconds_bucket{le="1"} 3
vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 5
vllm:e2e_request_latency_seconds_sum 1
vllm:e2e_request_latency_seconds_count 5
`))
	})
	mux.HandleFunc("/invalid-utf8", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("vllm:e2e_request_latency_seconds_count{model=\"\xff\xfe\"} 5\n"))
	})
	mux.HandleFunc("/raw-garbage", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("vllm:e2e_request_latency_seconds_count \x1b[31m" + strings.Repeat("SECRET", 1000) + "\n"))
	})
	mux.HandleFunc("/reason", func(w http.ResponseWriter, r *http.Request) {
		// a reason phrase is the server's own text; it must not be logged
		hj, ok := w.(http.Hijacker)
		if !ok {
			return
		}
		c, buf, err := hj.Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = buf.WriteString("HTTP/1.1 503 SECRET" + strings.Repeat("x", 5000) + "\r\nContent-Length: 0\r\n\r\n")
		_ = buf.Flush()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestHostileSources: every hostile answer gets a clear error that names
// the source, marks it down, carries none of the body's bytes raw, ends
// within the source's timeout (a body dripped a byte at a time too), and
// costs no more memory than max_bytes allows.
func TestHostileSources(t *testing.T) {
	srv := hostileServer(t)
	tests := []struct {
		path, redirects, want string
	}{
		{"/claim-1TiB", "", "claims 1099511627776 bytes, but only 3 follow"},
		{"/claim-2^50", "", "claims 1125899906842624 bytes"},
		{"/claim-3GiB", "", "claims 3221225472 bytes"},
		{"/claim-2^64", "", "claims 18446744073709551615 bytes"},
		{"/truncated", "", "only"},
		{"/bad-varint", "", "length prefix at byte 0"},
		{"/gzip-bomb", "", "larger than max_bytes 65536; stopped reading there"},
		{"/endless", "", "larger than max_bytes 65536"},
		{"/slow-body", "", "deadline exceeded"},
		{"/count-1e300", "", "request count 1e+300 is not a plausible counter value"},
		{"/count-nan", "", "bad sample count NaN"},
		{"/count-inf", "", "bad sample count +Inf"},
		{"/count-negative", "", "negative"},
		{"/count-2^60", "", "is not a plausible counter value (0 to 2^53)"},
		{"/redirect-other-port", "", "refused a redirect to another host or port"},
		{"/redirect-other-port", RedirectsNone, "follow_redirects is none"},
		{"/redirect-same", RedirectsNone, "follow_redirects is none"},
		{"/raw-garbage", "", "parse"},
		{"/reason", "", "HTTP 503 Service Unavailable"},
		{"/drip", "", "deadline exceeded"},
		{"/closes-mid-body", "", "unexpected EOF"},
		{"/429", "", "HTTP 429 Too Many Requests"},
		{"/redirect-loop", "", "stopped after 5 redirects"},
		{"/bucket-decreases", "", "bucket counts decrease at le=1"},
		{"/invalid-utf8", "", "parse"},
	}
	for _, tc := range tests {
		t.Run(tc.path+tc.redirects, func(t *testing.T) {
			src := &Source{URL: srv.URL + tc.path, Preset: PresetVLLME2E, Timeout: 300 * time.Millisecond, MaxBytes: 64 << 10, FollowRedirects: tc.redirects}
			tr := newSLOTracker(Spec{Name: "x", Source: src, Window: time.Minute})
			start := time.Now()
			err := (&scraper{httpc: srv.Client()}).scrapeOnce(context.Background(), tr, time.Unix(0, 0))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if d := time.Since(start); d > src.Timeout+2*time.Second {
				t.Errorf("the scrape took %v, past its timeout of %v", d, src.Timeout)
			}
			st := tr.Status()
			if st.SourceUp || st.ScrapeErrorsTotal != 1 || !strings.HasPrefix(st.LastError, src.URL+": ") {
				t.Errorf("status %+v", st)
			}
			if len(st.LastError) > maxErrLen+len(src.URL)+40 || strings.Count(st.LastError, "SECRET") > maxQuoted/len("SECRET") || strings.Contains(st.LastError, "\x1b") || strings.Contains(st.LastError, "xxxxxxxxxx") {
				t.Errorf("the error carries the body raw or long (%d bytes): %.300q", len(st.LastError), st.LastError)
			}
		})
	}
}

// TestRedirectPolicies: same-host (the default) follows a redirect on the
// same host and port only, any follows others too.
func TestRedirectPolicies(t *testing.T) {
	srv := hostileServer(t)
	for _, tc := range []struct{ path, policy string }{
		{"/redirect-same", ""},
		{"/redirect-same", RedirectsSameHost},
		{"/redirect-other-port", RedirectsAny},
	} {
		src := &Source{URL: srv.URL + tc.path, Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20, FollowRedirects: tc.policy}
		tr := newSLOTracker(Spec{Name: "x", Source: src, Window: time.Minute})
		if err := (&scraper{httpc: srv.Client()}).scrapeOnce(context.Background(), tr, time.Unix(0, 0)); err != nil {
			t.Errorf("%s with follow_redirects %q: %v", tc.path, tc.policy, err)
		}
	}
}

// TestAbsurdCountersDoNotFreeze: a source that once answers 1e300 (or
// jumps by 2^53 and back) is marked down for that scrape, and the
// counters go on counting the requests of the answers around it.
func TestAbsurdCountersDoNotFreeze(t *testing.T) {
	for _, bad := range []string{"1e300", "NaN", "9007199254740992", "-1"} {
		t.Run(bad, func(t *testing.T) {
			src := &Source{URL: "sim://a", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
			tr := newSLOTracker(Spec{Name: "x", Source: src, Objective: &Objective{Quantile: 0.9, Target: time.Second}, Window: time.Hour})
			app := &testutil.FakeApp{Body: map[string][]byte{}}
			sc := &scraper{app: app}
			at := func(i int) time.Time { return time.Unix(int64(15*i), 0) }
			steps := []string{"10", "20", bad, "30", bad, "40", "0", "5"}
			var errs int
			for i, c := range steps {
				app.Body["a"] = []byte(vllmText(c))
				if err := sc.scrapeOnce(context.Background(), tr, at(i)); err != nil {
					errs++
				}
			}
			// 10->20->(bad)->30->(bad)->40->reset 0->5: 10+10+10+0+5, or,
			// where the bad answer parses as a count that is then left out,
			// the same: a refused move restarts the base.
			st := tr.Status()
			if st.RequestsTotal != 35 || st.GoodRequestsTotal != 35 {
				t.Errorf("counters %v good %v, want 35 35 (errors %d)", st.RequestsTotal, st.GoodRequestsTotal, errs)
			}
			if errs < 2 || !st.SourceUp {
				t.Errorf("%d scrapes refused, source up %v; want the two bad ones refused and up again after", errs, st.SourceUp)
			}
		})
	}
}

type panicApp struct{}

func (panicApp) AppMetrics(string, io.Writer) error { panic("a source's scrape went wrong") }

// logLines collects what a logger is given, one map per line.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
}

func (l *logLines) Log(kv ...any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[fmt.Sprint(kv[i])] = kv[i+1]
	}
	l.lines = append(l.lines, m)
	return nil
}

// TestPoolRecoversPanic: a panic in a scrape is the source's error: the
// pool goes on, the source is down and its errors counted.
func TestPoolRecoversPanic(t *testing.T) {
	logs := &logLines{}
	clock := gpu.NewManualClock(time.Unix(0, 0))
	p := NewPool(Options{Clock: clock, AppMetrics: panicApp{}, Logger: logs})
	p.Set([]Spec{{Name: "a", Key: "a", Source: &Source{URL: "sim://a", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}, Window: time.Minute}}, 15*time.Second)
	for i := 0; i < 3; i++ {
		p.Refresh(context.Background())
		clock.Advance(15 * time.Second)
	}
	st, _ := p.Status("a")
	if st.SourceUp || st.ScrapeErrorsTotal != 3 || !strings.Contains(st.LastError, "scrape panicked (recovered): a source's scrape went wrong") {
		t.Errorf("status after panics: %+v", st)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if len(logs.lines) != 1 {
		t.Errorf("%d log lines for 3 failures in 30 s, want 1: %v", len(logs.lines), logs.lines)
	}
}

// TestPoolLogRateLimited: a source that fails and recovers at every
// scrape for ten minutes gets one failure line a minute (and that
// failure's recovery line), and a line after others were left out says
// how many.
func TestPoolLogRateLimited(t *testing.T) {
	logs := &logLines{}
	clock := gpu.NewManualClock(time.Unix(0, 0))
	app := &testutil.FakeApp{Body: map[string][]byte{}}
	p := NewPool(Options{Clock: clock, AppMetrics: app, Logger: log.Logger(logs)})
	p.Set([]Spec{{Name: "a", Key: "a", Source: &Source{URL: "sim://a", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}, Window: time.Minute}}, 15*time.Second)
	const scrapes = 40 // 10 minutes at 15 s
	for i := 0; i < scrapes; i++ {
		if i%2 == 0 {
			app.Body["a"] = []byte("garbage \x1b" + strings.Repeat("B", 10000))
		} else {
			app.Body["a"] = []byte(vllmText(fmt.Sprint(i)))
		}
		p.Refresh(context.Background())
		clock.Advance(15 * time.Second)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if n := len(logs.lines); n > 2*11 || n < 10 {
		t.Errorf("%d log lines for %d flapping scrapes over 10 minutes, want about two a minute", n, scrapes)
	}
	summed := false
	for _, l := range logs.lines {
		if _, ok := l["lines_suppressed"]; ok {
			summed = true
		}
		if s := fmt.Sprint(l["err"]); strings.Contains(s, "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB") || strings.Contains(s, "\x1b") {
			t.Errorf("a log line carries the body raw: %.200q", s)
		}
	}
	if !summed {
		t.Errorf("no line sums up the lines left out: %v", logs.lines)
	}
}
