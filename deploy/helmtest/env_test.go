package helmtest

import "testing"

// TestExtraEnvNotTheChartsOwn: an extraEnv variable of a name the chart
// sets itself in that pod, or a name given twice, fails the rendering
// naming the entry; before, the chart rendered both, and the API server
// took the pod with a warning only, the last one replacing the first
// (NODE_NAME replaced, the exporter reading another node's pods).
func TestExtraEnvNotTheChartsOwn(t *testing.T) {
	env := func(names ...string) []any {
		var l []any
		for _, n := range names {
			l = append(l, map[string]any{"name": n, "value": "x"})
		}
		return l
	}
	kubelet := map[string]any{"podMetadata": map[string]any{"enabled": true, "source": "kubelet"}}
	mps := map[string]any{"mode": "enforce", "mps": map[string]any{"enabled": true}}
	checkCases(t, []valuesCase{
		{map[string]any{"extraEnv": env("GOMAXPROCS", "NODE_NAME")},
			"the release: extraEnv[1].name=NODE_NAME: the chart sets this variable itself (NODE_NAME here)"},
		{map[string]any{"extraEnv": env("NODE_IP"), "kubernetes": kubelet}, "the release: extraEnv[0].name=NODE_IP: the chart sets this variable itself (NODE_NAME, NODE_IP here)"},
		{map[string]any{"extraEnv": env("NVIDIA_DRIVER_CAPABILITIES"), "nodePools": []any{
			map[string]any{"name": "a", "nodeSelector": map[string]any{"pool": "a"}},
			map[string]any{"name": "b", "nodeSelector": map[string]any{"pool": "b"}, "tuner": mps}}},
			"nodePools b: extraEnv[0].name=NVIDIA_DRIVER_CAPABILITIES: the chart sets this variable itself"},
		{map[string]any{"extraEnv": env("A", "B", "A")}, "extraEnv[2].name=A: an earlier entry has this name"},
		// Where the chart sets none of that name, it is the user's.
		{map[string]any{"extraEnv": env("NODE_IP", "NVIDIA_DRIVER_CAPABILITIES", "GOMAXPROCS")}, ""},
		{map[string]any{"extraEnv": env("node_name")}, ""},
	}, nil)
}
