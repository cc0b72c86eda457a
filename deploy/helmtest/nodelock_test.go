package helmtest

import (
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vgpu-exporter/vgpu_exporter/deploy/internal/repo"
)

// nodeLockOf is the pod's node lock: the hostPath of its tuner-node-lock
// volume, where it is mounted, and its --tuner.node-lock flags.
func nodeLockOf(pod corev1.PodSpec) (hostPath, mount string, flags []string) {
	for _, v := range pod.Volumes {
		if v.Name == "tuner-node-lock" && v.HostPath != nil {
			hostPath = v.HostPath.Path
			if v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate {
				hostPath += " (not DirectoryOrCreate)"
			}
		}
	}
	for _, m := range pod.Containers[0].VolumeMounts {
		if m.Name == "tuner-node-lock" && !m.ReadOnly {
			mount = m.MountPath
		}
	}
	return hostPath, mount, argsWithPrefix(pod.Containers[0].Args, "--tuner.node-lock")
}

// TestNodeLockShared: in enforce every release's pod locks the same file
// of the node, the one the systemd unit's tuner locks (the exporter's
// default), through a hostPath mounted where the flag names it; so a
// second tuner in enforce on a node, whatever its journal's directory,
// does not start. A pod that does not act (recommend, the simulator) mounts
// none. Before, two releases with different tuner.journal.hostPaths both
// enforced on one node's GPUs.
func TestNodeLockShared(t *testing.T) {
	def := repo.DefaultNodeLock(t)
	dir, file := filepath.Dir(def), filepath.Base(def)
	for _, r := range []release{{"vgpu-exporter", "monitoring"}, {"gpu-team-b", "team-b"}, {strings.Repeat("r", 53), strings.Repeat("n", 63)}} {
		for _, vals := range []map[string]any{
			{"tuner": map[string]any{"mode": "enforce"}},
			{"tuner": map[string]any{"mode": "enforce", "journal": map[string]any{"hostPath": "/var/lib/" + r.name}}},
			{"tuner": map[string]any{"mode": "recommend", "gpuModes": []any{"0=enforce"}}},
		} {
			pod := renderAs(t, vals, r).daemonSets[0].Spec.Template.Spec
			host, mount, flags := nodeLockOf(pod)
			if host != "/run/vgpu-exporter" || mount != dir || len(flags) != 1 || flags[0] != "--tuner.node-lock="+dir+"/"+file {
				t.Errorf("release %s, %v: node lock hostPath %q mounted at %q, flags %q; want /run/vgpu-exporter at %s, --tuner.node-lock=%s", r.name, vals, host, mount, flags, dir, def)
			}
		}
	}
	for _, vals := range []map[string]any{
		{"tuner": map[string]any{"mode": "recommend"}},
		{"tuner": map[string]any{"mode": "off"}},
		{"backend": "sim", "tuner": map[string]any{"mode": "enforce"}},
	} {
		pod := mustRender(t, loadChart(t), vals).daemonSets[0].Spec.Template.Spec
		if host, mount, flags := nodeLockOf(pod); host != "" || mount != "" || len(flags) > 0 {
			t.Errorf("%v: node lock %q at %q, flags %q; want none (nothing acts on the node's GPUs)", vals, host, mount, flags)
		}
	}
}

// TestNodeLockRefusedValues: a node lock the pod could not share with the
// other installs (an extraArgs flag), a system directory of the node, or
// none at all fails the rendering.
func TestNodeLockRefusedValues(t *testing.T) {
	checkCases(t, []valuesCase{
		{map[string]any{"tuner": map[string]any{"mode": "enforce"}, "extraArgs": []any{"--tuner.node-lock=/tmp/lock"}}, "set tuner.nodeLock.hostPath instead"},
		{map[string]any{"tuner": map[string]any{"mode": "enforce", "nodeLock": map[string]any{"hostPath": "/run"}}}, "tuner.nodeLock.hostPath=/run: the pod writes this directory"},
		{map[string]any{"tuner": map[string]any{"mode": "enforce", "nodeLock": map[string]any{"hostPath": ""}}}, "/tuner/nodeLock/hostPath"},
	}, nil)
}
