package tenant

import (
	"io/fs"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// deniedProc is a procfs root whose cgroup file of some PIDs cannot be
// opened: the error the kernel gives for it, as os.Open wraps it.
type deniedProc struct {
	kube.ProcReader
	root   string
	denied map[uint32]syscall.Errno
}

func (p deniedProc) Cgroup(pid uint32) (kube.ProcCgroup, error) {
	if errno, ok := p.denied[pid]; ok {
		return kube.ProcCgroup{}, &fs.PathError{Op: "open", Path: filepath.Join(p.root, strconv.Itoa(int(pid)), "cgroup"), Err: errno}
	}
	return p.ProcReader.Cgroup(pid)
}

// TestCgroupFileDeniedToExporterKeepsDeviceRule: processes on llm/chat's
// GPU, the only pod holding it, whose /proc/PID/cgroup the exporter may
// not open. With /proc mounted hidepid=1 (noaccess) an exporter without
// CAP_SYS_PTRACE gets EPERM for every other user's process (an LSM may
// answer EACCES): that is the exporter's lack of access, which no process
// can cause, and the place is as unknown as with hidepid=2 (ENOENT): the
// device rule gives the pod. Before, each was given no pod. A path too
// long to read (ENAMETOOLONG) still gives none.
func TestCgroupFileDeniedToExporterKeepsDeviceRule(t *testing.T) {
	root := procRootOf(t, map[string]string{})
	for _, tc := range []struct {
		errno syscall.Errno
		want  string
	}{
		{syscall.EPERM, "llm"},
		{syscall.EACCES, "llm"},
		{syscall.ENAMETOOLONG, Unassigned},
	} {
		proc := deniedProc{kube.NewProcReader(root), root, map[uint32]syscall.Errno{40: tc.errno}}
		tenants, work := onChatsGPUWith(t, proc, 40)
		if tenants[40] != tc.want {
			t.Errorf("%v: pid 40 went to tenant %q, want %q; workload %s", tc.errno, tenants[40], tc.want, work[40])
		}
	}
}
