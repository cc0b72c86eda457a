package helmtest

import (
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestLintExamples runs Helm's lint (what `helm lint --strict` runs:
// warnings fail too) on the chart with its defaults and with every values
// file of examples/.
func TestLintExamples(t *testing.T) {
	for name, vals := range examples(t) {
		t.Run(name, func(t *testing.T) {
			res := lint.AllWithKubeVersion(chartDir(), vals, namespace, nil)
			for _, msg := range res.Messages {
				if msg.Severity >= support.WarningSev {
					t.Errorf("helm lint: %v", msg)
				}
			}
		})
	}
}

// TestSimBackend: backend sim runs the simulator's scenario on any node: no
// GPU node selection, no SYS_ADMIN (even with profilingCapability), a
// read-only root with no writable /tmp (the built-in scenario is read from
// the binary), the flag given
// once, a seed as the integer the exporter parses; with the tuner, none of
// the node's MPS pipes or cgroups (only the journal's directory).
func TestSimBackend(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		name string
		vals map[string]any
		args []string // wanted among the exporter's
		sel  map[string]string
	}{
		{"defaults", map[string]any{"backend": "sim"}, []string{"--backend=sim"}, nil},
		{"scenario and seed", map[string]any{"backend": "sim", "sim": map[string]any{"scenario": "h200-mig", "seed": 7}},
			[]string{"--backend=sim", "--sim.scenario=h200-mig", "--sim.seed=7"}, nil},
		// A values file's numbers reach the chart as float64.
		{"a values file's large seed", map[string]any{"backend": "sim", "sim": map[string]any{"seed": float64(20261203)}},
			[]string{"--backend=sim", "--sim.seed=20261203"}, nil},
		{"node selector given", map[string]any{"backend": "sim", "nodeSelector": map[string]any{"pool": "cpu"}},
			[]string{"--backend=sim"}, map[string]string{"pool": "cpu"}},
		// The simulator's own actuators act: no MPS pipes, no node cgroups, no KILL.
		{"tuner in enforce with the pause", map[string]any{"backend": "sim", "tuner": map[string]any{"mode": "enforce",
			"pause": map[string]any{"enabled": true}}}, []string{"--backend=sim", "--tuner.enable-knob=pause_duty"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustRender(t, c, tc.vals)
			pod := m.daemonSets[0].Spec.Template.Spec
			exp := container(t, pod.Containers, "exporter")
			for _, a := range tc.args {
				if !slices.Contains(exp.Args, a) {
					t.Errorf("args %q lack %s", exp.Args, a)
				}
			}
			if n := strings.Count(strings.Join(exp.Args, " "), "--backend="); n != 1 {
				t.Errorf("--backend given %d times in %q", n, exp.Args)
			}
			if len(pod.NodeSelector) != len(tc.sel) || !mapsEqual(pod.NodeSelector, tc.sel) {
				t.Errorf("nodeSelector %v, want %v", pod.NodeSelector, tc.sel)
			}
			if add := exp.SecurityContext.Capabilities.Add; len(add) > 0 {
				t.Errorf("capabilities added %v; the simulator needs none", add)
			}
			for _, e := range exp.Env {
				if e.Name == "NVIDIA_DRIVER_CAPABILITIES" {
					t.Errorf("env %s=%s; the simulator needs no driver", e.Name, e.Value)
				}
			}
			var tmp bool
			for _, vm := range exp.VolumeMounts {
				tmp = tmp || vm.MountPath == "/tmp" && !vm.ReadOnly
			}
			if tmp || exp.SecurityContext.ReadOnlyRootFilesystem == nil || !*exp.SecurityContext.ReadOnlyRootFilesystem {
				t.Errorf("mounts %+v, root filesystem read-only %v; want a read-only root and no writable /tmp", exp.VolumeMounts, exp.SecurityContext.ReadOnlyRootFilesystem)
			}
			for _, v := range pod.Volumes {
				if v.HostPath != nil && !slices.Contains([]string{"/proc", "/var/lib/kubelet/pod-resources", "/var/lib/vgpu-exporter"}, v.HostPath.Path) {
					t.Errorf("volume %s from the node's %s: the simulator needs none", v.Name, v.HostPath.Path)
				}
			}
		})
	}
	// nvml, the default: the GPU nodes, and no /tmp volume.
	pod := mustRender(t, c, nil).daemonSets[0].Spec.Template.Spec
	if pod.NodeSelector["nvidia.com/gpu.present"] != "true" {
		t.Errorf("backend nvml: nodeSelector %v, want the GPU nodes", pod.NodeSelector)
	}
}

func mapsEqual(a, b map[string]string) bool {
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return len(a) == len(b)
}

// TestMonitoringNeedsItsAPI: the ServiceMonitor and the PrometheusRule are
// rendered only where the cluster serves monitoring.coreos.com/v1; without
// it the install notes say what was left out and which value silences it.
func TestMonitoringNeedsItsAPI(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		monitoring bool
		vals       map[string]any
		objects    int // ServiceMonitors and PrometheusRules
		notes      []string
	}{
		{true, nil, 2, nil},
		{false, nil, 0, []string{"No ServiceMonitor was created", "serviceMonitor.enabled=false", "No PrometheusRule was created", "prometheusRule.enabled=false"}},
		{false, map[string]any{"serviceMonitor": map[string]any{"enabled": false}, "prometheusRule": map[string]any{"enabled": false}}, 0, nil},
		{true, map[string]any{"serviceMonitor": map[string]any{"enabled": false}}, 1, nil},
	} {
		rendered, err := renderOn(c, tc.vals, capabilities(tc.monitoring))
		if err != nil {
			t.Fatal(err)
		}
		m, err := decode(rendered)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(m.serviceMonitors) + len(m.rules); got != tc.objects {
			t.Errorf("monitoring API %v, values %v: %d ServiceMonitors and PrometheusRules, want %d", tc.monitoring, tc.vals, got, tc.objects)
		}
		notes := rendered["vgpu-exporter/templates/NOTES.txt"]
		for _, want := range tc.notes {
			if !strings.Contains(notes, want) {
				t.Errorf("monitoring API %v, values %v: notes lack %q:\n%s", tc.monitoring, tc.vals, want, notes)
			}
		}
		if len(tc.notes) == 0 && strings.Contains(notes, "was created") {
			t.Errorf("monitoring API %v, values %v: notes say something was left out:\n%s", tc.monitoring, tc.vals, notes)
		}
	}
}
