package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// flakySource is a source whose samples fail while fail is set.
type flakySource struct {
	gpu.Source
	fail atomic.Bool
}

func (s *flakySource) Sample(ctx context.Context) (*gpu.Readings, error) {
	if s.fail.Load() {
		return nil, errors.New("no GPU answered")
	}
	return s.Source.Sample(ctx)
}

// pageFixture is the simulator's exporter with the tuner on in recommend
// mode, sampling through src on clock, its /metrics page served by h.
type pageFixture struct {
	svc   *service
	src   *flakySource
	clock *gpu.ManualClock
	h     http.Handler
}

// newPageFixture returns a pageFixture after a good sample and a tuner
// round, its page rendered once.
func newPageFixture(t *testing.T) *pageFixture {
	t.Helper()
	f := &pageFixture{clock: gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	cfg := testConfig(t, "--backend=sim", "--sim.scenario=noisy-neighbour", "--tuner.mode=recommend")
	built, err := buildOn(cfg, f.clock, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { built.src.Close() })
	f.src = &flakySource{Source: built.src}
	f.svc = newService(f.src, built.Builder(), "", f.clock, time.Second, log.NewNopLogger())
	f.svc.tuner = built.tuner
	f.h, err = newHandler(handlerOptions{TelemetryPath: "/metrics",
		NewCollector: func(filters ...string) (prometheus.Collector, error) {
			return f.svc.withTuner(newCollector, log.NewNopLogger(), filters)
		},
		Version: f.svc.Version, Subscribe: f.svc.Subscribe})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Sampler().SampleOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.round(t)
	if got := scrapeValue(t, f.h, "vgpu_sample_consecutive_errors"); got != 0 {
		t.Fatalf("after a good sample: vgpu_sample_consecutive_errors %v, want 0", got)
	}
	return f
}

// round runs a tuner round, 15 s after the last one.
func (f *pageFixture) round(t *testing.T) {
	t.Helper()
	f.clock.Advance(15 * time.Second)
	if _, err := f.svc.tuner.Tuner().RunOnce(context.Background(), f.svc.Snapshot()); err != nil {
		t.Fatal(err)
	}
}

// scrapeValue scrapes h and returns the value of the series named
// (without labels) on the page.
func scrapeValue(t *testing.T, h http.Handler, name string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for l := range strings.Lines(rec.Body.String()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("%s not served", name)
	return 0
}

// While the backend fails, each failed sample publishes its figures as a
// snapshot would be: a scrape finds the sample errors counted up to the
// last sample, and the tuner's last round, not those of the scrape before
// (which had asked for a rendering it was not served).
func TestPageCurrentWhileSamplesFail(t *testing.T) {
	f := newPageFixture(t)
	f.src.fail.Store(true)
	for scrape := 1; scrape <= 3; scrape++ {
		f.round(t)
		for range 15 { // a 15 s scrape interval at 1 s samples
			if err := f.svc.Sampler().SampleOnce(context.Background()); err == nil {
				t.Fatal("the sample did not fail")
			}
		}
		if got, want := scrapeValue(t, f.h, "vgpu_sample_consecutive_errors"), float64(15*scrape); got != want {
			t.Errorf("scrape %d: vgpu_sample_consecutive_errors %v, want %v", scrape, got, want)
		}
		if got, want := scrapeValue(t, f.h, "vgpu_sample_errors_total"), float64(15*scrape); got != want {
			t.Errorf("scrape %d: vgpu_sample_errors_total %v, want %v", scrape, got, want)
		}
		if got, want := scrapeValue(t, f.h, "vgpu_tuner_last_run_timestamp_seconds"), float64(f.clock.Now().Unix()); got != want {
			t.Errorf("scrape %d: vgpu_tuner_last_run_timestamp_seconds %v, want the last round's %v", scrape, got, want)
		}
	}
}

// While a sample hangs nothing is published, yet the tuner's rounds go on:
// its status is part of what the page is rendered for, so that its last
// run is served (a scrape later) instead of the one the page was last
// rendered with, which would have VGPUTunerRoundsStalled fire.
func TestTunerRoundsServedWhileSampleHangs(t *testing.T) {
	f := newPageFixture(t)
	for range 3 { // rounds with no sample returning in between
		f.round(t)
		want := float64(f.clock.Now().Unix())
		waitUntil(t, "the last round served", func() bool {
			return scrapeValue(t, f.h, "vgpu_tuner_last_run_timestamp_seconds") == want
		})
	}
}
