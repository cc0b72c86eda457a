package main

import (
	"context"
	"io"
	"net/http/httptest"
	"testing"

	"github.com/go-kit/log"
)

// BenchmarkScrape measures one /metrics request over a snapshot of the
// default built-in scenario, with the exporter's own metrics.
func BenchmarkScrape(b *testing.B) {
	cfg, err := parseArgs(b, "--backend=sim")
	if err != nil {
		b.Fatal(err)
	}
	svc, err := build(cfg, log.NewNopLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer svc.src.Close()
	if err := svc.sampler.SampleOnce(context.Background()); err != nil {
		b.Fatal(err)
	}
	h := serviceHandler(b, svc, selfRegistry())
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != 200 {
			b.Fatalf("code %d", rec.Code)
		}
		io.Copy(io.Discard, rec.Body)
	}
}
