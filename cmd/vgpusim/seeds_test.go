package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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

// TestSeedsFromSeed: a --seeds count starts at --seed when it is given; a
// --seeds list with --seed, --disable-knob with the oracle, and a knob
// both enabled and disabled, are errors.
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
		{[]string{"--enable-knob", "pause_duty", "--disable-knob", "pause_duty"}, "--enable-knob and --disable-knob both name pause_duty"},
	} {
		code, _, stderr := vgpusim(t, false, append([]string{"run", "--scenario", "clock-stability", "--duration", "10s"}, tc.args...)...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// `vgpusim tables` prints the policy table, and the slack table after a
// blank line, for the scenarios and policies it is given.
func TestTablesCommand(t *testing.T) {
	args := []string{"tables", "--seeds", "1", "--policies", "static-equal,best-effort", "--scenario", "noisy-neighbour", "--duration", "1m"}
	code, out, stderr := vgpusim(t, false, append(args, "--slack")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	// header, rule, two policies; blank; header, rule, chat's SLO
	if len(lines) != 8 || lines[4] != "" {
		t.Fatalf("output:\n%s", out)
	}
	for i, prefix := range []string{"| Scenario | policy | SLOs met (per seed) |", "|---|", "| `noisy-neighbour` | static-equal |", "| `noisy-neighbour` | best-effort |",
		"", "| Scenario | tenant | SLO |", "|---|", "| `noisy-neighbour` | chat | p99 <= "} {
		if !strings.HasPrefix(lines[i], prefix) {
			t.Errorf("line %d %q, want it to start with %q", i, lines[i], prefix)
		}
	}
	if strings.Contains(lines[0], "vs oracle") || !strings.Contains(lines[0], "batch work vs best-effort") {
		t.Errorf("a vs oracle column without the oracle: %s", lines[0])
	}
	if !strings.Contains(stderr, "noisy-neighbour: 2 policies x 1 seeds in") {
		t.Errorf("stderr %q lacks the scenario's run time", stderr)
	}
	code, out, stderr = vgpusim(t, false, append(args, "--no-policy-table", "--slack")...)
	if code != 0 || !strings.HasPrefix(out, "| Scenario | tenant | SLO |") || strings.Count(out, "\n") != 3 {
		t.Errorf("slack table only: exit %d, %s\n%s", code, stderr, out)
	}
	for _, tc := range []struct{ args []string }{{[]string{"tables", "--seeds", "3-1"}}, {[]string{"tables", "--duration", "x"}}, {[]string{"tables", "--scenario", "no-such"}}} {
		if code, _, stderr := vgpusim(t, false, tc.args...); code != 1 || !strings.HasPrefix(stderr, "vgpusim: error: ") {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, stderr)
		}
	}
}

// TestSeedsOutBounded: a --seeds run with --out whose files would come
// to more than 32 GiB by the estimate is refused before its first run,
// naming --seeds, --out and the estimate, and leaves no directory; --seeds
// 1000 of two days of noisy-neighbour started writing about 50 GB. The
// context is ended already, so that a run that starts stops at once
// ("interrupted: seed 1: ..."); it adds "interrupted: " to the refusal
// too, which is left out here.
func TestSeedsOutBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"csv", []string{"--seeds", "1000"}, "--seeds (1000 runs) with --out OUT: an estimated 48.5 GiB of files (each run 518400 rows, about 100 bytes a row in csv), more than the 32 GiB a --seeds run writes; give fewer seeds or a shorter --duration, or leave --out out"},
		{"json", []string{"--seeds", "300", "--format", "json"}, "--seeds (300 runs) with --out OUT: an estimated 36.3 GiB of files (each run 518400 rows, about 250 bytes a row in json)"},
		{"csv within the bound", []string{"--seeds", "300"}, "seed 1: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var stdout, stderr bytes.Buffer
			args := append([]string{"run", "--scenario", "noisy-neighbour", "--duration", "48h", "--out", out}, tc.args...)
			code := run(ctx, args, &stdout, &stderr, false)
			got := strings.Replace(stderr.String(), "interrupted: ", "", 1)
			want := "vgpusim: error: " + strings.ReplaceAll(tc.want, "OUT", out)
			if code != 1 || !strings.HasPrefix(got, want) {
				t.Errorf("exit %d, stderr %q; want it to start %q", code, stderr.String(), want)
			}
			if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("--out %s left behind: %v", out, err)
			}
		})
	}
}

// TestSeedsOutCountsNames: the estimate counts the tenants' names written
// on each row. Three tenants of 253-byte names write 270 bytes a row (an
// hour's run, measured); 300 seeds of two days were within the bound by
// an estimate of 100 bytes a row (19.4 GiB), and would write 52 GiB.
func TestSeedsOutCountsNames(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: long-names\ngpus:\n  - {model: H100-SXM5-80GB}\ntenants:\n")
	for i := range 3 {
		fmt.Fprintf(&b, "  - {name: %s%d, workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}}\n", strings.Repeat("n", 252), i)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "long.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"run", "--scenario", file, "--duration", "48h", "--out", out, "--seeds", "300"}, &stdout, &stderr, false)
	got := strings.Replace(stderr.String(), "interrupted: ", "", 1)
	want := "vgpusim: error: --seeds (300 runs) with --out " + out + ": an estimated 50.1 GiB of files (each run 691200 rows, about 259 bytes a row in csv)"
	if code != 1 || !strings.HasPrefix(got, want) {
		t.Errorf("exit %d, stderr %q; want it to start %q", code, stderr.String(), want)
	}
}
