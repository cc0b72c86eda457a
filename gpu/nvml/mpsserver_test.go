package nvml

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// The backend tells a GPU's MPS server (gpu.Process.MPSServer) by what a
// process cannot set by renaming itself: the GPU in MPS mode, the process
// in its compute list, its executable (its exe link) the server's and its
// parent's the control daemon's; not by its name (argv[0], which exec -a
// and setproctitle set), but where a link is not read (no ptrace read
// access: a root exporter short of CAP_SYS_PTRACE), where the name alone
// takes it for the server, unverified, and logs it once.
func TestMPSServerByExecutable(t *testing.T) {
	const (
		dev     = 2
		pid     = 7
		control = 50
	)
	server, daemon := "/usr/bin/"+gpu.MPSServerName, "/usr/bin/"+gpu.MPSControlName
	proc := func(pid uint32) nvml.ProcessInfo {
		return nvml.ProcessInfo{Pid: pid, UsedGpuMemory: 1 << 20, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}
	}
	clients := []nvml.ProcessInfo{proc(41)}
	for _, c := range []struct {
		name    string
		named   string // process 7's name (its command line; "": the server's)
		exe     string // process 7's executable ("": its link not read)
		parent  uint32
		pexe    string // the parent's
		compute []nvml.ProcessInfo
		mps     []nvml.ProcessInfo
		want    bool
		unverif bool // taken for the server by its name alone
	}{
		{"the server", "", server, control, daemon, []nvml.ProcessInfo{proc(pid)}, clients, true, false},
		{"the server, its file replaced since", "", server + " (deleted)", control, daemon + " (deleted)", []nvml.ProcessInfo{proc(pid)}, clients, true, false},
		{"the server, named otherwise", "/bin/other", server, control, daemon, []nvml.ProcessInfo{proc(pid)}, clients, true, false},
		{"renamed: another executable", "", "/usr/bin/python3", control, daemon, []nvml.ProcessInfo{proc(pid)}, clients, false, false},
		{"the server's executable, another parent", "", server, control, "/bin/bash", []nvml.ProcessInfo{proc(pid)}, clients, false, false},
		{"the server's executable, init its parent", "", server, 1, daemon, []nvml.ProcessInfo{proc(pid)}, clients, false, false},
		{"its executable not read: taken by its name", "", "", control, daemon, []nvml.ProcessInfo{proc(pid)}, clients, true, true},
		{"its parent's executable not read: taken by its name", "", server, control, "", []nvml.ProcessInfo{proc(pid)}, clients, true, true},
		{"its executable not read, named otherwise", "/usr/bin/python3", "", control, daemon, []nvml.ProcessInfo{proc(pid)}, clients, false, false},
		{"its parent's executable not read, named otherwise", "/usr/bin/python3", server, control, "", []nvml.ProcessInfo{proc(pid)}, clients, false, false},
		{"an MPS client", "", server, control, daemon, nil, append([]nvml.ProcessInfo{proc(pid)}, clients...), false, false},
		{"a GPU time-sliced", "", server, control, daemon, []nvml.ProcessInfo{proc(pid), proc(8)}, nil, false, false},
		{"a GPU exclusive", "", server, control, daemon, []nvml.ProcessInfo{proc(pid)}, nil, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			// every process is named as the server
			for _, p := range []uint32{pid, 8, 41} {
				f.procfs.set(p, "1000", server+"\x00")
			}
			named := server
			if c.named != "" {
				named = c.named
				f.procfs.set(pid, "1000", named+"\x00")
			}
			f.procfs.setExe(pid, c.exe, c.parent)
			f.procfs.setExe(c.parent, c.pexe, 1)
			f.setProcs(dev, c.compute, c.mps)
			b := f.backend()
			rd := sample(t, b)
			var found bool
			for _, p := range rd.Devices[dev].Processes {
				if p.PID == pid {
					found = true
					if p.Name != named {
						t.Errorf("PID %d named %q, want %q", p.PID, p.Name, named)
					}
					if p.MPSServer != c.want || p.MPSServerUnverified != c.unverif {
						t.Errorf("PID %d (%s, GPU %s): MPSServer %v, unverified %v, want %v, %v", pid, p.Type, rd.Devices[dev].Mode, p.MPSServer, p.MPSServerUnverified, c.want, c.unverif)
					}
				} else if p.Name != server {
					t.Errorf("PID %d named %q, want %q", p.PID, p.Name, server)
				} else if p.MPSServer {
					t.Errorf("PID %d (%s, its executable not read) told as the MPS server", p.PID, p.Type)
				}
			}
			if !found {
				t.Fatalf("PID %d not listed: %+v", pid, rd.Devices[dev].Processes)
			}
			// logged once, naming the remedy, while listed
			sample(t, b)
			if n := f.logs.count("CAP_SYS_PTRACE", "pid=7", "gpu=2", "not_read="); n != boolInt(c.unverif) {
				t.Errorf("logged unverified %d times over two samples, want %d:\n%s", n, boolInt(c.unverif), f.logs.String())
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
