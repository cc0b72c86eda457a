package kube

import (
	"os"
	"path/filepath"
	"testing"
)

// TestProcReaderRefusesForgedV1Line: on a legacy host, and on a hybrid
// one (the forged line before the real "0::"), a line of a hierarchy the
// exporter's own file does not list (99:fake), forged by a cgroup name
// with a line break in it, is refused. Before, it was believed: its pod
// path was ranked first, and rule 1 gave the pod by UID on any GPU.
func TestProcReaderRefusesForgedV1Line(t *testing.T) {
	for _, tc := range []struct{ name, self, file string }{
		{"legacy", "10:memory:/\n1:name=systemd:/system.slice/vgpu.service\n",
			"10:memory:/system.slice/tenant.service\n1:name=systemd:/system.slice/tenant.service/x\n99:fake:/kubepods/burstable/pod" + puid + "/" + cid + "\n"},
		{"hybrid", "10:memory:/\n1:name=systemd:/system.slice/vgpu.service\n0::/system.slice/vgpu.service\n",
			"10:memory:/user.slice\n1:name=systemd:/user.slice/user-1000.slice/user@1000.service/x\n99:fake:/kubepods/burstable/pod" + puid + "/" + cid + "\n0::/user.slice/user-1000.slice/user@1000.service/x\n"},
	} {
		root := t.TempDir()
		WriteProc(t, root, 42, tc.file, "", "")
		if err := os.MkdirAll(filepath.Join(root, "self"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "self", "cgroup"), []byte(tc.self), 0o644); err != nil {
			t.Fatal(err)
		}
		cg, err := NewProcReader(root).Cgroup(42)
		if err == nil {
			t.Errorf("%s: a hierarchy (99) neither PID 1 nor the exporter lists, taken: %+v -> %+v", tc.name, cg, ParseCgroupPath(cg.Path))
		}
	}
}
