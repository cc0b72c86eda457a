package tuner

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// A process is the MPS server only as the backend tells it (an identity
// no renaming gives: gpu.Process.MPSServer), in the compute list of a GPU
// in MPS mode; never by its name, argv[0], which a tenant sets (exec -a,
// setproctitle). A batch tenant whose process takes the server's name, on
// a GPU in any mode, as an MPS client or not, is still paused, and its
// pause in force not thawed; nor is a process the backend told on a GPU
// not in MPS mode, or listed as an MPS client. The server itself is never
// paused.
func TestMPSServerNotByName(t *testing.T) {
	named := func(p gpu.Process) gpu.Process {
		p.Name = "/usr/bin/" + gpu.MPSServerName
		return p
	}
	compute := func(p gpu.Process) gpu.Process {
		p.Type = gpu.ProcessCompute
		return p
	}
	told := func(p gpu.Process) gpu.Process {
		p.MPSServer = true
		return p
	}
	paused := []string{"SetPauseDuty(GPU-0,train,[7],0.5)", "SetPauseDuty(GPU-0,train,[7 8],0.5)"} // followed onto 8
	for _, c := range []struct {
		name  string
		mode  gpu.SharingMode
		proc  func(gpu.Process) gpu.Process // train's process 8, from an MPS client
		calls []string
		why   string // in the last decision; "" none refused or thawed
	}{
		{"an MPS client renamed", gpu.SharingMPS, named, paused, ""},
		{"a compute process renamed, on an MPS GPU", gpu.SharingMPS, func(p gpu.Process) gpu.Process { return compute(named(p)) }, paused, ""},
		{"a time-sliced process renamed", gpu.SharingTimeSlice, func(p gpu.Process) gpu.Process { return compute(named(p)) }, paused, ""},
		{"an exclusive process renamed", gpu.SharingExclusive, func(p gpu.Process) gpu.Process { return compute(named(p)) }, paused, ""},
		{"a MIG process renamed", gpu.SharingMIG, func(p gpu.Process) gpu.Process { return compute(named(p)) }, paused, ""},
		{"told, but an MPS client", gpu.SharingMPS, func(p gpu.Process) gpu.Process { return told(named(p)) }, paused, ""},
		{"told, but on a time-sliced GPU", gpu.SharingTimeSlice, func(p gpu.Process) gpu.Process { return told(compute(named(p))) }, paused, ""},
		{"the server, told", gpu.SharingMPS, func(p gpu.Process) gpu.Process { return told(compute(named(p))) },
			[]string{"SetPauseDuty(GPU-0,train,[7],0.5)", "SetPauseDuty(GPU-0,train,[7],0)"},
			"PID 8 of tenant train is the MPS server of GPU-0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &groupPauser{group: map[uint32]string{9: "chat", 7: "train", 8: "train"}}
			tu := pausingTuner(t, p, pauseUnpaused("train", gpu.ClassBatch, nil))
			// train paused with process 7, then its process 8 comes (the
			// pause follows it, unless it is the server)
			var last []Decision
			for i, pids := range [][]uint32{{7}, {7, 8}, {7, 8}} {
				procs := []gpu.Process{mpsProc(9, nil)}
				for _, pid := range pids {
					pr := mpsProc(pid, nil)
					if pid == 8 {
						pr = c.proc(pr)
					}
					procs = append(procs, pr)
				}
				usage := []tenant.Usage{
					{Tenant: "train", Class: gpu.ClassBatch, UUID: uuid0, PIDs: pids},
					{Tenant: "chat", Class: gpu.ClassLatency, UUID: uuid0, PIDs: []uint32{9}},
				}
				d, err := tu.RunOnce(context.Background(), snapshot(t0.Add(time.Duration(i)*time.Second),
					[]gpu.Device{{UUID: uuid0, Up: true, Mode: c.mode, Processes: procs}}, usage))
				if err != nil {
					t.Fatal(err)
				}
				if len(d) > 0 {
					last = d
				}
			}
			if !slices.Equal(p.Calls, c.calls) {
				t.Errorf("calls %q, want %q", p.Calls, c.calls)
			}
			why := ""
			if len(last) > 0 {
				why = last[len(last)-1].Reason
			}
			if c.why == "" && strings.Contains(why, errSharedGroup.Error()) || !strings.Contains(why, c.why) {
				t.Errorf("last decisions %+v, want the last saying %q", last, c.why)
			}
		})
	}
}
