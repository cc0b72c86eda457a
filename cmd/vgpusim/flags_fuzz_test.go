package main

import (
	"strings"
	"testing"
	"time"
)

// FuzzParseRunFlags feeds arbitrary --duration, --seed and --step values:
// parsing never panics, an error names the flag, and accepted values are
// what time.ParseDuration and a non-zero seed give.
func FuzzParseRunFlags(f *testing.F) {
	f.Add("10m", "42", "1s", true)
	f.Add("", "", "500ms", false)
	f.Add("-5s", "0", "0s", true)
	f.Add("1h2m3.5s", "-9223372036854775808", "1us", true)
	f.Add("ten", "x", "1", true)
	f.Fuzz(func(t *testing.T, duration, seed, step string, seedSet bool) {
		var cfg runConfig
		err := parseRunFlags(&cfg, duration, seed, step, seedSet)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "--duration ") && !strings.HasPrefix(msg, "--seed ") && !strings.HasPrefix(msg, "--step ") {
				t.Fatalf("error does not name the flag: %q", msg)
			}
			return
		}
		if want, err := time.ParseDuration(step); err != nil || want != cfg.Step {
			t.Fatalf("step %q parsed as %v", step, cfg.Step)
		}
		if duration != "" {
			if want, err := time.ParseDuration(duration); err != nil || want != cfg.Duration {
				t.Fatalf("duration %q parsed as %v", duration, cfg.Duration)
			}
		}
		if cfg.SeedSet != seedSet || (seedSet && cfg.Seed == 0) {
			t.Fatalf("seed %q (set %v) parsed as %d (set %v)", seed, seedSet, cfg.Seed, cfg.SeedSet)
		}
	})
}
