package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run that fails before it starts (a misspelt scenario, a bad tenants
// file, a policy it refuses) leaves none of the directories --out named
// behind, and one that was there already stays; a run that succeeds
// makes them.
func TestOutNotLeftByFailedRun(t *testing.T) {
	nn := "../../scenarios/noisy-neighbour.yaml"
	for _, c := range []struct {
		name string
		args []string
	}{
		{"misspelt scenario", []string{"run", "--scenario", "noisy-neighbor"}},
		{"missing tenants file", []string{"run", "--scenario", nn, "--tenants", "/nonexistent/t.yaml"}},
		{"seeds of a misspelt scenario", []string{"run", "--scenario", "noisy-neighbor", "--seeds", "2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			kept := filepath.Join(base, "kept")
			if err := os.Mkdir(kept, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, out := range []string{filepath.Join(base, "a", "b", "c"), filepath.Join(kept, "d")} {
				if code, _, stderr := vgpusim(t, false, append(c.args, "--out", out)...); code != 1 {
					t.Fatalf("exit %d, want 1: %s", code, stderr)
				}
			}
			ents, _ := os.ReadDir(base)
			if len(ents) != 1 || ents[0].Name() != "kept" {
				t.Errorf("%s holds %v, want only kept", base, ents)
			}
			if ents, err := os.ReadDir(kept); err != nil || len(ents) != 0 {
				t.Errorf("kept: %v %v, want it there and empty", ents, err)
			}
		})
	}
	out := filepath.Join(t.TempDir(), "a", "b")
	if code, _, stderr := vgpusim(t, false, "run", "--scenario", nn, "--duration", "2s", "--out", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "summary.txt")); err != nil {
		t.Error(err)
	}
}

// failWriter fails every write, as standard output on a full disk does.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// The help and the version that cannot be written to standard output end
// with the error and exit status 1 (--help panicked, --version passed
// with exit status 0), as a summary that cannot be written does.
func TestUsageNotWritten(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help", "run"}, {"run", "--help"}, {"--version"}, {"list"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(context.Background(), args, failWriter{}, &stderr, false)
			if code != 1 || !strings.HasPrefix(stderr.String(), "vgpusim: error: ") || !strings.Contains(stderr.String(), "no space left on device") {
				t.Errorf("exit %d, stderr %q; want 1 and the write's error", code, stderr.String())
			}
		})
	}
}

// A run or a table that an interrupt (the context's end) stops says it
// was interrupted, not only the "context canceled" of the step it stopped
// (which read as the policy's or the sampler's failure).
func TestInterruptedSaysSo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{
		{"run", "--scenario", "noisy-neighbour", "--duration", "5s"},
		{"run", "--scenario", "noisy-neighbour", "--duration", "5s", "--seeds", "2"},
		{"tables", "--scenario", "noisy-neighbour", "--duration", "5s", "--seeds", "1"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(ctx, args, &stdout, &stderr, false)
			if code != 1 || !strings.HasPrefix(stderr.String(), "vgpusim: error: interrupted: ") {
				t.Errorf("exit %d, stderr %q; want 1 and vgpusim: error: interrupted: ...", code, stderr.String())
			}
		})
	}
}

// The summary's settings line names an --autotune.param as the policy
// reads it, the spaces around its name and value trimmed (the text as
// given, spaces and all, went into the line and series.json).
func TestSettingsLineTrimsParam(t *testing.T) {
	code, stdout, stderr := vgpusim(t, false, "run", "--scenario", "noisy-neighbour", "--policy", "autotune", "--duration", "2s", "--autotune.param", " pause_max = 0.5 ")
	if code != 0 || !strings.Contains(stdout, "settings: autotune.param pause_max=0.5\n") {
		t.Errorf("exit %d %s\n%s, want settings: autotune.param pause_max=0.5", code, stderr, stdout)
	}
}

// A scenario of GPUs alone, no tenants, runs with --out: its files but the
// tenants' plots, which have nothing to draw (the run failed on
// latency.png, "no steps recorded", with half its files written).
func TestOutNoTenants(t *testing.T) {
	dir := t.TempDir()
	scenario := filepath.Join(dir, "idle.yaml")
	if err := os.WriteFile(scenario, []byte("name: idle\ngpus:\n  - {model: H100-SXM5-80GB}\ntenants: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	code, stdout, stderr := vgpusim(t, false, "run", "--scenario", scenario, "--duration", "3s", "--out", out)
	if code != 0 || !strings.Contains(stdout, "wrote 5 files into "+out) {
		t.Fatalf("exit %d %s\n%s, want 5 files written", code, stderr, stdout)
	}
	for _, f := range []string{"summary.txt", "tenants.csv", "gpus.csv", "decisions.csv", "gpus.png"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
}
