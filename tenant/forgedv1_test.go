package tenant

import "testing"

// TestForgedV1LineOnLegacyHost: TestForgedUnifiedLineOnLegacyHost's
// tenant (a delegated name=systemd subtree, a kernel before 4.13) forges
// not "0::" but a line of a v1 hierarchy the host lacks: it names nested
// cgroups "x\n99:fake:" / kubepods / burstable / pod<uid> / <id>. No ID or
// controller is listed twice and no line follows a unified one, but the
// file's hierarchies are not those of the exporter's own file: it is
// refused, and the process gets no pod. Before, the forged pod path,
// ranked first, gave it llm/chat.
func TestForgedV1LineOnLegacyHost(t *testing.T) {
	legacy := "11:memory:/system.slice/tenant.service\n2:cpu,cpuacct:/system.slice/tenant.service\n1:name=systemd:/system.slice/tenant.service"
	files := map[string]string{
		"self": "11:memory:/system.slice/vgpu.service\n2:cpu,cpuacct:/system.slice/vgpu.service\n1:name=systemd:/system.slice/vgpu.service\n",
		"30":   legacy + "/x\n0::/kubepods/burstable/pod" + podUID("chat") + "/0123456789abcdef\n", // a forged unified line
		"32":   legacy + "/x\n99:fake:/kubepods/burstable/pod" + podUID("chat") + "/0123456789abcdef\n",
	}
	tenants, work := onChatsGPU(t, procRootOf(t, files), 30, 32)
	for _, pid := range []uint32{30, 32} {
		if tenants[pid] != Unassigned {
			t.Errorf("pid %d (a forged pod's path) went to tenant %q, want %s; workload %s", pid, tenants[pid], Unassigned, work[pid])
		}
	}
}
