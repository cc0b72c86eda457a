package dcgmexp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A dcgm-exporter that stops answering (it accepts the connection and
// never replies) holds one sample for its timeout, not every sample: once
// a scrape timed out, the next ones run beside the samples, which go on
// with the inner readings at their own pace, and the DCGM fields come back
// with the first scrape that succeeds.
func TestHangingExporterOffTheSamplingPath(t *testing.T) {
	body := readFixture(t, "dcgm-k8s.prom")
	var hang atomic.Bool
	hang.Store(true)
	release := make(chan struct{})
	timeout := 200 * time.Millisecond
	s := hangingSource(t, release, &fakeSource{rd: innerReadings()}, timeout, func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		_, _ = w.Write(body)
	})
	start := time.Now()
	if rd, _ := s.Sample(context.Background()); rd.Devices[0].Activity.Source != "" || s.Up() {
		t.Fatal("DCGM fields from a scrape that timed out")
	}
	first := time.Since(start)
	// ten more samples while it still hangs: none waits for it
	start = time.Now()
	for range 10 {
		rd, err := s.Sample(context.Background())
		if err != nil || rd.Devices[0].Activity.Source != "" || s.Up() {
			t.Fatalf("sample while dcgm-exporter hangs: %v, activity %q, up %v", err, rd.Devices[0].Activity.Source, s.Up())
		}
	}
	ten := time.Since(start)
	t.Logf("the first sample took %v (the timeout %v); ten more %v", first, timeout, ten)
	// Not a bound on wall time: ten samples that each waited for the
	// timeout take at least ten timeouts, whatever the machine.
	if ten >= 10*timeout {
		t.Errorf("ten samples took %v: each waited for the hanging dcgm-exporter (timeout %v)", ten, timeout)
	}
	hang.Store(false)
	deadline := time.Now().Add(30 * time.Second) // a hang guard only
	for {
		rd, _ := s.Sample(context.Background())
		if rd.Devices[0].Activity.Source == "dcgm" && s.Up() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the DCGM fields never came back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.ScrapeErrorsTotal(); n < 1 {
		t.Errorf("scrape errors %d, want the timed-out scrapes counted", n)
	}
}

// A dcgm-exporter that sends its headers and part of the page, then
// hangs, puts the scrapes off the sampling path as one that never answers.
func TestHangingBodyOffTheSamplingPath(t *testing.T) {
	release := make(chan struct{})
	timeout := 200 * time.Millisecond
	s := hangingSource(t, release, &fakeSource{rd: innerReadings()}, timeout, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("# HELP DCGM_FI_DEV_GPU_UTIL x\n"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	_, _ = s.Sample(context.Background())
	start := time.Now()
	for range 5 {
		_, _ = s.Sample(context.Background())
	}
	if d := time.Since(start); d >= 5*timeout {
		t.Errorf("5 samples took %v: the body hang keeps scrapes on the sampling path", d)
	}
}

// What a scrape off the path read goes to the next sample, and is dropped
// with it when the inner source fails: never merged, however old, into
// the first readings after the inner source recovers (dcgm-exporter
// answers 503 by then).
func TestOffPathFieldsDroppedWithAFailedSample(t *testing.T) {
	body := readFixture(t, "dcgm-k8s.prom")
	var mode atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case 0:
			<-r.Context().Done()
		case 1:
			_, _ = w.Write(body)
		default:
			w.WriteHeader(503)
		}
	}))
	defer srv.Close()
	inner := &fakeSource{rd: innerReadings()}
	s, err := New(inner, Options{URL: srv.URL, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, _ = s.Sample(context.Background()) // times out: off the path
	mode.Store(1)
	_, _ = s.Sample(context.Background()) // starts the scrape off the path
	deadline := time.Now().Add(10 * time.Second)
	for !s.Up() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// the inner source fails for a long while; dcgm-exporter goes down
	inner.err = errors.New("nvml down")
	for range 5 {
		_, _ = s.Sample(context.Background())
	}
	mode.Store(2)
	inner.err = nil
	rd, _ := s.Sample(context.Background())
	if rd.Devices[0].Activity.Source == "dcgm" {
		t.Errorf("fields of a scrape taken before 5 failed samples merged into fresh readings (dcgm-exporter answers 503 now); health up=%v", rd.DCGMExporter.Up)
	}
}

// hangingSource serves h and returns a Source on it with timeout: closed
// when the test ends, after release (which h waits on) and the server.
func hangingSource(t *testing.T, release chan struct{}, inner gpu.Source, timeout time.Duration, h http.HandlerFunc) *Source {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before srv.Close, which waits for h
	s, err := New(inner, Options{URL: srv.URL, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// A page the timeout cuts within a line (a dcgm-exporter answering slowly)
// fails as a timeout, not as a malformed line, and so puts the scrapes off
// the sampling path.
func TestTimeoutWithinALine(t *testing.T) {
	release := make(chan struct{})
	timeout := 100 * time.Millisecond
	s := hangingSource(t, release, &fakeSource{rd: innerReadings()}, timeout, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-1\",DCGM_FI_DRIV"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	_, err := s.scrape(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the timeout", err)
	}
	_, _ = s.Sample(context.Background())
	s.mu.Lock()
	off := s.offPath
	s.mu.Unlock()
	if !off {
		t.Errorf("a scrape cut within a line by the timeout left the scrapes on the sampling path")
	}
}
