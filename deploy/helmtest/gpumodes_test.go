package helmtest

import (
	"slices"
	"strings"
	"testing"
)

// TestGPUModesOncePerGPU: a GPU given two entries in tuner.gpuModes (two
// modes, or the same entry twice) fails the rendering, naming the pool
// and the entry, where the exporter would refuse --tuner.gpu-mode at
// start and every pod of the pool crash-loop. The GPU is matched as the
// exporter does, by the text before "=": an index and a UUID are two
// GPUs to it, and a pool's list replaces the release's.
func TestGPUModesOncePerGPU(t *testing.T) {
	c := loadChart(t)
	gpuModes := func(m ...any) map[string]any { return map[string]any{"gpuModes": m} }
	pool := func(tuner map[string]any) []any {
		return []any{map[string]any{"name": "a", "tuner": tuner}}
	}
	for _, tc := range []struct {
		vals map[string]any
		err  string   // a part of the error; empty: rendered
		args []string // the --tuner.gpu-mode values rendered
	}{
		{map[string]any{"tuner": gpuModes("0=enforce", "0=off")},
			`the release: tuner.gpuModes "0=off": GPU 0 is given a mode twice ("0=enforce", then "0=off")`, nil},
		{map[string]any{"tuner": gpuModes("1=recommend", "1=recommend")},
			`the release: tuner.gpuModes "1=recommend": GPU 1 is given a mode twice ("1=recommend", then "1=recommend")`, nil},
		{map[string]any{"nodePools": pool(gpuModes("GPU-8d5a=enforce", "0=off", "GPU-8d5a=recommend"))},
			`nodePools a: tuner.gpuModes "GPU-8d5a=recommend": GPU GPU-8d5a is given a mode twice`, nil},
		{map[string]any{"tuner": gpuModes("0=enforce", "1=off")}, "", []string{"0=enforce", "1=off"}},
		{map[string]any{"tuner": gpuModes("0=enforce", "GPU-8d5a=off")}, "", []string{"0=enforce", "GPU-8d5a=off"}},
		{map[string]any{"tuner": gpuModes("0=enforce"), "nodePools": pool(gpuModes("0=off"))}, "", []string{"0=off"}},
	} {
		rendered, err := render(c, tc.vals)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("values %v: error %v, want one saying %q", tc.vals, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("values %v: %v", tc.vals, err)
			continue
		}
		m, err := decode(rendered)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, a := range container(t, m.daemonSets[0].Spec.Template.Spec.Containers, "exporter").Args {
			if v, ok := strings.CutPrefix(a, "--tuner.gpu-mode="); ok {
				got = append(got, v)
			}
		}
		if !slices.Equal(got, tc.args) {
			t.Errorf("values %v: --tuner.gpu-mode %q, want %q", tc.vals, got, tc.args)
		}
	}
}
