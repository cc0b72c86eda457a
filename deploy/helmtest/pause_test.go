package helmtest

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
)

// Pausing batch tenants (tuner.pause): the knob's flags in any active
// mode; the node's cgroup hierarchy mounted read-write and
// --pause.supervise (the first process runs the watchdog, which outlives
// the exporter) only in enforce, and CAP_KILL (to stop a process group of
// the host or another pod) only in enforce with hostPID: in its own PID
// namespace the exporter sees no such process, and signals its own
// children as their uid without it; nothing with the tuner off or the
// pause disabled.
func TestPause(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		name    string
		tuner   map[string]any
		hostPID bool
		knob    bool
		mount   bool // the node's cgroups mounted, and --pause.supervise
		caps    []corev1.Capability
		cgroups string // --pause.cgroup-root's value; "-" for no flag
	}{
		{"tuner off", map[string]any{"mode": "off", "pause": map[string]any{"enabled": true}}, true, false, false, []corev1.Capability{"SYS_ADMIN"}, "-"},
		{"pause disabled", map[string]any{"mode": "enforce"}, true, false, false, []corev1.Capability{"SYS_ADMIN"}, ""},
		{"recommend", map[string]any{"mode": "recommend", "pause": map[string]any{"enabled": true}}, true, true, false, []corev1.Capability{"SYS_ADMIN"}, ""},
		{"enforce", map[string]any{"mode": "enforce", "pause": map[string]any{"enabled": true, "period": "250ms", "max": "200ms"}}, true, true, true, []corev1.Capability{"SYS_ADMIN", "KILL", "SYS_PTRACE"}, "/host/sys/fs/cgroup"},
		{"enforce on one GPU", map[string]any{"mode": "recommend", "gpuModes": []any{"0=enforce"}, "pause": map[string]any{"enabled": true}}, true, true, true, []corev1.Capability{"SYS_ADMIN", "KILL", "SYS_PTRACE"}, "/host/sys/fs/cgroup"},
		{"enforce without hostPID", map[string]any{"mode": "enforce", "pause": map[string]any{"enabled": true}}, false, true, true, []corev1.Capability{"SYS_ADMIN"}, "/host/sys/fs/cgroup"},
		{"enforce on one GPU without hostPID", map[string]any{"mode": "recommend", "gpuModes": []any{"0=enforce"}, "pause": map[string]any{"enabled": true}}, false, true, true, []corev1.Capability{"SYS_ADMIN"}, "/host/sys/fs/cgroup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := map[string]any{"tuner": tc.tuner, "hostPID": tc.hostPID}
			m := mustRender(t, c, vals)
			if len(m.daemonSets) != 1 {
				t.Fatalf("%d DaemonSets", len(m.daemonSets))
			}
			pod := m.daemonSets[0].Spec.Template.Spec
			exp := container(t, pod.Containers, "exporter")
			args := strings.Join(exp.Args, " ")
			if got := strings.Contains(args, "--tuner.enable-knob=pause_duty"); got != tc.knob {
				t.Errorf("args %q: the pause knob enabled %v, want %v", args, got, tc.knob)
			}
			if tc.name == "enforce" && !strings.Contains(args, "--pause.period=250ms --pause.max=200ms") {
				t.Errorf("args %q: want the period and the max pause of the values", args)
			}
			root := "-"
			for _, a := range exp.Args {
				if v, ok := strings.CutPrefix(a, "--pause.cgroup-root="); ok {
					root = v
				}
			}
			if got := slices.Contains(exp.Args, "--pause.supervise"); got != tc.mount {
				t.Errorf("args %q: --pause.supervise %v, want %v (only where the pod pauses)", args, got, tc.mount)
			}
			if root != tc.cgroups {
				t.Errorf("--pause.cgroup-root %q, want %q", root, tc.cgroups)
			}
			var add []corev1.Capability
			if exp.SecurityContext != nil && exp.SecurityContext.Capabilities != nil {
				add = exp.SecurityContext.Capabilities.Add
			}
			if !slices.Equal(add, tc.caps) {
				t.Errorf("capabilities added %v, want %v", add, tc.caps)
			}
			var mounted, volume bool
			for _, vm := range exp.VolumeMounts {
				if vm.MountPath == "/host/sys/fs/cgroup" {
					mounted = !vm.ReadOnly && vm.Name == "cgroup"
				}
			}
			for _, v := range pod.Volumes {
				if v.Name == "cgroup" {
					volume = v.HostPath != nil && v.HostPath.Path == "/sys/fs/cgroup"
				}
			}
			if mounted != tc.mount || volume != tc.mount {
				t.Errorf("the node's /sys/fs/cgroup mounted read-write %v, its volume %v, want %v", mounted, volume, tc.mount)
			}
		})
	}

	// A node pool turns it on for itself only.
	vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir(), "examples", "tuner-pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vals["nodePools"].([]any)[0].(map[string]any)["tuner"].(map[string]any)["pause"] = map[string]any{"enabled": true}
	vals["hostPID"] = true
	for _, ds := range mustRender(t, c, vals).daemonSets {
		exp := container(t, ds.Spec.Template.Spec.Containers, "exporter")
		args := strings.Join(exp.Args, " ")
		want := ds.Name == "vgpu-exporter-inference"
		if got := strings.Contains(args, "--pause.cgroup-root=/host/sys/fs/cgroup"); got != want {
			t.Errorf("%s: pausing through the node's cgroups %v, want %v", ds.Name, got, want)
		}
		if got := exp.SecurityContext != nil && exp.SecurityContext.Capabilities != nil &&
			slices.Contains(exp.SecurityContext.Capabilities.Add, "KILL") && slices.Contains(exp.SecurityContext.Capabilities.Add, "SYS_PTRACE"); got != want {
			t.Errorf("%s: KILL and SYS_PTRACE added %v, want %v", ds.Name, got, want)
		}
	}
	if _, err := render(c, map[string]any{"tuner": map[string]any{"pause": map[string]any{"enabled": true, "period": "half a second"}}}); err == nil {
		t.Error("a period that is not a duration accepted")
	}
}
