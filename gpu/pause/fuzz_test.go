package pause

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Whatever a process's /proc/PID/cgroup says, the cgroup the pauser would
// freeze for it is a directory under the hierarchy's root, never the root
// itself, and one that has the control file.
func FuzzCgroupOfProcess(f *testing.F) {
	root := f.TempDir()
	outside := f.TempDir() // a directory with a control file, not under root
	for _, d := range []string{podPath, unitPath, vmScope, "/kubepods.slice/x.slice/kubepods-pod" + strings.Repeat("a", 8) + ".slice"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, d, "cgroup.freeze"), []byte("0"), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "cgroup.freeze"), []byte("0"), 0o644); err != nil {
		f.Fatal(err)
	}
	rel, err := filepath.Rel(root, outside)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		"0::" + podPath + "\n",
		"0::" + unitPath + "/worker\n",
		"0::" + vmScope + "/libvirt/emulator\n6:freezer:/\n",
		"0::/../../" + podPath[len("/kubepods.slice/"):] + "\n",
		"0::/../../trainer.service\n",
		// a path that climbs out of the hierarchy through a pod's, a
		// unit's and a machine's names
		"0::" + podPath + "/" + strings.Repeat("../", 12) + filepath.ToSlash(rel) + "\n",
		"0::/system.slice/" + strings.Repeat("../", 12) + filepath.ToSlash(rel) + "/x.service\n",
		"0::/machine.slice/machine-a.scope/" + strings.Repeat("../", 12) + filepath.ToSlash(rel) + "\n",
		"0::/../" + filepath.ToSlash(rel) + "\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v2, _, _ := cgroupPaths(data, nil)
		dir, ok := ownCgroup(root, v2, "cgroup.freeze")
		if !ok {
			return
		}
		if r, err := filepath.Rel(root, dir); err != nil || r == "." || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			t.Fatalf("%q: cgroup %s, not under %s", data, dir, root)
		}
	})
}
