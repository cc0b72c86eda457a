package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"

	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// recipeSection is the operator recipe at the top of docs/tuning.md.
const recipeSection = "## Switching it on: a recipe for one host"

// TestTuningRecipeFlags: every flag the recipe in docs/tuning.md names is
// a flag of the exporter, each given with a value parses, and the kill
// switch file step 4 creates is the one the step that starts the exporter
// names with --tuner.kill-switch-file.
func TestTuningRecipeFlags(t *testing.T) {
	steps := recipeSteps(t)
	flagName := regexp.MustCompile(`^--([a-z][a-z0-9.-]*)(=.*)?$`)
	killFiles := map[string]bool{} // --tuner.kill-switch-file values of the start
	for i, step := range steps {
		for _, span := range spans(step) {
			words := strings.Fields(span)
			if len(words) == 0 || !strings.HasPrefix(words[0], "--") {
				continue
			}
			app := kingpin.New("vgpu_exporter", "")
			app.Terminate(nil)
			cfg := addFlags(app)
			var args []string
			for _, w := range words {
				m := flagName.FindStringSubmatch(w)
				if m == nil {
					t.Errorf("step %d: %q in `%s` is not a flag", i+1, w, span)
					continue
				}
				if app.GetFlag(m[1]) == nil {
					t.Errorf("step %d: --%s is not a flag of the exporter", i+1, m[1])
					continue
				}
				if m[2] != "" {
					args = append(args, w)
				}
				if m[1] == "tuner.kill-switch-file" && m[2] != "" && i == 0 {
					killFiles[strings.TrimPrefix(m[2], "=")] = true
				}
			}
			if _, err := app.Parse(args); err != nil {
				t.Errorf("step %d: `%s` does not parse: %v", i+1, span, err)
			} else if _, err := cfg.Tuner.gpuModes(); err != nil {
				t.Errorf("step %d: `%s`: %v", i+1, span, err)
			} else if err := cfg.validate(); err != nil {
				t.Errorf("step %d: `%s`: %v", i+1, span, err)
			}
		}
	}
	// Step 4 stops the tuner by creating the file the start named.
	touched := regexp.MustCompile(`^touch (\S+)$`)
	var stops []string
	for _, span := range spans(steps[3]) {
		if m := touched.FindStringSubmatch(span); m != nil {
			stops = append(stops, m[1])
			if !killFiles[m[1]] {
				t.Errorf("step 4 creates %s, but step 1 starts the exporter with --tuner.kill-switch-file %v", m[1], killFiles)
			}
		}
	}
	if len(stops) == 0 {
		t.Errorf("step 4 creates no kill switch file (`touch FILE`)")
	}
}

// recipeSteps returns the steps of the recipe in docs/tuning.md.
func recipeSteps(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/tuning.md")
	if err != nil {
		t.Fatal(err)
	}
	_, recipe, ok := strings.Cut(string(doc), recipeSection+"\n")
	if !ok {
		t.Fatalf("docs/tuning.md has no %q", recipeSection)
	}
	recipe, _, _ = strings.Cut(recipe, "\n## ")
	steps := regexp.MustCompile(`(?m)^\d+\. `).Split(recipe, -1)[1:]
	if len(steps) < 4 {
		t.Fatalf("the recipe has %d steps, want at least 4", len(steps))
	}
	return steps
}

// spans returns the code spans of s, with the line breaks inside them as
// spaces.
func spans(s string) []string {
	var out []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(s, -1) {
		out = append(out, strings.Join(strings.Fields(m[1]), " "))
	}
	return out
}

// TestTuningRecipeUnitDropIns: the recipe works as written with the
// shipped systemd unit: the step that starts the tuner names the drop-in
// whose StateDirectory= holds its journal, the first step that enforces
// names the one whose RuntimeDirectory= is the node lock's directory (the
// start in enforce exits without it), and no path of the recipe is in a
// directory spelt like the lock's but for '-' and '_' (one beside the
// other under /run). Before, the recipe enforced without the drop-in and
// put the kill switch in /run/vgpu_exporter beside the lock's
// /run/vgpu-exporter.
func TestTuningRecipeUnitDropIns(t *testing.T) {
	steps := recipeSteps(t)
	const dropIns = "../../deploy/systemd/vgpu_exporter.service.d"
	files, err := os.ReadDir(dropIns)
	if err != nil {
		t.Fatal(err)
	}
	directive := map[string]string{} // "StateDirectory=x": its drop-in
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dropIns, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "StateDirectory=") || strings.HasPrefix(l, "RuntimeDirectory=") {
				directive[l] = f.Name()
			}
		}
	}
	lockDir := filepath.Dir(tuner.DefaultNodeLock)
	named := func(upTo int, line string) {
		t.Helper()
		f := directive[line]
		if f == "" {
			t.Errorf("no drop-in of deploy/systemd has %s", line)
			return
		}
		for _, s := range steps[:upTo+1] {
			if slices.Contains(spans(s), f) {
				return
			}
		}
		t.Errorf("step %d: the recipe does not name the drop-in %s (%s) by then", upTo+1, f, line)
	}
	enforced := false
	for i, step := range steps {
		for _, span := range spans(step) {
			for _, w := range strings.Fields(span) {
				if j, ok := strings.CutPrefix(w, "--tuner.journal="); ok && strings.HasPrefix(j, "/var/lib/") {
					named(i, "StateDirectory="+strings.Split(strings.TrimPrefix(j, "/var/lib/"), "/")[0])
				}
				if !enforced && (w == "--tuner.mode=enforce" || strings.HasPrefix(w, "--tuner.gpu-mode=") && strings.HasSuffix(w, "=enforce")) {
					enforced = true
					named(i, "RuntimeDirectory="+strings.TrimPrefix(lockDir, "/run/"))
				}
				for p := w; strings.HasPrefix(p, "/") && p != "/"; p = filepath.Dir(p) {
					if p != lockDir && strings.ReplaceAll(p, "_", "-") == lockDir {
						t.Errorf("step %d: %s is spelt like the node lock's directory %s but for '_'", i+1, p, lockDir)
					}
				}
			}
		}
	}
	if !enforced {
		t.Error("no step of the recipe enforces")
	}
}
