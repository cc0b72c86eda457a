package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/simrun/table"
)

// FuzzParseTableFlags feeds arbitrary --seeds, --policies and --duration
// values of `vgpusim tables`: parsing never panics; an error names the
// flag, and its length is bounded by the value's; what is accepted is at
// most the 1000 seeds a table runs, non-zero, and known policies, each
// once.
func FuzzParseTableFlags(f *testing.F) {
	for _, tc := range [][3]string{
		{"1-3", "static-equal,best-effort,autotune,oracle", ""},
		{"4-6", "best-effort", "90s"},
		{"7", "autotune", "1h"},
		{"1,5,9", "static-equal,best-effort", "10m"},
		{"-5", "autotune,autotune", "0s"},
		{"3-1", "", "-5s"},
		{"0-2", ",", "ten"},
		{"1-1001", "autotune,", "1"},
		{"1-9223372036854775807", " autotune", "9999999h"},
		{"1,,2", "nope", ""},
		{"9223372036854775807-9223372036854775807", "static-equal, best-effort", ""},
		{"2,2", "oracle,oracle,oracle", ""},
	} {
		f.Add(tc[0], tc[1], tc[2])
	}
	known := simrun.PolicyNames()
	f.Fuzz(func(t *testing.T, seeds, policies, duration string) {
		var o table.Options
		err := parseTableFlags(&o, seeds, policies, duration)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "--seeds ") && !strings.HasPrefix(msg, "--policies ") && !strings.HasPrefix(msg, "--duration ") {
				t.Fatalf("error does not name the flag: %q", msg)
			}
			// a value is quoted at most twice, each byte at most 4
			// characters (\xff)
			if limit := 8*(len(seeds)+len(policies)+len(duration)) + 400; len(msg) > limit {
				t.Fatalf("error of %d bytes (limit %d): %.200q...", len(msg), limit, msg)
			}
			return
		}
		if len(o.Seeds) < 1 || len(o.Seeds) > 1000 || slices.Contains(o.Seeds, 0) {
			t.Fatalf("--seeds %q gave %d seeds: %v", seeds, len(o.Seeds), o.Seeds)
		}
		if len(o.Policies) < 1 || len(o.Policies) > len(known) {
			t.Fatalf("--policies %q gave %d policies: %q", policies, len(o.Policies), o.Policies)
		}
		for i, p := range o.Policies {
			if !slices.Contains(known, p) || slices.Contains(o.Policies[:i], p) {
				t.Fatalf("--policies %q gave %q (unknown, or twice)", policies, o.Policies)
			}
		}
		if duration == "" && o.Run.Duration != 0 || duration != "" && o.Run.Duration <= 0 {
			t.Fatalf("--duration %q gave %v", duration, o.Run.Duration)
		}
	})
}

// TestParseTableFlagsPolicies: --policies is checked as it is parsed,
// naming the flag and its value: a name with spaces around it is the
// name (it was an unknown policy " best-effort" when the table ran), and
// an empty, unknown or repeated name is refused.
func TestParseTableFlagsPolicies(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{"static-equal,best-effort", []string{"static-equal", "best-effort"}, ""},
		{"static-equal, best-effort ", []string{"static-equal", "best-effort"}, ""},
		{"autotune,", nil, `--policies "autotune,": an empty name at place 2 of 2`},
		{"", nil, `--policies "": an empty name at place 1 of 1`},
		{"fast", nil, `--policies "fast": unknown policy "fast" (known: `},
		{"oracle, oracle", nil, `--policies "oracle, oracle": oracle twice`},
	} {
		var o table.Options
		err := parseTableFlags(&o, "1", tc.in, "")
		if tc.err == "" && (err != nil || !slices.Equal(o.Policies, tc.want)) ||
			tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)) {
			t.Errorf("--policies %q: %q, %v; want %q, error %q", tc.in, o.Policies, err, tc.want, tc.err)
		}
	}
}
