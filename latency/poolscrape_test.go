package latency

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// TestStatusDoesNotWaitOnJudging: while a scrape's answer is being judged
// (its delta computed, which costs as much as it has series), the tracker's
// lock is free: Pool.Status answers with the status before it, and a
// Pool.Set (which the tenant Builder calls on the sampler's path) goes
// through.
func TestStatusDoesNotWaitOnJudging(t *testing.T) {
	app := &testutil.FakeApp{Body: map[string][]byte{"a": manySeries(maxSeries, 20, 10)}}
	p := NewPool(Options{Clock: gpu.NewManualClock(time.Unix(0, 0)), AppMetrics: app})
	specs := []Spec{{Name: "a", Key: "k", Window: time.Minute, Objective: &Objective{Quantile: 0.99, Target: time.Second},
		Source: &Source{URL: "sim://a", Metric: "m", Timeout: time.Second, MaxBytes: 4 << 20}}}
	p.Set(specs, 15*time.Second)
	ctx := context.Background()
	p.Refresh(ctx) // the baseline
	app.Set("a", manySeries(maxSeries, 20, 11))
	tr := p.trackers["a"]
	judging, release := make(chan struct{}), make(chan struct{})
	tr.beforeJudge = func() {
		close(judging)
		<-release
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Refresh(ctx)
	}()
	<-judging
	if !tr.mu.TryLock() {
		t.Fatal("the tracker's lock is held while an answer is judged: Status would wait on it")
	}
	tr.mu.Unlock()
	if st, ok := p.Status("a"); !ok || !st.SourceUp || st.Measured {
		t.Errorf("status while judging: %+v, want the baseline's", st)
	}
	p.Set(specs, 15*time.Second)
	close(release)
	released = true
	<-done
	if st, _ := p.Status("a"); !st.Measured || st.RequestsTotal != maxSeries {
		t.Errorf("status after judging: %+v, want %d requests counted", st, maxSeries)
	}
}

// TestPoolStaggersFirstScrapes: sources started together (at Start, or
// added by one Set) are first read spread evenly over one scrape
// interval, in the order of their names, the first at once; then every
// interval from there.
func TestPoolStaggersFirstScrapes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := []byte(vllmText("5"))
		app := &testutil.FakeApp{Body: map[string][]byte{}}
		spec := func(name string) Spec {
			app.Set(name, body)
			return Spec{Name: name, Key: name, Window: time.Minute,
				Source: &Source{URL: "sim://" + name, Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}}
		}
		clock := gpu.NewManualClock(time.Unix(0, 0))
		p := NewPool(Options{Clock: clock, AppMetrics: app})
		specs := []Spec{spec("d"), spec("b"), spec("a"), spec("c")}
		p.Set(specs, time.Minute)
		ctx, cancel := context.WithCancel(context.Background())
		defer func() { cancel(); p.Wait() }()
		read := func() string {
			var out []string
			for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
				if st, ok := p.Status(n); ok && st.SourceRead {
					out = append(out, n)
				}
			}
			return strings.Join(out, "")
		}
		p.Start(ctx)
		for _, want := range []string{"a", "ab", "abc", "abcd"} {
			synctest.Wait()
			if got := read(); got != want {
				t.Fatalf("at %v read %q, want %q", clock.Now().Unix(), got, want)
			}
			clock.Advance(15 * time.Second)
		}
		// Two sources one Set adds: 30 s apart.
		p.Set(append(specs, spec("f"), spec("e")), time.Minute)
		synctest.Wait()
		if got := read(); got != "abcde" {
			t.Fatalf("after a Set adding e and f: read %q, want abcde", got)
		}
		clock.Advance(30 * time.Second)
		synctest.Wait()
		if got := read(); got != "abcdef" {
			t.Fatalf("30 s later: read %q, want abcdef", got)
		}
	})
}

// TestHugeHeadersFailScrape: an answer whose headers are larger than
// headercap.MaxBytes fails the scrape, whatever max_bytes allows the body;
// the Pool's client keeps its transport's TLS settings.
func TestHugeHeadersFailScrape(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/huge" {
			pad := strings.Repeat("h", 8<<10)
			for i := range 128 { // 1 MiB of headers
				w.Header().Add("X-Pad", pad+string(rune('a'+i%26)))
			}
		}
		_, _ = w.Write([]byte(vllmText("5")))
	}))
	defer srv.Close()
	p := NewPool(Options{HTTPClient: srv.Client()})
	spec := func(name, path string) Spec {
		return Spec{Name: name, Key: name, Window: time.Minute,
			Source: &Source{URL: srv.URL + path, Preset: PresetVLLME2E, Timeout: 10 * time.Second, MaxBytes: 4 << 20}}
	}
	p.Set([]Spec{spec("plain", "/"), spec("huge", "/huge")}, time.Minute)
	p.Refresh(context.Background())
	if st, _ := p.Status("plain"); !st.SourceUp {
		t.Errorf("an answer of a few headers, over TLS: %+v", st)
	}
	st, _ := p.Status("huge")
	if st.SourceUp || !strings.Contains(st.LastError, "response headers exceeded 65536 bytes") {
		t.Errorf("an answer of 1 MiB of headers: up %v, error %q", st.SourceUp, st.LastError)
	}
}
