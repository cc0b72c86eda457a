package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-kit/log"
)

func TestWrapDCGM(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wrapped bool
	}{
		{nil, false},
		{[]string{"--backend=nvml", "--backend.dcgm-exporter.url=http://127.0.0.1:9400/metrics"}, true},
	} {
		src := &fakeSource{}
		got, err := wrapDCGM(testConfig(t, tc.args...), src, log.NewNopLogger())
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if wrapped := got != src; wrapped != tc.wrapped {
			t.Errorf("%v: wrapped %v, want %v", tc.args, wrapped, tc.wrapped)
		}
		if err := got.Close(); err != nil || !src.closed.Load() {
			t.Errorf("%v: closing the wrapper does not close the backend", tc.args)
		}
	}
}

// A scrape timeout not below the sample interval is warned of at start:
// a dcgm-exporter answering within it delays every sample. The defaults
// are not.
func TestWrapDCGMWarnsOfATimeoutNotBelowTheInterval(t *testing.T) {
	for _, tc := range []struct {
		args []string
		warn bool
	}{
		{nil, false},
		{[]string{"--backend.dcgm-exporter.timeout=2s"}, true},
		{[]string{"--backend.dcgm-exporter.timeout=1s"}, true},
		{[]string{"--backend.dcgm-exporter.timeout=2s", "--sample.interval=5s"}, false},
		{[]string{"--sample.interval=200ms"}, true},
	} {
		var logs bytes.Buffer
		args := append([]string{"--backend=nvml", "--backend.dcgm-exporter.url=http://127.0.0.1:9400/metrics"}, tc.args...)
		got, err := wrapDCGM(testConfig(t, args...), &fakeSource{}, log.NewLogfmtLogger(&logs))
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		_ = got.Close()
		if warned := strings.Contains(logs.String(), "not below --sample.interval"); warned != tc.warn {
			t.Errorf("%v: log %q, want a warning: %v", tc.args, logs.String(), tc.warn)
		}
	}
}
