package simrun_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

func TestChangesPerMinute(t *testing.T) {
	s := report.Summary{Seconds: 600, GPUs: []report.GPUSummary{{UUID: "a"}, {UUID: "b"}}}
	decs := []tuner.Decision{{GPU: "a", Applied: true}, {GPU: "a", Applied: true}, {GPU: "a", Applied: true}, {GPU: "b", Applied: true}, {GPU: "b", Applied: false}}
	got := simrun.ChangesPerMinute(decs, s)
	if want := (simrun.ChangeRate{Mean: 4.0 / 10 / 2, Max: 3.0 / 10}); got != want {
		t.Errorf("simrun.ChangesPerMinute = %+v, want %+v", got, want)
	}
	if got := simrun.ChangesPerMinute(decs, report.Summary{}); got != (simrun.ChangeRate{}) {
		t.Errorf("empty run: %+v", got)
	}
}

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
		{"1000", 1000, nil, false},
		{"1001", 0, nil, true}, // ran a million runs for 1000000
		{"1,1", 0, nil, true},  // counted seed 1 twice in the mean
		{"5,-5,5", 0, nil, true},
		{"5,-5", 2, []int64{5, -5}, false},
	}
	for _, tc := range tests {
		n, l, err := simrun.ParseSeeds(tc.in)
		if (err != nil) != tc.err || n != tc.count || !slices.Equal(l, tc.list) {
			t.Errorf("simrun.ParseSeeds(%q) = %d, %v, %v", tc.in, n, l, err)
		}
	}
}

func TestParseSeedRange(t *testing.T) {
	tests := []struct {
		in   string
		want []int64
		err  bool
	}{
		{"1-3", []int64{1, 2, 3}, false},
		{"4-6", []int64{4, 5, 6}, false},
		{"7", []int64{7}, false},
		{"1,5,9", []int64{1, 5, 9}, false},
		{"3-1", nil, true},
		{"0-2", nil, true},
		{"0", nil, true},
		{"a-b", nil, true},
		{"", nil, true},
		{"3,3", nil, true},
	}
	for _, tc := range tests {
		got, err := simrun.ParseSeedRange(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("simrun.ParseSeedRange(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// TestSeedsCount: a count of seeds runs the seeds from the base on, and
// passes over 0, which is no seed (sim.Options.Seed 0 keeps the
// scenario's): --seed=-2 --seeds 3 ran the scenario's own seed and named
// it "seed 0". A scenario whose own seed is 0 runs it first.
func TestSeedsCount(t *testing.T) {
	for _, tc := range []struct {
		base  int64
		count int
		want  []int64
		err   bool
	}{
		{1, 3, []int64{1, 2, 3}, false},
		{-2, 3, []int64{-2, -1, 1}, false},
		{-1, 2, []int64{-1, 1}, false},
		{0, 2, []int64{0, 1}, false},
		{math.MaxInt64 - 1, 2, []int64{math.MaxInt64 - 1, math.MaxInt64}, false},
		{math.MaxInt64, 2, nil, true},
	} {
		cfg := simrun.Config{Seed: tc.base, SeedSet: true}
		if tc.base == 0 {
			p := filepath.Join(t.TempDir(), "seedless.yaml")
			if err := os.WriteFile(p, []byte("gpus: [{model: H100-SXM5-80GB}]\ntenants: [{name: a, workload: {type: training, flops: 1e12}}]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg = simrun.Config{Scenario: p}
		}
		got, err := simrun.Seeds(cfg, tc.count, nil)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("Seeds from %d, %d of them = %v, %v; want %v", tc.base, tc.count, got, err, tc.want)
		}
	}
}

// FuzzParseSeeds: no input makes the seed parsers panic, and what they
// accept has only non-zero seeds (a range only positive ones, in order).
func FuzzParseSeeds(f *testing.F) {
	for _, s := range []string{"3", "1,2,3", "4-6", "0", "-1", "1,,2", "9-1", " 5 ,6", "9223372036854775807-9223372036854775807", "1001", "2,2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if n, list, err := simrun.ParseSeeds(v); err == nil {
			if n < 1 || n > 1000 || (list != nil && len(list) != n) {
				t.Fatalf("ParseSeeds(%q) = %d, %v", v, n, list)
			}
			for i, s := range list {
				if s == 0 || slices.Contains(list[:i], s) {
					t.Fatalf("ParseSeeds(%q) accepted seed %d (0, or twice)", v, s)
				}
			}
		}
		if list, err := simrun.ParseSeedRange(v); err == nil {
			for i, s := range list {
				if s == 0 || (i > 0 && s <= list[i-1] && strings.Contains(v, "-")) {
					t.Fatalf("ParseSeedRange(%q) = %v", v, list)
				}
			}
		}
	})
}
