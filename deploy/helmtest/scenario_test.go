package helmtest

import (
	"context"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/deploy/internal/repo"
)

// TestSimScenario: sim.scenario is taken when the exporter would start on
// it: empty (its default), a built-in scenario's name (the schema lists
// those the exporter does) or a file's path in the container; a name it
// does not have is refused by the schema.
func TestSimScenario(t *testing.T) {
	c := loadChart(t)
	// The exporter refuses an unknown name at start, listing the built-in ones.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, _ := exec.CommandContext(ctx, repo.Exporter(t), "--backend=sim", "--sim.scenario=no-such-scenario",
		"--web.listen-address="+repo.FreeAddr(t)).CombinedOutput()
	m := regexp.MustCompile(`built-in: ([a-z0-9, -]+)\)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("the exporter lists no built-in scenario:\n%s", out)
	}
	builtin := strings.Split(string(m[1]), ", ")
	// The schema names these, no other.
	var inSchema []string
	for _, v := range schemaNode(t, "properties", "sim", "properties", "scenario", "anyOf").([]any)[0].(map[string]any)["enum"].([]any) {
		inSchema = append(inSchema, v.(string))
	}
	if want := append([]string{""}, builtin...); !slices.Equal(inSchema, want) {
		t.Errorf("the schema's sim.scenario names %q, want the exporter's %q", inSchema, want)
	}
	for _, v := range append(builtin, "", "/etc/scenarios/mine.yaml", "./mine.yaml") {
		if _, err := render(c, map[string]any{"backend": "sim", "sim": map[string]any{"scenario": v}}); err != nil {
			t.Errorf("sim.scenario %q: %v", v, err)
		}
	}
	for _, v := range []string{"h200-mg", "H200-MIG", "h200-mig ", "mine.yaml"} {
		_, err := render(c, map[string]any{"backend": "sim", "sim": map[string]any{"scenario": v}})
		if err == nil || !strings.Contains(err.Error(), "scenario") {
			t.Errorf("sim.scenario %q (the exporter refuses it): error %v, want the schema's", v, err)
		}
	}
}
