package tenant

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/parallel"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// tenantAcc accumulates one tenant's use of one GPU (or MIG instance).
type tenantAcc struct {
	tenant string
	gi     string
	procs  int
	// busy and memBusy sum the per-process (or per-VM) utilization
	// samples: the fraction of the interval a kernel ran, and the fraction
	// with memory traffic; busyN and memBusyN count the samples.
	busy, memBusy   float64
	busyN, memBusyN int
	// ctxN counts its utilization contexts (processes, vGPU VMs) on a
	// shared device, sampled or not.
	ctxN int
	// smW and memW are busy and memBusy, each sample weighted by the
	// context's fitted footprint (see gpuFit.fit).
	smW, memW float64
	// memBytes sums the used memory of its processes (and vGPU VMs) that
	// the readings give; memBytesN counts them, memUnknown counts its
	// processes whose used memory the driver did not report (NVML's "not
	// available": no permission, or a container in its own PID
	// namespace), its VMs whose framebuffer use NVML did not give, and
	// its hold carried forward while a process list is refused.
	memBytes   uint64
	memBytesN  int
	memUnknown int
	// reserve sums the reservations of its MPS clients and vGPU VMs
	// (Usage.Reservation); reserveN counts them.
	reserve   float64
	reserveN  int
	pids      []uint32
	vmPIDs    []uint32 // the host processes of its VMs
	workloads []Workload
	// listed counts its processes of a shared device's process list (not
	// inside a VM, which the vGPU figures give apart): those a refused
	// list hides.
	listed int
	// carried is, on a shared device where processes of it are carried
	// forward while their process list is refused (carryShared), the part
	// of its hold of the sample before that they carry; nil otherwise.
	// unread: none of its processes (or VMs) is read now.
	carried *sharedHeld
	unread  bool
}

type devAcc struct {
	byTenant map[accKey]*tenantAcc
}

// accKey is a tenant in a MIG instance ("" gi for the GPU itself).
type accKey struct{ gi, tenant string }

func (perTenant *devAcc) get(tenant, gi string) *tenantAcc {
	k := accKey{gi, tenant}
	a, ok := perTenant.byTenant[k]
	if !ok {
		a = &tenantAcc{tenant: tenant, gi: gi}
		perTenant.byTenant[k] = a
	}
	return a
}

func (a *tenantAcc) addProcess(p *gpu.Process, sub *subject) {
	a.procs++
	a.pids = append(a.pids, p.PID)
	if w, ok := sub.workload(); ok {
		a.workloads = append(a.workloads, w)
	}
	if p.UsedMemoryBytes != nil {
		a.memBytes += *p.UsedMemoryBytes
		a.memBytesN++
	} else {
		a.memUnknown++
	}
}

// memKnown says whether the memory its processes hold is known: every
// one's was read (none: it holds none).
func (a *tenantAcc) memKnown() bool { return a.memUnknown == 0 }

// addReserve adds the reservation of one MPS client or vGPU VM, a part
// of the GPU (at most all of it).
func (a *tenantAcc) addReserve(part float64) {
	a.reserve += min(1, part)
	a.reserveN++
}

// processCtx is the utilization context of p, a process of a non-MIG GPU.
func (a *tenantAcc) processCtx(p *gpu.Process) ctxUtil {
	c := ctxUtil{key: ctxKey{id: uint64(p.PID), threads: 1}, acc: a, sm: p.SMUtil, mem: p.MemUtil}
	if p.MPSActiveThreads != nil {
		c.mps = true
		if *p.MPSActiveThreads > 0 {
			c.key.threads = min(1, *p.MPSActiveThreads)
		}
	}
	return c
}

// addUtil counts a context and adds its kernel-busy and memory-busy
// samples (either may be absent), weighted by its footprints.
func (a *tenantAcc) addUtil(c *ctxUtil) {
	a.ctxN++
	if c.sm != nil {
		a.busy += *c.sm
		a.smW += *c.sm * c.smFoot
		a.busyN++
	}
	if c.mem != nil {
		a.memBusy += *c.mem
		a.memW += *c.mem * c.memFoot
		a.memBusyN++
	}
}

// usage attributes one sample's devices; see docs/tenants.md for the rules.
func (b *Builder) usage(compiled *compiledConfig, r *gpu.Readings, podMap *kube.Mapping) []Usage {
	b.attr.conflicts = 0
	if r == nil {
		return nil
	}
	b.attr.interval.begin(r.Time)
	b.placeAll(compiled, r, podMap)
	var out []Usage
	seen := map[string]bool{}
	defer b.attr.forgetFits(seen)
	// the shared devices' contexts first, then their footprints, fitted
	// at once (each device's fit reads and changes its own history only),
	// then every device's usage in device order. Devices that share a UUID
	// share a fit: each fit goes to one worker, which fits its devices in
	// device order.
	shared := make([]*sharedDevice, len(r.Devices))
	var fits [][]*sharedDevice
	fitIndex := map[*gpuFit]int{}
	for di := range r.Devices {
		d := &r.Devices[di]
		if d.Up && wholeGPU(d) {
			sd := b.sharedContexts(compiled, podMap, d)
			shared[di] = sd
			i, ok := fitIndex[sd.fit]
			if !ok {
				i = len(fits)
				fitIndex[sd.fit] = i
				fits = append(fits, nil)
			}
			fits[i] = append(fits[i], sd)
		}
	}
	parallel.Each(len(fits), func(i int) {
		for _, sd := range fits[i] {
			a := sd.d.Activity
			if sd.departed || sd.unsampled() || sd.carried {
				// the interval's device figures hold the work of contexts
				// that left, of one listed without a sample, or of tenants
				// carried forward, whose busy time no sample has: fitted,
				// they would make the others' footprints too large for the
				// whole window. The sample is kept without them, which the
				// fit passes over.
				a = gpu.Activity{}
			}
			sd.fit.fit(sd.ctxs, a.SMActive, a.SMOccupancy, a.DRAMActive)
		}
	})
	for di := range r.Devices {
		d := &r.Devices[di]
		if !d.Up {
			continue
		}
		seen[d.UUID] = true
		if shared[di] == nil {
			b.migContextSwitches(d)
			out = append(out, b.migUsage(compiled, podMap, d)...)
			continue
		}
		out = append(out, b.sharedShares(compiled, shared[di])...)
	}
	// the same pdqsort as sort.Slice, without its reflection
	slices.SortFunc(out, func(a, c Usage) int {
		if a.GPU != c.GPU {
			return cmp.Compare(a.GPU, c.GPU)
		}
		if a.GPUInstance != c.GPUInstance {
			return compareInstance(a.GPUInstance, c.GPUInstance)
		}
		return strings.Compare(a.Tenant, c.Tenant)
	})
	return out
}

func (b *Builder) newUsage(compiled *compiledConfig, d *gpu.Device, a *tenantAcc, m Method) Usage {
	return Usage{
		Tenant:          a.tenant,
		Class:           compiled.classOf(a.tenant),
		GPU:             d.Index,
		UUID:            d.UUID,
		GPUInstance:     a.gi,
		Processes:       a.procs,
		MemoryUsedBytes: a.memBytes,
		MemoryUnknown:   !a.memKnown(),
		PIDs:            sortedPIDs(a.pids),
		VMPIDs:          sortedPIDs(a.vmPIDs),
		Workloads:       sortedWorkloads(a.workloads),
		Method:          m,
	}
}

func sortedWorkloads(w []Workload) []Workload {
	if len(w) == 0 {
		return nil
	}
	out := slices.Clone(w)
	slices.SortFunc(out, func(a, b Workload) int { return cmp.Compare(a.PID, b.PID) })
	return out
}

func sortedPIDs(p []uint32) []uint32 {
	if len(p) == 0 {
		return nil
	}
	out := slices.Clone(p)
	slices.Sort(out)
	return out
}

// migUsage: each MIG instance is its own share domain, and its own
// counters are its tenant's (Measured) when one tenant had it over the
// sample's interval: the tenant of its processes at either end of the
// interval, or, while it has none, the tenant its selectors (mig_uuid,
// gpu_instance, kubernetes via the pod holding the MIG device) name, who
// holds it idle or not. When several tenants had it in the interval
// (processes of several sharing it, or one leaving while another stays or
// comes), its activity is split by the used memory each held over the
// interval, a rule and not a measurement (Apportioned). (NVML has no
// per-process utilization on MIG GPUs.) While its process list is refused
// its tenants of the sample before are carried forward (Apportioned: who
// had it is not read). An instance without processes at either end that
// no selector names is nobody's: no usage, so its time and energy stay
// idle.
func (b *Builder) migUsage(compiled *compiledConfig, podMap *kube.Mapping, d *gpu.Device) []Usage {
	var out []Usage
	byGI := map[int][]*gpu.Process{}
	var loose []*gpu.Process
	for i := range d.Processes {
		p := &d.Processes[i]
		if p.GPUInstanceID >= 0 && d.MIGByGI(p.GPUInstanceID) != nil {
			byGI[p.GPUInstanceID] = append(byGI[p.GPUInstanceID], p)
		} else {
			loose = append(loose, p)
		}
	}
	prevT, curT := b.attr.interval.device(d)
	if curT.mig == nil {
		curT.mig = make(map[string]map[string]migHeld, len(d.MIG))
	}
	for ii := range d.MIG {
		inst := &d.MIG[ii]
		gi := strconv.Itoa(inst.GPUInstanceID)
		isub := &subject{label: fmt.Sprintf("MIG instance %s (GPU %d GI %d)", inst.UUID, d.Index, inst.GPUInstanceID), uid: -1, gpu: d.Index, migUUID: inst.UUID, gi: inst.GPUInstanceID}
		if podMap != nil {
			placeInPod(isub, podMap, kube.CgroupInfo{}, migDeviceIDs(d, inst.GPUInstanceID, inst.ComputeInstances()...))
		}
		owner := b.attribute(compiled, isub)
		perTenant := &devAcc{byTenant: map[accKey]*tenantAcc{}}
		for _, p := range byGI[inst.GPUInstanceID] {
			sub := b.subjectOf(compiled, podMap, d, p, inst)
			perTenant.get(b.attribute(compiled, sub), gi).addProcess(p, sub)
		}
		held := make(map[string]migHeld, len(perTenant.byTenant))
		for _, a := range perTenant.byTenant {
			held[a.tenant] = migHeld{a.memBytes, a.memKnown(), a.procs}
		}
		prevHeld, known := prevT.instance(inst.UUID)
		if inst.ProcessesUnread && b.carryMIG(prevT, curT, inst.UUID) {
			// its process list refused: who holds it is not known, and
			// its holders are not known to have left. They are carried
			// forward with what they held, their processes too, their
			// memory now not known.
			for tn, h := range prevHeld {
				if _, ok := held[tn]; !ok {
					held[tn] = h
					a := perTenant.get(tn, gi)
					a.memUnknown++
					a.procs = h.procs
				}
			}
		}
		// a tenant a selector gives the instance (a conflict between two
		// selectors included: unassigned) holds it while it is idle
		idleOwner := len(held) == 0 && (owner != Unassigned || len(compiled.matching(isub)) > 1)
		if idleOwner {
			held[owner] = migHeld{memKnown: true}
			perTenant.get(owner, gi)
		}
		curT.mig[inst.UUID] = held
		// the tenants that left during the interval ran in it
		for tn := range prevHeld {
			perTenant.get(tn, gi)
		}
		if len(perTenant.byTenant) == 0 {
			if !active(inst.Activity) {
				continue // nobody's, and idle
			}
			// processes that came and went between two samples (or
			// that a refused list hides): no tenant is known to give
			// their activity to
			perTenant.get(Unassigned, gi)
		}
		accs := sortedAccs(perTenant)
		w := intervalWeights(accs, held, prevHeld, known)
		method := Measured
		if len(accs) > 1 || inst.ProcessesUnread {
			// several had it, or who had it is not known (its list
			// refused): the instance's counters are given by a rule
			method = Apportioned
		}
		fs := make(floats, 0, 2*len(accs))
		for i, a := range accs {
			u := b.newUsage(compiled, d, a, method)
			u.SMActive = fs.scaled(inst.Activity.SMActive, w[i])
			u.DRAMActive = fs.scaled(inst.Activity.DRAMActive, w[i])
			if len(accs) == 1 && (idleOwner || !a.memKnown() && inst.MemoryTotalBytes > 0) {
				// it holds the instance idle, or its processes' memory
				// is not all reported: the instance's own (of an idle
				// one, known read or not: it has no process to hold any)
				u.MemoryUsedBytes, u.MemoryUnknown = inst.MemoryUsedBytes, false
			}
			out = append(out, u)
		}
	}
	if len(loose) > 0 {
		// processes the readings do not place in an instance: memory
		// only, no SM, DRAM or context-switch figure to say how it was
		// obtained (no method)
		perTenant := &devAcc{byTenant: map[accKey]*tenantAcc{}}
		for _, p := range loose {
			sub := b.subjectOf(compiled, podMap, d, p, nil)
			perTenant.get(b.attribute(compiled, sub), "").addProcess(p, sub)
		}
		for _, a := range sortedAccs(perTenant) {
			out = append(out, b.newUsage(compiled, d, a, ""))
		}
	}
	return out
}

// A shared device (exclusive, time-sliced, MPS or vGPU) is one share
// domain: its device figures are apportioned among its tenants (see
// docs/tenants.md), however many there are, in three steps: sharedContexts,
// the footprints' fit (gpuFit.fit) and sharedShares.

// sharedDevice is a shared device's tenants and contexts between their
// attribution and their shares, with the device's footprint history.
type sharedDevice struct {
	d         *gpu.Device
	perTenant *devAcc
	ctxs      []*ctxUtil
	fit       *gpuFit
	// departed: a context of the previous sample left during the
	// interval, or the device had activity of processes listed at neither
	// end (gpu.Device.UnlistedActivity)
	departed bool
	// carried: a process of the previous sample is carried forward (its
	// process list refused, carryShared)
	carried bool
	// gone are the parts of the sample before of its processes that left
	// while others are carried forward (carryShared)
	gone sharedHeld
	// tenancy is the device's tenancy in this sample, whose holders
	// sharedShares records
	tenancy *devTenancy
}

// unsampled says whether a context of the device has no SM utilization
// sample in the interval.
func (sd *sharedDevice) unsampled() bool {
	return slices.ContainsFunc(sd.ctxs, func(c *ctxUtil) bool { return c.sm == nil })
}

// sharedContexts attributes a shared device's vGPUs and processes to
// their tenants and returns their contexts, whose footprints are yet to
// be fitted (sharedDevice.fit).
func (b *Builder) sharedContexts(compiled *compiledConfig, podMap *kube.Mapping, d *gpu.Device) *sharedDevice {
	perTenant := &devAcc{byTenant: map[accKey]*tenantAcc{}}
	// the contexts, at most one a vGPU and one a process, in one allocation
	n := len(d.VGPUs) + len(d.Processes)
	ctxs, ctxBuf := make([]*ctxUtil, 0, n), make([]ctxUtil, 0, n)
	newCtx := func(c ctxUtil) *ctxUtil {
		ctxBuf = append(ctxBuf, c)
		return &ctxBuf[len(ctxBuf)-1]
	}
	prevT, curT := b.attr.interval.device(d)
	if curT.ctxs == nil {
		curT.ctxs = make(map[uint64]bool, n)
	}
	if curT.procs == nil {
		curT.procs = make(map[uint32]heldProc, len(d.Processes))
	}
	vgpuTenant := map[uint32]string{}
	for i := range d.VGPUs {
		v := &d.VGPUs[i]
		t := b.attribute(compiled, &subject{label: fmt.Sprintf("vGPU %s (VM %q on GPU %d)", v.UUID, v.VMName, d.Index), uid: -1, gpu: d.Index, gi: -1, vgpu: v})
		vgpuTenant[v.ID] = t
		a := perTenant.get(t, "")
		ctxs = append(ctxs, newCtx(ctxUtil{key: ctxKey{id: 1<<32 | uint64(v.ID), threads: 1}, acc: a, sm: v.SMUtil, mem: v.MemUtil}))
		if v.FramebufferUsed != nil {
			a.memBytes += *v.FramebufferUsed
			a.memBytesN++
		} else {
			a.memUnknown++ // NVML did not give it: unknown, not none
		}
		if v.HostPID != 0 {
			a.vmPIDs = append(a.vmPIDs, v.HostPID)
		}
		if v.FramebufferBytes > 0 && d.MemoryTotalBytes > 0 {
			// a vGPU profile is defined by its framebuffer
			a.addReserve(float64(v.FramebufferBytes) / float64(d.MemoryTotalBytes))
		}
	}
	for i := range d.Processes {
		p := &d.Processes[i]
		if t, ok := vgpuTenant[p.VGPUInstance]; ok && p.VGPUInstance != 0 {
			// inside a VM: its utilization is already the instance's
			a := perTenant.get(t, "")
			a.procs++
			a.pids = append(a.pids, p.PID)
			continue
		}
		sub := b.subjectOf(compiled, podMap, d, p, nil)
		a := perTenant.get(b.attribute(compiled, sub), "")
		a.addProcess(p, sub)
		a.listed++
		h := heldProc{tenant: a.tenant, mps: procList(p)}
		if p.MPSActiveThreads != nil && *p.MPSActiveThreads > 0 {
			a.addReserve(*p.MPSActiveThreads)
			h.reserve = *p.MPSActiveThreads
		}
		curT.procs[p.PID] = h
		ctxs = append(ctxs, newCtx(a.processCtx(p)))
	}
	for _, c := range ctxs {
		curT.ctxs[c.key.id] = true
	}
	sd := &sharedDevice{d: d, perTenant: perTenant, ctxs: ctxs, fit: b.attr.fitOf(d.UUID), tenancy: curT}
	b.carryShared(sd, prevT)
	sd.departed = prevT.departed(curT.ctxs) || d.UnlistedActivity
	return sd
}

// sharedShares apportions a shared device's figures among its tenants,
// its contexts' footprints fitted.
func (b *Builder) sharedShares(compiled *compiledConfig, sd *sharedDevice) []Usage {
	d, perTenant, ctxs := sd.d, sd.perTenant, sd.ctxs
	for _, c := range ctxs {
		c.acc.addUtil(c)
	}
	csDelta, csKnown := b.contextSwitchDelta(d)
	if len(perTenant.byTenant) == 0 {
		if !deviceActive(d, csDelta) {
			return nil
		}
		// activity of processes gone before the sample: no tenant is left
		// to give it to
		perTenant.get(Unassigned, "")
	}
	accs := sortedAccs(perTenant)
	smShare, memShare := shareBy(accs, smOf), shareBy(accs, memOf)
	if sd.carried {
		// the parts carried forward weigh as they were in the sample
		// before, none of their samples read to bound them by, against
		// what the samples of those read allow; the parts of the
		// processes that left are unassigned's, as below, read or
		// carried or neither
		if sd.gone.sm > 0 || sd.gone.dram > 0 {
			if _, ok := perTenant.byTenant[accKey{"", Unassigned}]; !ok {
				perTenant.get(Unassigned, "").unread = true
				accs = sortedAccs(perTenant)
				smShare, memShare = shareBy(accs, smOf), shareBy(accs, memOf)
			}
		}
		smShare = carriedShares(accs, smShare, d.Activity.SMActive, busyOf, sd.carriedPart(func(h *sharedHeld) float64 { return h.sm }))
		memShare = carriedShares(accs, memShare, d.Activity.DRAMActive, memBusyOf, sd.carriedPart(func(h *sharedHeld) float64 { return h.dram }))
	} else if sd.departed {
		// the part of the interval of the contexts that left (or came
		// and went) has no figure to say whose it was: those still here
		// get no more than their own samples allow, and unassigned the
		// rest
		smX := boundShares(accs, smShare, d.Activity.SMActive, busyOf)
		memX := boundShares(accs, memShare, d.Activity.DRAMActive, memBusyOf)
		if smX > 0 || memX > 0 {
			i := slices.IndexFunc(accs, func(a *tenantAcc) bool { return a.tenant == Unassigned })
			if i < 0 {
				i = len(accs)
				accs = append(accs, perTenant.get(Unassigned, ""))
				smShare, memShare = append(smShare, 0), append(memShare, 0)
			}
			smShare[i] += smX
			memShare[i] += memX
		}
	}
	out := make([]Usage, 0, len(accs))
	// the usages' figures, at most five a tenant
	fs := make(floats, 0, 5*len(accs))
	for i, a := range accs {
		u := b.newUsage(compiled, d, a, Apportioned)
		switch {
		case a.busyN > 0:
			u.KernelBusy = fs.ptr(clamp01(a.busy))
		case d.NoProcessSamples && a.ctxN > 0:
			// no process sample over the interval and the GPU's own
			// utilization 0: none of its contexts ran a kernel, 0 known
			// (not absent: the series would come and go with the load)
			u.KernelBusy = fs.ptr(0)
		}
		u.SMActive = fs.scaled(d.Activity.SMActive, smShare[i])
		u.DRAMActive = fs.scaled(d.Activity.DRAMActive, memShare[i])
		if a.reserveN > 0 {
			u.Reservation = fs.ptr(min(1, a.reserve))
		}
		if csKnown {
			u.ContextSwitchesTotal = fs.ptr(b.addCS(d.UUID, a.tenant, csDelta*smShare[i]))
		}
		out = append(out, u)
		if a.listed > 0 {
			// it holds the device through processes of its list: carried
			// forward while the next sample's list is refused
			if sd.tenancy.shared == nil {
				sd.tenancy.shared = map[string]sharedHeld{}
			}
			h := sharedHeld{sm: smShare[i], dram: memShare[i]}
			if a.unread {
				// the parts it had when it was read: weighed against
				// those read sample after sample, they do not wane
				h = *a.carried
			}
			sd.tenancy.shared[a.tenant] = h
		}
	}
	return out
}

// smOf and memOf are a tenant's footprint-weighted kernel-busy and
// memory-busy samples; busyOf and memBusyOf its plain ones.
func smOf(a *tenantAcc) (float64, bool)      { return a.smW, a.busyN > 0 }
func memOf(a *tenantAcc) (float64, bool)     { return a.memW, a.memBusyN > 0 }
func busyOf(a *tenantAcc) (float64, bool)    { return a.busy, a.busyN > 0 }
func memBusyOf(a *tenantAcc) (float64, bool) { return a.memBusy, a.memBusyN > 0 }

// deviceActive says whether d did anything in the sample: SM or DRAM
// activity, or context switches.
func deviceActive(d *gpu.Device, csDelta float64) bool {
	return active(d.Activity) || csDelta > 0
}

// active says whether a device or MIG instance had SM or DRAM activity.
func active(a gpu.Activity) bool {
	pos := func(p *float64) bool { return p != nil && *p > 0 }
	return pos(a.SMActive) || pos(a.DRAMActive)
}

// contextSwitchDelta is the device's context switches since the previous
// sample (0 on the first; after a counter reset, the new value).
func (b *Builder) contextSwitchDelta(d *gpu.Device) (float64, bool) {
	if d.ContextSwitchesTotal == nil {
		return 0, false
	}
	cur := *d.ContextSwitchesTotal
	prev, ok := b.attr.prevCS[d.UUID]
	b.attr.prevCS[d.UUID] = cur
	switch {
	case !ok:
		return 0, true
	case cur < prev:
		return float64(cur), true
	}
	return float64(cur - prev), true
}

// migContextSwitches moves the baseline of d's context switches on in MIG
// mode, where they are no tenant's (not counted per instance): the
// switches of its MIG period are not the first whole-GPU sample's after
// it. A counter not read leaves no baseline.
func (b *Builder) migContextSwitches(d *gpu.Device) {
	if d.ContextSwitchesTotal == nil {
		delete(b.attr.prevCS, d.UUID)
		return
	}
	b.attr.prevCS[d.UUID] = *d.ContextSwitchesTotal
}

// addCS adds n (not negative) to the tenant's accumulated context
// switches on the device and returns the new total; the total never
// decreases. A total is kept from the first count served, 0 too, so that
// a tenant that leaves keeps the series it was served
// (KeptContextSwitches).
func (b *Builder) addCS(uuid, tenant string, n float64) float64 {
	k := csKey{uuid, tenant}
	b.attr.csAcc[k] += n
	return b.attr.csAcc[k]
}

func sortedAccs(perTenant *devAcc) []*tenantAcc {
	out := make([]*tenantAcc, 0, len(perTenant.byTenant))
	for _, a := range perTenant.byTenant {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *tenantAcc) int { return strings.Compare(a.tenant, b.tenant) })
	return out
}

// shareBy returns each tenant's share (adding up to 1) of a per-tenant
// weight, by index in accs; when the weight is unknown or zero for all, it
// falls back to the share of kernel-busy time, then memory-busy time, then
// used memory (only where every tenant's is known: an unknown is not
// weighted as none), then process count (equal per process).
func shareBy(accs []*tenantAcc, f func(*tenantAcc) (float64, bool)) []float64 {
	memKnown := !slices.ContainsFunc(accs, func(a *tenantAcc) bool { return !a.memKnown() })
	chain := []func(*tenantAcc) (float64, bool){
		f,
		func(a *tenantAcc) (float64, bool) { return a.busy, a.busyN > 0 },
		func(a *tenantAcc) (float64, bool) { return a.memBusy, a.memBusyN > 0 },
		func(a *tenantAcc) (float64, bool) { return float64(a.memBytes), memKnown && a.memBytesN > 0 },
		func(a *tenantAcc) (float64, bool) { return float64(a.procs), true },
	}
	for _, g := range chain {
		total := 0.0
		for _, a := range accs {
			if v, ok := g(a); ok && v > 0 {
				total += v
			}
		}
		if total <= 0 {
			continue
		}
		w := make([]float64, len(accs))
		for i, a := range accs {
			if v, ok := g(a); ok && v > 0 {
				w[i] = v / total
			}
		}
		return w
	}
	w := make([]float64, len(accs))
	for i := range accs {
		w[i] = 1 / float64(len(accs))
	}
	return w
}

// floats hands out pointers to figures, many from one allocation: a
// figure is appended and never changed, so a pointer stays good when a
// later append moves on to a new array.
type floats []float64

// ptr returns a pointer to v.
func (f *floats) ptr(v float64) *float64 {
	*f = append(*f, v)
	return &(*f)[len(*f)-1]
}

// scaled returns *p times w, nil when p is.
func (f *floats) scaled(p *float64, w float64) *float64 {
	if p == nil {
		return nil
	}
	return f.ptr(*p * w)
}

func clamp01(v float64) float64 {
	if v < 0 {
		v = 0
	}
	if v > 1 {
		v = 1
	}
	return v
}
