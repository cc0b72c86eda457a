package tuner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// groupPauser is a pause actuator that records its calls and pauses a
// process by its group, as the host's does: group names each PID's
// (a cgroup or a process group).
type groupPauser struct {
	pauseRecorder
	group map[uint32]string
}

func (g *groupPauser) CheckPauseGroups(name string, pids []uint32, others map[uint32]string) error {
	for _, p := range pids {
		for _, o := range slices.Sorted(maps.Keys(others)) {
			if g.group[p] == g.group[o] {
				return fmt.Errorf("group %s, which PID %d of tenant %s is paused by, holds PID %d of tenant %s", g.group[p], p, name, o, others[o])
			}
		}
	}
	return nil
}

// A pause never stops another tenant's processes: one whose group (a
// cgroup, a process group) holds another tenant's GPU process is refused,
// and one in force is thawed once its group comes to hold one (another
// tenant's process started there, or its own new process in another's
// group, which it is not followed onto), the decision naming the other
// tenant and its PID.
func TestPauseNotOnSharedGroup(t *testing.T) {
	type round struct {
		train []uint32          // train's processes
		group map[uint32]string // each process's group; chat's is PID 9
	}
	own := map[uint32]string{7: "a", 8: "a", 9: "b", 10: "c"}
	shared := map[uint32]string{7: "a", 8: "a", 9: "a", 10: "c"}
	newShared := map[uint32]string{7: "a", 8: "a", 9: "c", 10: "c"}
	for _, c := range []struct {
		name   string
		rounds []round
		calls  []string
		reason string // of the last decision
	}{
		{"groups of its own: paused", []round{{[]uint32{7, 8}, own}, {[]uint32{7, 8}, own}},
			[]string{"SetPauseDuty(GPU-0,train,[7 8],0.5)"}, ""},
		{"its group holds chat's process: refused", []round{{[]uint32{7, 8}, shared}},
			nil, "holds PID 9 of tenant chat"},
		{"chat's process comes to its group: thawed", []round{{[]uint32{7, 8}, own}, {[]uint32{7, 8}, shared}},
			[]string{"SetPauseDuty(GPU-0,train,[7 8],0.5)", "SetPauseDuty(GPU-0,train,[7 8],0)"}, "holds PID 9 of tenant chat"},
		{"its new process in chat's group: thawed, not followed", []round{{[]uint32{7, 8}, own}, {[]uint32{7, 8, 10}, newShared}},
			[]string{"SetPauseDuty(GPU-0,train,[7 8],0.5)", "SetPauseDuty(GPU-0,train,[7 8],0)"}, "holds PID 9 of tenant chat"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &groupPauser{}
			tu, err := New(Options{Policy: pauseOnce(), Guards: []Guard{Bounds{}}, Enabled: pauseOn, Actuators: ActuatorsOf(p),
				Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			var last []Decision
			for i, r := range c.rounds {
				p.group = r.group
				procs := []gpu.Process{mpsProc(9, nil)}
				for _, pid := range r.train {
					procs = append(procs, mpsProc(pid, nil))
				}
				usage := []tenant.Usage{
					{Tenant: "train", Class: gpu.ClassBatch, UUID: uuid0, PIDs: r.train},
					{Tenant: "chat", Class: gpu.ClassLatency, UUID: uuid0, PIDs: []uint32{9}},
				}
				at := t0.Add(time.Duration(i) * time.Second)
				d, err := tu.RunOnce(context.Background(), snapshot(at, []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: procs}}, usage))
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
			if c.reason == "" {
				return
			}
			if len(last) == 0 || !strings.Contains(last[len(last)-1].Reason, c.reason) {
				t.Errorf("decisions %+v, want the last saying %q", last, c.reason)
			}
		})
	}
}
