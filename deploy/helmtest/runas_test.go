package helmtest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/deploy/internal/repo"
	corev1 "k8s.io/api/core/v1"
)

// TestRunAsRoot: the uid the exporter runs as is the container's
// runAsUser, else the pod's, else the image's (65532); these render (the
// refusals are TestRejectsBadCombinations' rows), each with the uid and
// capabilities wanted.
func TestRunAsRoot(t *testing.T) {
	c := loadChart(t)
	nonRoot := map[string]any{"profilingCapability": false, "kubernetes": map[string]any{"podResources": map[string]any{"enabled": false}}}
	with := func(extra map[string]any) map[string]any {
		v := map[string]any{}
		for k, x := range nonRoot {
			v[k] = x
		}
		for k, x := range extra {
			v[k] = x
		}
		return v
	}
	for _, tc := range []struct {
		name string
		vals map[string]any
		uid  int64 // -1: none set on the container
	}{
		{"defaults", nil, 0},
		{"the image's user", with(map[string]any{"securityContext": map[string]any{"runAsUser": nil, "runAsNonRoot": true}}), -1},
		{"the pod's user", with(map[string]any{"podSecurityContext": map[string]any{"runAsUser": 1000, "runAsNonRoot": true},
			"securityContext": map[string]any{"runAsUser": nil, "runAsNonRoot": nil}}), -1},
		{"the container's root over the pod's", map[string]any{"podSecurityContext": map[string]any{"runAsUser": 1000, "runAsNonRoot": true}}, 0},
		{"non-root without the kubelet's socket", with(map[string]any{"securityContext": map[string]any{"runAsUser": 65532, "runAsNonRoot": true}}), 65532},
		{"non-root, the tuner recommending without a journal", with(map[string]any{"securityContext": map[string]any{"runAsUser": 65532},
			"tuner": map[string]any{"mode": "recommend", "journal": map[string]any{"hostPath": ""}}}), 65532},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustRender(t, c, tc.vals)
			sc := container(t, m.daemonSets[0].Spec.Template.Spec.Containers, "exporter").SecurityContext
			uid := int64(-1)
			if sc != nil && sc.RunAsUser != nil {
				uid = *sc.RunAsUser
			}
			if uid != tc.uid {
				t.Errorf("runAsUser %d, want %d", uid, tc.uid)
			}
		})
	}
}

// TestCapabilitiesAdded: capabilities securityContext adds are kept, the
// chart's own (SYS_ADMIN, KILL, SYS_PTRACE, NET_BIND_SERVICE) added after them, each
// once.
func TestCapabilitiesAdded(t *testing.T) {
	c := loadChart(t)
	sc := func(add ...any) map[string]any {
		return map[string]any{"capabilities": map[string]any{"add": add, "drop": []any{"ALL"}}}
	}
	for _, tc := range []struct {
		name string
		vals map[string]any
		want []corev1.Capability
	}{
		{"defaults", nil, []corev1.Capability{"SYS_ADMIN"}},
		{"one of the user's", map[string]any{"securityContext": sc("SYS_PTRACE")}, []corev1.Capability{"SYS_PTRACE", "SYS_ADMIN"}},
		{"the user's only", map[string]any{"profilingCapability": false, "securityContext": sc("SYS_PTRACE")}, []corev1.Capability{"SYS_PTRACE"}},
		{"the chart's too", map[string]any{"securityContext": sc("SYS_PTRACE", "SYS_ADMIN"), "hostPID": true,
			"tuner": map[string]any{"mode": "enforce", "pause": map[string]any{"enabled": true}}}, []corev1.Capability{"SYS_PTRACE", "SYS_ADMIN", "KILL"}},
		// A port below 1024: with every capability dropped, even uid 0
		// may not bind it where unprivileged ports start at 1024.
		{"the pause's", map[string]any{"hostPID": true, "tuner": map[string]any{"mode": "enforce", "pause": map[string]any{"enabled": true}}},
			[]corev1.Capability{"SYS_ADMIN", "KILL", "SYS_PTRACE"}},
		{"a privileged port", map[string]any{"port": 443}, []corev1.Capability{"SYS_ADMIN", "NET_BIND_SERVICE"}},
		{"a privileged port, no profiling", map[string]any{"port": 80, "profilingCapability": false}, []corev1.Capability{"NET_BIND_SERVICE"}},
		{"port 1024", map[string]any{"port": 1024, "profilingCapability": false}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustRender(t, c, tc.vals)
			got := container(t, m.daemonSets[0].Spec.Template.Spec.Containers, "exporter").SecurityContext.Capabilities.Add
			if !slices.Equal(got, tc.want) {
				t.Errorf("capabilities added %v, want %v", got, tc.want)
			}
		})
	}
}

// TestImageUserTied: the uid the chart takes for the image's user, where
// no runAsUser says otherwise, is the Dockerfile's USER.
func TestImageUserTied(t *testing.T) {
	df, err := os.ReadFile(filepath.Join(repo.Root(), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var user string
	for l := range strings.SplitSeq(string(df), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "USER" {
			user, _, _ = strings.Cut(f[1], ":")
		}
	}
	tpl, err := os.ReadFile(filepath.Join(chartDir(), "templates", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\$uid := (\d+)`).FindSubmatch(tpl)
	if user == "" || m == nil {
		t.Fatalf("Dockerfile USER %q, the chart's image uid %q: one is not found", user, m)
	}
	if string(m[1]) != user {
		t.Errorf("the chart takes the image's user for uid %s, the Dockerfile's USER is %s", m[1], user)
	}
}
