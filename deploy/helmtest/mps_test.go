package helmtest

import (
	"slices"
	"testing"
)

// devicePluginPipe is the pipe directory of the MPS control daemon the
// NVIDIA device plugin runs for its default resource: under its MPS root
// (/run/nvidia/mps on the node), one directory per resource name, pipe/
// in it. The MPS root itself holds no control pipe.
const devicePluginPipe = "/run/nvidia/mps/nvidia.com/gpu/pipe"

// TestMPSPipeDirectory: by default an active tuner's MPS actuator talks to
// the device plugin's daemon, the node's pipe directory mounted at the
// same path.
func TestMPSPipeDirectory(t *testing.T) {
	c := loadChart(t)
	for _, mode := range []string{"recommend", "enforce"} {
		ds := mustRender(t, c, map[string]any{"tuner": map[string]any{"mode": mode}}).daemonSets[0]
		pod := ds.Spec.Template.Spec
		exp := container(t, pod.Containers, "exporter")
		if !slices.Contains(exp.Args, "--mps.pipe-directory="+devicePluginPipe) {
			t.Errorf("%s: args %q, want --mps.pipe-directory=%s", mode, exp.Args, devicePluginPipe)
		}
		var mounted bool
		for _, vm := range exp.VolumeMounts {
			if vm.Name != "mps-pipe" {
				continue
			}
			for _, v := range pod.Volumes {
				if v.Name == vm.Name && v.HostPath != nil && v.HostPath.Path == devicePluginPipe && vm.MountPath == devicePluginPipe && !vm.ReadOnly {
					mounted = true
				}
			}
		}
		if !mounted {
			t.Errorf("%s: the node's %s is not mounted writable at the same path: %+v", mode, devicePluginPipe, exp.VolumeMounts)
		}
	}
}
