package helmtest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestNullValueNamed: a value set to null (Helm's way to drop a default,
// `--set resources=null`) that the templates need is refused by the
// schema naming it, for every key of values.yaml, with the tuner off and
// in enforce; before, most failed with the template engine's "map has no
// entry for key" at a template line.
func TestNullValueNamed(t *testing.T) {
	c := loadChart(t)
	b, err := os.ReadFile(filepath.Join("..", "helm", "vgpu-exporter", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var defaults map[string]any
	if err := yaml.Unmarshal(b, &defaults); err != nil {
		t.Fatal(err)
	}
	keys := keyPaths(nil, defaults)
	if len(keys) < 100 {
		t.Fatalf("values.yaml has %d keys: read wrong", len(keys))
	}
	for _, p := range keys {
		for _, mode := range []string{"off", "enforce"} {
			vals := map[string]any{"tuner": map[string]any{"mode": mode}}
			if mode == "enforce" {
				vals["securityContext"] = map[string]any{"runAsUser": 0}
				vals["tuner"].(map[string]any)["journal"] = map[string]any{"hostPath": "/var/lib/vgpu_exporter"}
			}
			setNull(vals, p)
			_, err := render(c, vals)
			if err == nil {
				continue
			}
			msg := err.Error()
			if strings.Contains(msg, "map has no entry") || strings.Contains(msg, "nil pointer") ||
				strings.Contains(msg, "schema") && !strings.Contains(msg, "missing property '"+p[len(p)-1]+"'") {
				t.Errorf("%s: null with the tuner %s: %v", strings.Join(p, "."), mode, err)
			}
		}
	}
}

// keyPaths lists every key of m, nested maps' keys as paths.
func keyPaths(prefix []string, m map[string]any) [][]string {
	var out [][]string
	for k, v := range m {
		p := append(slices.Clone(prefix), k)
		out = append(out, p)
		if sub, ok := v.(map[string]any); ok {
			out = append(out, keyPaths(p, sub)...)
		}
	}
	return out
}

// setNull sets the value at path p of vals to null, making the maps on
// the way.
func setNull(vals map[string]any, p []string) {
	for _, k := range p[:len(p)-1] {
		sub, ok := vals[k].(map[string]any)
		if !ok {
			sub = map[string]any{}
			vals[k] = sub
		}
		vals = sub
	}
	vals[p[len(p)-1]] = nil
}
