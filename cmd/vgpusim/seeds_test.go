package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

func TestParseSeeds(t *testing.T) {
	tests := []struct {
		in    string
		count int
		list  []int64
		err   bool
	}{
		{"3", 3, nil, false},
		{"1,5,9", 3, []int64{1, 5, 9}, false},
		{"0", 0, nil, true},
		{"x", 0, nil, true},
		{"1,0", 0, nil, true},
		{"1,,2", 0, nil, true},
	}
	for _, tc := range tests {
		n, l, err := parseSeeds(tc.in)
		if (err != nil) != tc.err || n != tc.count || !slices.Equal(l, tc.list) {
			t.Errorf("parseSeeds(%q) = %d, %v, %v", tc.in, n, l, err)
		}
	}
}

// Three seeds give three runs and one line of means per tenant.
func TestSeedsReportsSpread(t *testing.T) {
	code, out, stderr := vgpusim(t, false, "run", "--scenario", "clock-stability", "--duration", "20s", "--seeds", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"seed 1:", "seed 2:", "seed 3:", "3 seeds: mean ± standard deviation", "vision-locked", "energy:"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

func TestChangesPerMinute(t *testing.T) {
	s := report.Summary{Seconds: 600, GPUs: []report.GPUSummary{{UUID: "a"}, {UUID: "b"}}}
	decs := []tuner.Decision{{GPU: "a", Applied: true}, {GPU: "a", Applied: true}, {GPU: "a", Applied: true}, {GPU: "b", Applied: true}, {GPU: "b", Applied: false}}
	got := changesPerMinute(decs, s)
	if want := (changeRate{mean: 4.0 / 10 / 2, max: 3.0 / 10}); got != want {
		t.Errorf("changesPerMinute = %+v, want %+v", got, want)
	}
	if got := changesPerMinute(decs, report.Summary{}); got != (changeRate{}) {
		t.Errorf("empty run: %+v", got)
	}
}

// TestSeedsFromSeed: a --seeds count starts at --seed when it is given; a
// --seeds list with --seed, and --disable-knob with the oracle, are
// errors.
func TestSeedsFromSeed(t *testing.T) {
	code, out, stderr := vgpusim(t, false, "run", "--scenario", "clock-stability", "--duration", "10s", "--seed", "4", "--seeds", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "seed 4:") || !strings.Contains(out, "seed 5:") || strings.Contains(out, "seed 1:") {
		t.Errorf("seeds 4 and 5 expected:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--seed", "4", "--seeds", "1,2"}, "--seed 4 and a --seeds list"},
		{[]string{"--policy", "oracle", "--disable-knob", "locked_clocks"}, "--disable-knob: only a tuner policy"},
	} {
		code, _, stderr := vgpusim(t, false, append([]string{"run", "--scenario", "clock-stability", "--duration", "10s"}, tc.args...)...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
