package exposition

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// blockingWriter is a ResponseWriter whose first Write (the cached part)
// reports the bytes it was given on entered, then waits for release and
// reports on after whether those bytes changed meanwhile.
type blockingWriter struct {
	header  http.Header
	body    bytes.Buffer
	writes  int
	entered chan struct{}
	release chan struct{}
	changed chan bool
}

func (w *blockingWriter) Header() http.Header { return w.header }
func (w *blockingWriter) WriteHeader(int)     {}
func (w *blockingWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.writes == 1 {
		before := slices.Clone(p)
		w.entered <- struct{}{}
		<-w.release
		w.changed <- !bytes.Equal(before, p)
	}
	return w.body.Write(p)
}

// A rendering that a request is still writing is not reused by the
// renderings published meanwhile; once nothing holds a retired rendering,
// a later rendering encodes into its memory.
func TestRenderingMemoryReuse(t *testing.T) {
	for _, tc := range []struct {
		name string
		hdr  map[string]string
	}{
		{"plain", nil},
		{"gzip", map[string]string{"Accept-Encoding": "gzip"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, false)
			f.served(t, tc.hdr)
			w := &blockingWriter{header: http.Header{}, entered: make(chan struct{}), release: make(chan struct{}), changed: make(chan bool, 1)}
			req := httptest.NewRequest("GET", "/metrics", nil)
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			done := make(chan struct{})
			go func() { f.c.ServeHTTP(w, req); close(done) }()
			waitFor(t, "the request to write", w.entered)
			for v := int64(1); v <= 3; v++ {
				f.version.Store(v)
				f.c.Publish()
				if got := f.served(t, tc.hdr); got != int(v) {
					t.Fatalf("after publishing %d: served %d", v, got)
				}
			}
			close(w.release)
			if waitFor(t, "the held request", w.changed) {
				t.Error("the bytes of a rendering being written changed under the request")
			}
			<-done
			resp := &http.Response{Header: w.header}
			dec := expfmt.NewDecoder(bytes.NewReader(gunzip(t, resp, w.body.Bytes())), expfmt.ResponseFormat(w.header))
			if names := decodeNames(t, dec); !names["vgpu_fake_ratio"] {
				t.Errorf("the held response decodes to %v", names)
			}

			// Nothing holds a retired rendering now: the next two
			// renderings take turns with the memory of the last two.
			if len(f.c.slots) != 1 {
				t.Fatalf("%d encodings cached, want 1", len(f.c.slots))
			}
			seen := map[*byte]bool{}
			for v := int64(4); v <= 7; v++ {
				f.version.Store(v)
				f.c.Publish()
				f.served(t, tc.hdr)
				f.c.mu.Lock()
				for _, s := range f.c.slots {
					seen[&s.cur.body[:1][0]] = true
				}
				f.c.mu.Unlock()
			}
			if len(seen) > 3 {
				t.Errorf("4 renderings in %d distinct buffers, want their memory reused", len(seen))
			}
		})
	}
}

func decodeNames(t *testing.T, dec expfmt.Decoder) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for {
		mf := new(dto.MetricFamily)
		if err := dec.Decode(mf); err != nil {
			return names
		}
		names[mf.GetName()] = true
	}
}

// Self gathers what a registry of the same collectors gathers, takes
// collectors registered later, and refuses what a registry refuses.
func TestSelf(t *testing.T) {
	goc := collectors.NewGoCollector()
	reqs := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_requests_total", Help: "Requests."})
	s := NewSelf(goc)
	plain := prometheus.NewRegistry()
	plain.MustRegister(collectors.NewGoCollector())
	for _, step := range []struct {
		name string
		do   func() error
		want []string // families present
		gone []string // families absent
	}{
		{"built", func() error { return nil }, []string{"go_goroutines"}, []string{"test_requests_total"}},
		{"registered later", func() error { return s.Register(reqs) }, []string{"go_goroutines", "test_requests_total"}, nil},
		{"duplicate refused", func() error {
			err := s.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "test_requests_total", Help: "Requests."}))
			if !errors.As(err, &prometheus.AlreadyRegisteredError{}) {
				return errors.New("a duplicate was registered")
			}
			return nil
		}, []string{"test_requests_total"}, nil},
		{"unregistered", func() error {
			if !s.Unregister(reqs) {
				return errors.New("Unregister found nothing")
			}
			return nil
		}, []string{"go_goroutines"}, []string{"test_requests_total"}},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		mfs, err := s.Gather()
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got := map[string]bool{}
		for _, mf := range mfs {
			got[mf.GetName()] = true
		}
		for _, n := range step.want {
			if !got[n] {
				t.Errorf("%s: %s not gathered", step.name, n)
			}
		}
		for _, n := range step.gone {
			if got[n] {
				t.Errorf("%s: %s gathered", step.name, n)
			}
		}
	}
	want, err := plain.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.Gather()
	if len(got) != len(want) {
		t.Errorf("%d families gathered, a registry of the same collectors gathers %d", len(got), len(want))
	}
}

// A format asked for once (an odd Accept header) is not rendered at every
// publication for ever: one not asked for during idlePublications
// publications is dropped, its memory with it, and rendered anew when
// asked for again.
func TestIdleFormatsDropped(t *testing.T) {
	f := newFixture(t, false)
	var odd []map[string]string
	for _, accept := range []string{"text/plain;version=0.0.4", string(expfmt.FmtProtoDelim)} {
		for _, esc := range []string{"underscores", "dots", "values", "allow-utf-8"} {
			if len(odd) < maxCachedFormats-1 {
				odd = append(odd, map[string]string{"Accept": accept + ";escaping=" + esc, "Accept-Encoding": "gzip"})
			}
		}
	}
	f.served(t, nil) // the scraper's format
	for _, h := range odd {
		f.served(t, h)
	}
	rendered := func() int64 {
		before := f.calls.Load()
		f.version.Add(1)
		f.c.Publish()
		return f.calls.Load() - before
	}
	if n := rendered(); n != maxCachedFormats {
		t.Fatalf("a publication rendered %d formats, want %d", n, maxCachedFormats)
	}
	for range idlePublications + 1 {
		rendered()
		if v := f.served(t, nil); v != int(f.version.Load()) {
			t.Fatalf("the scraper was served version %d, want %d", v, f.version.Load())
		}
	}
	if n := rendered(); n != 1 {
		t.Errorf("%d publications after the odd formats were last asked for, a publication renders %d formats, want 1 (the scraper's)", idlePublications+2, n)
	}
	if v := f.served(t, odd[0]); v != int(f.version.Load()) {
		t.Errorf("an odd format asked for again: version %d, want %d", v, f.version.Load())
	}
}
