package simrun_test

import (
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
	}
	for _, tc := range tests {
		got, err := simrun.ParseSeedRange(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("simrun.ParseSeedRange(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// FuzzParseSeeds: no input makes the seed parsers panic, and what they
// accept has only non-zero seeds (a range only positive ones, in order).
func FuzzParseSeeds(f *testing.F) {
	for _, s := range []string{"3", "1,2,3", "4-6", "0", "-1", "1,,2", "9-1", " 5 ,6", "9223372036854775807-9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if n, list, err := simrun.ParseSeeds(v); err == nil {
			if n < 1 || (list != nil && len(list) != n) {
				t.Fatalf("ParseSeeds(%q) = %d, %v", v, n, list)
			}
			for _, s := range list {
				if s == 0 {
					t.Fatalf("ParseSeeds(%q) accepted seed 0", v)
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
