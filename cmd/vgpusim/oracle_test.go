package main

import (
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
)

// The oracle runs on every built-in scenario and prints what it found. Its
// search replays each scenario many times: under -race that takes minutes,
// so `make effects` runs it without the race detector.
func TestOracleRunsOnEveryScenario(t *testing.T) {
	if raceEnabled {
		t.Skip("too slow under -race; make effects runs it")
	}
	bs, err := scenarios.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		t.Run(b.Name, func(t *testing.T) {
			code, out, stderr := vgpusim(t, false, "run", "--scenario", b.Name, "--policy", "oracle", "--duration", "10s")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(out, "oracle: best static settings found in") || !strings.Contains(out, "phase 0s-") {
				t.Errorf("no plan in the output:\n%s", out)
			}
		})
	}
}
