// Package baseline holds the baseline policies, static-equal and
// best-effort (uncapped): tuner.Deciders with one fixed target per sharing
// mechanism, the yardstick autotune is compared to.
package baseline

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// Names of the baseline policies. The uncapped baseline keeps the name
// "best-effort" its users know it by (no caps: every tenant takes what it
// can get); it is not a tenant class nor the vGPU best-effort scheduler,
// though it selects the latter.
const (
	StaticEqualName = "static-equal"
	UncappedName    = "best-effort"
)

// DefaultRetryAfter is how long (on the snapshot clock) a baseline waits
// before it asks again for a change it asked for (applied, and perhaps
// taking effect later, refused as busy, or failed). A change refused as
// not supported is never asked for again (the Retry guard).
const DefaultRetryAfter = time.Minute

// fractionEpsilon is the smallest MPS active-thread difference worth a
// client restart.
const fractionEpsilon = 0.005

// Baseline is a Decider that holds one fixed target per sharing
// mechanism: it never looks at latency, only at which tenants share each
// GPU. It is what hosts do without a tuner, and the yardstick autotune is
// compared to.
//
//   - MPS GPUs: static-equal gives each tenant 1/n of the active threads
//     (split evenly among the tenant's clients), as the Kubernetes device
//     plugin does with 100/replicas; best-effort (uncapped) gives every
//     client 100%. The client is restarted after the change (Restart),
//     because MPS applies the percentage to new contexts only.
//   - vGPU GPUs: the equal-share (static-equal) or best-effort (uncapped)
//     vGPU scheduler.
//   - time-sliced GPUs: the default compute time slice (both).
//   - MIG and exclusive GPUs, clocks and power: left alone.
//
// A knob the GPU does not have this round (tuner.State.Changeable) is
// left alone there: its change would be refused untried.
//
// The engine runs it at every snapshot (withRetry) behind the Retry
// guard alone: a change asked for is not asked for again before
// RetryAfter, one refused as not supported never.
type Baseline struct {
	name  string
	equal bool
}

// NewStaticEqual returns the static-equal baseline, run by the engine.
func NewStaticEqual() *tuner.TunerPolicy {
	return withRetry(Baseline{name: StaticEqualName, equal: true})
}

// NewUncapped returns the uncapped baseline (named "best-effort"), run by
// the engine.
func NewUncapped() *tuner.TunerPolicy { return withRetry(Baseline{name: UncappedName}) }

// withRetry runs a baseline as the baselines have always run: at
// every snapshot, starting with Init's, in enforce mode, with no guard but
// Retry (DefaultRetryAfter; the kill switch before it where there is one)
// and no slow loop.
func withRetry(d tuner.Decider) *tuner.TunerPolicy {
	return tuner.EverySnapshot(d, func() []tuner.Guard { return []tuner.Guard{&tuner.Retry{After: DefaultRetryAfter}} })
}

// Name returns the baseline's name.
func (b Baseline) Name() string { return b.name }

// Decide brings every GPU of the snapshot to the baseline's settings.
func (b Baseline) Decide(s *tuner.State) []tuner.Action {
	var out []tuner.Action
	for _, d := range s.UpDevices() {
		switch d.Mode {
		case gpu.SharingMPS:
			out = append(out, b.mps(s, d)...)
		case gpu.SharingVGPU:
			out = append(out, b.vgpu(s, d)...)
		case gpu.SharingTimeSlice:
			out = append(out, b.timeSlice(s, d)...)
		}
	}
	return out
}

// client is one MPS client process and the tenant it belongs to.
type client struct {
	pid     uint32
	tenant  string
	current *float64
}

// mpsClients returns the MPS clients on d with their tenants and the number
// of tenants sharing the GPU. A process no tenant claims counts as a tenant
// of its own (so the fallback without a tenants file is one share per
// process).
func mpsClients(snap *tenant.Snapshot, d *gpu.Device) (clients []client, perTenant map[string]int) {
	owner := map[uint32]string{}
	for _, u := range snap.Usage {
		if u.UUID != d.UUID || u.Tenant == tenant.Unassigned {
			continue
		}
		for _, pid := range u.PIDs {
			owner[pid] = u.Tenant
		}
	}
	perTenant = map[string]int{}
	for _, p := range d.Processes {
		if p.Type != gpu.ProcessMPS {
			continue
		}
		t, ok := owner[p.PID]
		if !ok {
			t = "pid " + strconv.FormatUint(uint64(p.PID), 10)
		}
		clients = append(clients, client{pid: p.PID, tenant: t, current: p.MPSActiveThreads})
		perTenant[t]++
	}
	// (slices.SortFunc: the same sort as sort.Slice, without its
	// allocations)
	slices.SortFunc(clients, func(a, b client) int { return cmp.Compare(a.pid, b.pid) })
	return clients, perTenant
}

func (b Baseline) mps(s *tuner.State, d *gpu.Device) []tuner.Action {
	clients, perTenant := mpsClients(s.Snapshot, d)
	var out []tuner.Action
	for _, c := range clients {
		target := 1.0
		reason := "best-effort: every MPS client may use all SMs"
		if b.equal {
			n := len(perTenant)
			target = 1 / float64(n) / float64(perTenant[c.tenant])
			reason = fmt.Sprintf("static-equal: %d tenants share the GPU, %d client(s) of this tenant", n, perTenant[c.tenant])
		}
		t := tuner.Target{GPU: d.UUID, Knob: gpu.KnobMPSActiveThreads, PID: c.pid}
		cur := s.MPSFraction(t, c.current)
		// (compared as the MPS actuator holds the target, State.MPSHeld:
		// 1/8 in force as 0.13, or 0.5 as a server's 0.3, is not asked
		// again, restarting the client at every retry)
		if math.Abs(float64(cur)-float64(s.MPSHeld(t, tuner.Fraction(target)))) < fractionEpsilon || !s.Changeable(t) {
			continue
		}
		out = append(out, tuner.Action{Target: t, GPUIndex: d.Index, Tenant: c.tenant,
			Current: cur, Want: tuner.Fraction(target), Restart: true, Reason: reason})
	}
	return out
}

// vgpu asks for the baseline's scheduler where the GPU's scheduler is
// read: from one not read (the driver's getter failed) a change would
// keep no original, and the executor refuses it (as timeSlice). The
// baseline's scheduler is its policy with adaptive round robin off, the
// time slice in force kept (tuner.Scheduler.WithPolicy); the scheduler
// in force is compared with it whole, and is the change's Current whole,
// so that the original kept is too (ARR on, its average factor and
// frequency) and the restore sets all of it back.
func (b Baseline) vgpu(s *tuner.State, d *gpu.Device) []tuner.Action {
	t := tuner.Target{GPU: d.UUID, Knob: gpu.KnobVGPUScheduler}
	if d.Scheduler == nil || !s.Changeable(t) {
		return nil
	}
	want := gpu.VGPUPolicyBestEffort
	reason := "best-effort: vGPU scheduler default"
	if b.equal {
		want = gpu.VGPUPolicyEqualShare
		reason = "static-equal: equal-share vGPU scheduler"
	}
	cur := tuner.SchedulerOf(d.Scheduler)
	to := cur.WithPolicy(want)
	if to.Distance(cur) == 0 {
		return nil
	}
	return []tuner.Action{{Target: t, GPUIndex: d.Index, Current: cur, Want: to, Reason: reason}}
}

// timeSlice asks for the default level where the GPU's level is read: from
// a level not read (NVML reads none) a change would keep an original no
// restore can set back, at every round, as nothing reads the level set.
func (b Baseline) timeSlice(s *tuner.State, d *gpu.Device) []tuner.Action {
	const want = gpu.TimeSliceDefault
	t := tuner.Target{GPU: d.UUID, Knob: gpu.KnobComputeTimeSlice}
	if d.ComputeTimeSlice == "" || d.ComputeTimeSlice == want || !s.Changeable(t) {
		return nil
	}
	return []tuner.Action{{Target: t, GPUIndex: d.Index,
		Current: tuner.Level(d.ComputeTimeSlice), Want: tuner.Level(want), Reason: b.name + ": default compute time slice"}}
}
