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
				var procs []gpu.Process
				for _, pid := range r.train {
					procs = append(procs, mpsProc(pid, nil))
				}
				u := tenant.Usage{Tenant: "train", Class: gpu.ClassBatch, UUID: uuid0, PIDs: r.train}
				if d := besideChat(t, tu, t0.Add(time.Duration(i)*time.Second), u, procs); len(d) > 0 {
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

// besideChat runs a round of tu on GPU-0 in MPS mode, the latency tenant
// chat's PID 9 beside u's processes procs; it returns its decisions.
func besideChat(t *testing.T, tu *Tuner, at time.Time, u tenant.Usage, procs []gpu.Process) []Decision {
	t.Helper()
	usage := []tenant.Usage{u, {Tenant: "chat", Class: gpu.ClassLatency, UUID: uuid0, PIDs: []uint32{9}}}
	procs = append([]gpu.Process{mpsProc(9, nil)}, procs...)
	d, err := tu.RunOnce(context.Background(), snapshot(at, []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: procs}}, usage))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// countingPauser is a pause actuator that counts its group checks, and
// finds no group shared.
type countingPauser struct {
	pauseRecorder
	checks int
}

func (c *countingPauser) CheckPauseGroups(string, []uint32, map[uint32]string) error {
	c.checks++
	return nil
}

// A tenant paused on several GPUs has its groups checked once a round,
// for all its pauses in force (each GPU's), in a steady round and in one
// whose pauses follow its changed processes: each check reads every other
// tenant's process.
func TestPauseGroupsCheckedOnceARound(t *testing.T) {
	const gpus = 8
	var uuids []string
	for i := range gpus {
		uuids = append(uuids, fmt.Sprintf("GPU-%d", i))
	}
	first := true
	pol := deciderFunc(func(*State) []Action {
		if !first {
			return nil
		}
		first = false
		var out []Action
		for i, u := range uuids {
			out = append(out, Action{Target: Target{GPU: u, Knob: gpu.KnobPauseDuty, PID: 100}, GPUIndex: i, Tenant: "train", Class: gpu.ClassBatch,
				PIDs: []uint32{100, 101}, Current: Duty(0), Want: Duty(0.5), Reason: "test"})
		}
		return out
	})
	c := &countingPauser{}
	tu, err := New(Options{Policy: pol, Guards: []Guard{Bounds{}}, Enabled: pauseOn, Actuators: ActuatorsOf(c),
		Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	round := func(at time.Time, train []uint32) int {
		t.Helper()
		var devs []gpu.Device
		var usage []tenant.Usage
		for i, u := range uuids {
			chat := uint32(1000 + i)
			procs := []gpu.Process{mpsProc(chat, nil)}
			for _, p := range train {
				procs = append(procs, mpsProc(p, nil))
			}
			devs = append(devs, gpu.Device{UUID: u, Index: i, Up: true, Mode: gpu.SharingMPS, Processes: procs})
			usage = append(usage, tenant.Usage{Tenant: "train", Class: gpu.ClassBatch, UUID: u, PIDs: train},
				tenant.Usage{Tenant: fmt.Sprintf("chat%d", i), Class: gpu.ClassLatency, UUID: u, PIDs: []uint32{chat}})
		}
		c.checks = 0
		if _, err := tu.RunOnce(context.Background(), snapshot(at, devs, usage)); err != nil {
			t.Fatal(err)
		}
		return c.checks
	}
	if n := round(t0, []uint32{100, 101}); n != gpus {
		t.Fatalf("the first round: %d checks, want %d (one per GPU's pause set)", n, gpus)
	}
	for i, r := range []struct {
		name  string
		train []uint32
	}{
		{"steady", []uint32{100, 101}},
		{"its processes changed: followed", []uint32{100, 101, 102}},
		{"steady again", []uint32{100, 101, 102}},
	} {
		if n := round(t0.Add(time.Duration(i+1)*15*time.Second), r.train); n != 1 {
			t.Errorf("%s: train's groups checked %d times in a round, want once", r.name, n)
		}
	}
	if len(c.Calls) != 2*gpus {
		t.Errorf("calls %q, want each GPU's pause set and followed once", c.Calls)
	}
}

// The MPS server (listed in its GPU's compute list, attributed as any
// process: under pod tenancy the MPS daemon pod's namespace is a
// best-effort tenant) is never paused: every MPS client of the GPU waits
// on it, the latency tenant's the pause protects among them. A pause of
// the tenant it is attributed to is refused, so is one by the tenant's
// other processes where their group holds it (the MPS daemon's pod), and
// one in force is thawed once the server is among its processes, not
// followed onto it.
func TestPauseNeverStopsTheMPSServer(t *testing.T) {
	const server = 11
	for _, c := range []struct {
		name   string
		rounds [][]uint32 // the best-effort tenant's processes, each round
		named  []uint32   // the processes the pause names (nil: PausePIDs)
		calls  []string
		why    string
	}{
		{"the server is the best-effort tenant's: refused", [][]uint32{{server}}, nil, nil, ownServer},
		{"the server and another process: refused", [][]uint32{{server, 12}}, nil, nil, ownServer},
		{"by another process of its group: refused", [][]uint32{{server, 12}}, []uint32{12}, nil,
			"holds PID 11 of tenant every tenant of GPU-0 (its MPS server)"},
		{"the server comes to a tenant paused: thawed, not followed", [][]uint32{{12}, {server, 12}}, nil,
			[]string{"SetPauseDuty(GPU-0,daemons,[12],0.5)", "SetPauseDuty(GPU-0,daemons,[12],0)"}, ownServer},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &groupPauser{group: map[uint32]string{9: "chat", server: "daemons", 12: "daemons"}}
			tu := pausingTuner(t, p, pauseUnpaused("daemons", gpu.ClassBestEffort, c.named))
			var last []Decision
			for i, pids := range c.rounds {
				var procs []gpu.Process
				for _, pid := range pids {
					pr := mpsProc(pid, nil)
					if pid == server {
						pr = mpsServer(server)
					}
					procs = append(procs, pr)
				}
				u := tenant.Usage{Tenant: "daemons", Class: gpu.ClassBestEffort, UUID: uuid0, PIDs: pids}
				if d := besideChat(t, tu, t0.Add(time.Duration(i)*time.Second), u, procs); len(d) > 0 {
					last = d
				}
			}
			if !slices.Equal(p.Calls, c.calls) {
				t.Errorf("calls %q, want %q", p.Calls, c.calls)
			}
			if len(last) == 0 || !strings.Contains(last[len(last)-1].Reason, c.why) {
				t.Errorf("decisions %+v, want the last saying %q", last, c.why)
			}
		})
	}
}

// pauseUnpaused pauses tenant name on GPU-0 at every round it is not
// paused there, by the processes named (nil: PausePIDs).
func pauseUnpaused(name string, class gpu.TenantClass, named []uint32) Decider {
	return deciderFunc(func(s *State) []Action {
		if _, ok := s.PauseTarget(uuid0, name); ok {
			return nil
		}
		pids := named
		if pids == nil {
			pids = PausePIDs(s.Snapshot, name)
		}
		return []Action{{Target: Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: pids[0]}, Tenant: name, Class: class,
			PIDs: pids, Current: Duty(0), Want: Duty(0.5), Reason: "test"}}
	})
}

// pausingTuner is an enforcing tuner of pol, its pauses p's.
func pausingTuner(t *testing.T, p gpu.PauseActuator, pol Decider) *Tuner {
	t.Helper()
	tu, err := New(Options{Policy: pol, Guards: []Guard{Bounds{}}, Enabled: pauseOn, Actuators: ActuatorsOf(p),
		Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	return tu
}

// mpsServer is process pid as the backend lists an MPS server: in the
// compute list, its identity found (gpu.Process.MPSServer).
func mpsServer(pid uint32) gpu.Process {
	p := mpsProc(pid, nil)
	p.Type, p.Name, p.MPSServer = gpu.ProcessCompute, "/usr/bin/"+gpu.MPSServerName, true
	return p
}

// ownServer is why a pause of the tenant the MPS server is attributed to
// is refused, or thawed.
const ownServer = "PID 11 of tenant daemons is the MPS server of GPU-0, which every MPS client of the GPU waits on"
