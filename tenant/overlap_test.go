package tenant

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestCovers checks the overlap rule on pairs of selectors: a covers b when
// whatever matches b matches a.
func TestCovers(t *testing.T) {
	tests := []struct {
		name, a, b string
		want       bool
	}{
		{"same executable", "{executable: vllm}", "{executable: vllm}", true},
		{"narrower b", "{executable: vllm}", "{executable: vllm, uid: 7}", true},
		{"wider b", "{executable: vllm, uid: 7}", "{executable: vllm}", false},
		{"glob covers literal", "{executable: \"py*\"}", "{executable: python3}", true},
		{"glob does not cover glob", "{executable: \"py*\"}", "{executable: \"python*\"}", false},
		{"different uid", "{uid: 1}", "{uid: 2}", false},
		{"same gpu instance", "{gpu_instance: {gpu: 0, id: 1}}", "{gpu_instance: {gpu: 0, id: 1}, uid: 3}", true},
		{"other gpu instance", "{gpu_instance: {gpu: 0, id: 1}}", "{gpu_instance: {gpu: 1, id: 1}}", false},
		{"vgpu vm glob", "{vgpu: {vm_name: \"vm-*\"}}", "{vgpu: {vm_name: vm-1, uuid: U}}", true},
		{"vgpu uuid differs", "{vgpu: {uuid: A}}", "{vgpu: {uuid: B}}", false},
		{"kubernetes labels subset", "{kubernetes: {labels: {app: chat}}}", "{kubernetes: {namespace: llm, labels: {app: chat, tier: a}}}", true},
		{"kubernetes labels differ", "{kubernetes: {labels: {app: chat}}}", "{kubernetes: {labels: {app: search}}}", false},
		{"kubernetes pod glob", "{kubernetes: {namespace: llm, pod: \"chat-*\"}}", "{kubernetes: {namespace: llm, pod: chat-0}}", true},
		{"kubernetes namespace differs", "{kubernetes: {namespace: llm, pod: \"chat-*\"}}", "{kubernetes: {namespace: web, pod: chat-0}}", false},
		{"b matches nothing: MIG and vGPU", "{uid: 1}", "{uid: 1, mig_uuid: MIG-1, vgpu: {uuid: U}}", false},
		{"cgroup literal under glob", "{cgroup: \"/kubepods.slice/*\"}", "{cgroup: /kubepods.slice/a.scope}", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := selector(t, tc.a), selector(t, tc.b)
			if got := covers(&a, &b); got != tc.want {
				t.Errorf("covers(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

func selector(t *testing.T, src string) Selector {
	t.Helper()
	var s Selector
	if err := yaml.Unmarshal([]byte(src), &s); err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return s
}
