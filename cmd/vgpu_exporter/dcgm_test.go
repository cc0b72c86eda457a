package main

import (
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
