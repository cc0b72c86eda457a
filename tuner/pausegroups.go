package tuner

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// A pause freezes a tenant's processes by their groups: a process's
// cgroup (its pod's, container's, VM's scope, systemd unit's) or its
// process group. Tenants told apart by executable or user can share one
// (a launcher script that starts a trainer and a server in the background,
// one delegated unit running both), and a pause of one would stop the
// other, a latency tenant among them, which is never paused. The pause
// actuator knows the groups (gpu.PauseGroupChecker) and the tuner every
// tenant's GPU processes: a pause whose groups hold another tenant's is
// refused (execute), not followed onto such processes (followPauses), and
// a pause in force whose groups come to hold one (started later, or a
// tenant's new process in a shared group) is thawed at the next round
// (thawPauses). An MPS server (nvidia-cuda-mps-server, listed in its
// GPU's compute list and attributed as any process: under pod tenancy the
// device plugin's MPS daemon pod makes its namespace a best-effort tenant)
// is every MPS client's of its GPU, the latency tenant's the pause
// protects among them: a pause of its own tenant by it is refused, and so
// is one whose groups hold it. The server is the one the backend told
// (gpu.Process.MPSServer, by what a process cannot set by renaming
// itself), on a GPU in MPS mode and in its compute list; never a process
// by its name, which a tenant sets to escape its pauses.

// errSharedGroup is the error of a pause refused up front: a group it
// would freeze holds another tenant's process.
var errSharedGroup = errors.New("a pause never stops another tenant's processes")

// sharedGroups says, where a pause of tenant's pids would freeze a group
// that holds a GPU process of another tenant in snap, which and whose
// ("" where none does, or the pause actuator cannot tell groups).
func (t *Tuner) sharedGroups(snap *tenant.Snapshot, name string, pids []uint32) string {
	p, ok := actuator[gpu.PauseActuator](t.o.Actuators)
	if !ok || snap == nil {
		return ""
	}
	servers := mpsServers(snap)
	for _, pid := range pids {
		if uuid, ok := servers[pid]; ok {
			return fmt.Sprintf("PID %d of tenant %s is the MPS server of %s, which every MPS client of the GPU waits on", pid, name, uuid)
		}
	}
	c, ok := p.(gpu.PauseGroupChecker)
	if !ok {
		return ""
	}
	others := othersOf(snap, name)
	if len(others) == 0 {
		return ""
	}
	defer t.calling("check the groups a pause of " + name + " freezes")()
	if err := c.CheckPauseGroups(name, pids, others); err != nil {
		return err.Error()
	}
	return ""
}

// pauseShared is why the pause action a is refused: a group it would
// freeze holds another tenant's process; "" for a thaw or a pause that
// reaches no other tenant.
func (t *Tuner) pauseShared(st *State, a Action) string {
	if a.Knob != gpu.KnobPauseDuty || thaws(a) || st == nil {
		return ""
	}
	return t.sharedGroups(st.Snapshot, a.Tenant, pausedPIDs(a))
}

// inForceShared is why the pauses in force of tenant name (one per GPU it
// is paused on) are thawed: a group they hold (by the processes they
// paused, its tenant's now, which they follow, or, to the pause actuator,
// those it freezes for the tenant) holds another tenant's process in the
// latest snapshot; "" otherwise. It is checked once a round for all of
// them (sharedNow, made anew by thawPauses, which a round runs before any
// other pause step), the PIDs of every one in the one check.
func (t *Tuner) inForceShared(name string) string {
	if t.last == nil || name == "" {
		return ""
	}
	if why, ok := t.sharedNow[name]; ok {
		return why
	}
	pids := PausePIDs(t.last, name)
	for _, k := range slices.Sorted(maps.Keys(t.originals)) {
		if o := t.originals[k]; o.Target.Knob == gpu.KnobPauseDuty && o.Tenant == name {
			for _, p := range o.PIDs {
				if !slices.Contains(pids, p) {
					pids = append(pids, p)
				}
			}
		}
	}
	why := t.sharedGroups(t.last, name, pids)
	t.sharedNow[name] = why
	return why
}

// othersOf are the processes of every tenant but name in snap that a
// pause must not reach (PID to tenant): their GPU processes, or on a vGPU
// host their VMs' processes on the host, unassigned ones among them.
func othersOf(snap *tenant.Snapshot, name string) map[uint32]string {
	out := map[uint32]string{}
	for _, u := range snap.Usage {
		if u.Tenant == name {
			continue
		}
		for _, pid := range pausable(snap, u) {
			out[pid] = u.Tenant
		}
	}
	for pid, uuid := range mpsServers(snap) {
		out[pid] = "every tenant of " + uuid + " (its MPS server)"
	}
	return out
}

// mpsServers are the MPS servers in snap's readings, PID to GPU UUID: the
// processes the backend told, each in the compute list of a GPU in MPS
// mode (a vGPU host's guest processes aside: their PIDs are the guests').
func mpsServers(snap *tenant.Snapshot) map[uint32]string {
	out := map[uint32]string{}
	if snap.Readings == nil {
		return out
	}
	for i := range snap.Readings.Devices {
		d := &snap.Readings.Devices[i]
		if d.Mode != gpu.SharingMPS {
			continue
		}
		for _, p := range d.Processes {
			if p.MPSServer && p.Type == gpu.ProcessCompute && p.VGPUInstance == 0 {
				out[p.PID] = d.UUID
			}
		}
	}
	return out
}

// sharedText is the reason a pause is refused or thawed for a group
// shared with another tenant.
func sharedText(why string) string {
	return fmt.Sprintf("%s: %s", errSharedGroup, why)
}
