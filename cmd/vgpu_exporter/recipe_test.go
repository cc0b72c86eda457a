package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

// recipeSection is the operator recipe at the top of docs/tuning.md.
const recipeSection = "## Switching it on: a recipe for one host"

// TestTuningRecipeFlags: every flag the recipe in docs/tuning.md names is
// a flag of the exporter, each given with a value parses, and the kill
// switch file step 4 creates is the one the step that starts the exporter
// names with --tuner.kill-switch-file.
func TestTuningRecipeFlags(t *testing.T) {
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
	// Code spans, with the line breaks inside them as spaces.
	spans := func(s string) []string {
		var out []string
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(s, -1) {
			out = append(out, strings.Join(strings.Fields(m[1]), " "))
		}
		return out
	}
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
