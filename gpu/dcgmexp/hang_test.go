package dcgmexp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
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
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	defer close(release)
	timeout := 200 * time.Millisecond
	s, err := New(&fakeSource{rd: innerReadings()}, Options{URL: srv.URL, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
