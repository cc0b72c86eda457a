package tenant

import (
	"fmt"
	"strings"
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
			budget := maxOverlapSteps
			if got := covers(&a, &b, &budget); got != tc.want {
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

// TestOverlapCheckBounded: matching a glob against another tenant's literal
// value can cost the product of their lengths (a 60 KB file of two
// selectors took 3 s, a 1 MB one would take half an hour); past
// maxOverlapSteps the file is rejected, naming the selector, while a large
// file of ordinary selectors is checked in full.
func TestOverlapCheckBounded(t *testing.T) {
	const n = 1 << 14
	long := strings.Repeat("a", n)
	twoTenants := func(glob, literal string) string {
		return fmt.Sprintf("tenants:\n  - {name: a, selectors: [{executable: %q}]}\n  - {name: b, selectors: [{executable: %q}]}\n", glob, literal)
	}
	// thousands of globs against the names of the other tenants (each
	// match scanned the whole name: 3000 of each used the whole budget)
	globsAndNames := func(key, glob, name string) string {
		var b strings.Builder
		b.WriteString("tenants:\n")
		for i := range 1000 {
			fmt.Fprintf(&b, "  - name: t%d\n    selectors:\n", i)
			for j := range 6 {
				if i%2 == 0 {
					fmt.Fprintf(&b, "      - {%s: \""+glob+"\"}\n", key, i, j)
				} else {
					fmt.Fprintf(&b, "      - {%s: "+name+"}\n", key, i, j)
				}
			}
		}
		return b.String()
	}
	var many strings.Builder
	many.WriteString("tenants:\n")
	for i := range 300 {
		fmt.Fprintf(&many, "  - {name: t%d, selectors: [{executable: \"app%d-*\"}, {executable: svc%d}, {cgroup: \"/kubepods.slice/*pod%d_*\"}]}\n", i, i, i, i)
	}
	for _, tc := range []struct {
		name, in, want string // want: "" for accepted
	}{
		{"long glob against a long literal", twoTenants("*"+long+"?b*", long+long), "t.yaml:3: the globs and names of the selectors cost too much to check for overlaps"},
		{"long glob with a class", twoTenants("*"+long+"[b]", long+long), "t.yaml:3: the globs and names of the selectors cost too much to check for overlaps"},
		{"short glob against a long literal", twoTenants("*b", long+long), ""},
		{"many ordinary selectors", many.String(), ""},
		{"many leading-star globs against names", globsAndNames("executable", "*-w%d-%d", "python3-svc-%d-%d-worker"), ""},
		{"many cgroup globs against paths", globsAndNames("cgroup", "/kubepods.slice/*pod%d_%d*", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%d_%d.slice/cri-containerd-abcdef.scope"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("t.yaml", []byte(tc.in))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && err == nil:
				t.Fatal("accepted")
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error does not say %q:\n%v", tc.want, err)
			}
		})
	}
}
