package helmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/deploy/internal/repo"
)

// TestAutotuneParams: tuner.autotuneParams become --tuner.autotune-param
// flags, by name, a pool's keys replacing the release's one by one; none
// with the tuner off; the schema refuses a name the exporter does not
// have, a negative number, and for a duration anything but a positive
// one; it takes every parameter of the exporter (--help) with a value of
// its kind (docs/tuning-parameters.md's defaults).
func TestAutotuneParams(t *testing.T) {
	c := loadChart(t)
	pools := []any{
		map[string]any{"name": "a", "nodeSelector": map[string]any{"pool": "a"}},
		map[string]any{"name": "b", "nodeSelector": map[string]any{"pool": "b"},
			"tuner": map[string]any{"autotuneParams": map[string]any{"pause_gain": 0.3}}},
	}
	for _, tc := range []struct {
		name string
		vals map[string]any
		want map[string][]string // DaemonSet -> its --tuner.autotune-param flags
	}{
		{"none", map[string]any{"tuner": map[string]any{"mode": "recommend"}},
			map[string][]string{"vgpu-exporter": nil}},
		{"numbers and a duration, by name", map[string]any{"tuner": map[string]any{"mode": "recommend",
			"autotuneParams": map[string]any{"pause_step_max": 0.5, "pause_gain": 0.15, "min_requests": 20, "slack_dwell": "3m"}}},
			map[string][]string{"vgpu-exporter": {"--tuner.autotune-param=min_requests=20", "--tuner.autotune-param=pause_gain=0.15",
				"--tuner.autotune-param=pause_step_max=0.5", "--tuner.autotune-param=slack_dwell=3m"}}},
		{"a pool's key replaces the release's", map[string]any{"tuner": map[string]any{"mode": "recommend",
			"autotuneParams": map[string]any{"pause_step_max": 0.5, "pause_gain": 0.15}}, "nodePools": pools},
			map[string][]string{
				"vgpu-exporter-a": {"--tuner.autotune-param=pause_gain=0.15", "--tuner.autotune-param=pause_step_max=0.5"},
				"vgpu-exporter-b": {"--tuner.autotune-param=pause_gain=0.3", "--tuner.autotune-param=pause_step_max=0.5"},
			}},
		{"tuner off", map[string]any{"tuner": map[string]any{"autotuneParams": map[string]any{"pause_gain": 0.15}}},
			map[string][]string{"vgpu-exporter": nil}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPoolFlags(t, c, tc.vals, "--tuner.autotune-param=", tc.want) })
	}
	for _, bad := range []map[string]any{
		{"Pause-Gain": 0.1},
		{"pause_gain": map[string]any{"x": 1}},
		{"pause_gain": []any{0.1}},
		{"pause_gain": true},
		{"pause_gian": 0.1}, // a typo: the exporter would not start
		{"pause_gain": -0.1},
		{"pause_gain": "30s"},
		{"slack_dwell": 30},
		{"slack_dwell": "0s"},
		{"slack_dwell": ""},
	} {
		_, err := render(c, map[string]any{"tuner": map[string]any{"mode": "recommend", "autotuneParams": bad}})
		if err == nil || !strings.Contains(err.Error(), "autotuneParams") {
			t.Errorf("autotuneParams %v: error %v, want the schema's", bad, err)
		}
	}
}

// autotuneParamNames are the names the exporter's --help lists.
var autotuneParamNames = regexp.MustCompile(`over its\s+defaults:\s+([a-z_,\s]+?)\s+\(docs/tuning-parameters\.md\)`)

// TestAutotuneParamsSchema: the schema names the parameters --help names,
// and takes each with a value of its kind (a duration where docs/tuning-parameters.md's default is one, a
// number otherwise), and refused with one of the other kind.
func TestAutotuneParamsSchema(t *testing.T) {
	c := loadChart(t)
	out, err := exec.Command(repo.Exporter(t), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	m := autotuneParamNames.FindSubmatch(out)
	if m == nil {
		t.Fatalf("--help lists no autotune parameters:\n%s", out)
	}
	doc, err := os.ReadFile(filepath.Join(repo.Root(), "docs", "tuning-parameters.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := strings.Split(strings.Join(strings.Fields(string(m[1])), ""), ",")
	// The schema names these, no other.
	var inSchema []string
	for p := range schemaNode(t, "definitions", "tuner", "properties", "autotuneParams", "patternProperties").(map[string]any) {
		inSchema = append(inSchema, strings.Split(strings.TrimSuffix(strings.TrimPrefix(p, "^("), ")$"), "|")...)
	}
	slices.Sort(inSchema)
	if !slices.Equal(inSchema, names) {
		t.Errorf("the schema's autotuneParams names %q, the exporter's %q", inSchema, names)
	}
	for _, name := range names {
		// The table row naming it, `a`, `b` (...) | their defaults | ...
		row := regexp.MustCompile("(?m)^\\| ([^|]*`" + name + "`[^|]*)\\| ([^|]*)\\|").FindStringSubmatch(string(doc))
		if row == nil {
			t.Errorf("%s: no row of docs/tuning-parameters.md names it", name)
			continue
		}
		var i int
		for j, n := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(row[1], -1) {
			if n[1] == name {
				i = j
			}
		}
		defaults := strings.Split(row[2], ",")
		duration := i < len(defaults) && strings.ContainsAny(strings.TrimSpace(defaults[i]), "smh")
		good, bad := any(0.5), any("30s")
		if duration {
			good, bad = bad, good
		}
		if _, err := render(c, map[string]any{"tuner": map[string]any{"mode": "recommend", "autotuneParams": map[string]any{name: good}}}); err != nil {
			t.Errorf("%s: %v: %v", name, good, err)
		}
		if _, err := render(c, map[string]any{"tuner": map[string]any{"mode": "recommend", "autotuneParams": map[string]any{name: bad}}}); err == nil {
			t.Errorf("%s (a duration %v): %v accepted", name, duration, bad)
		}
	}
}
