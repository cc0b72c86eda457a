package tenant

import (
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A device's figures (SM and DRAM active, context switches) cover the
// interval since the previous sample, while its processes are those of
// the sample's instant. Who ran in the interval is who had processes at
// either end, so each sample keeps, per device, what the next one needs
// of it: the contexts of a shared device, the tenants of each MIG
// instance and what they held (docs/tenants.md, "Tenants that come and
// go").

// devKey is a device by index and UUID: devices that share a UUID (a
// backend's error) keep apart.
type devKey struct {
	index int
	uuid  string
}

// migHeld is a tenant's hold on a MIG instance at one sample.
type migHeld struct {
	memBytes uint64
	memKnown bool
	procs    int
}

// sharedHeld is a tenant's parts of a shared device's SM and DRAM
// activity at one sample, where it held the device through processes of
// its process lists.
type sharedHeld struct {
	sm, dram float64
}

// heldProc is a process of a shared device's process lists (not inside a
// VM) at one sample: its tenant, whether it came from the MPS clients'
// list (else the compute list), and what it reserves as an MPS client
// (0: nothing).
type heldProc struct {
	tenant  string
	mps     bool
	reserve float64
}

// devTenancy is one sample's tenancy of a device.
type devTenancy struct {
	// ctxs are the contexts (process PIDs, vGPU instances) of a shared
	// device
	ctxs map[uint64]bool
	// shared are the tenants holding a shared device through processes
	// of its process list (or carried forward while it is refused)
	shared map[string]sharedHeld
	// procs are a shared device's processes of its lists by PID, read or
	// carried forward (carryShared)
	procs map[uint32]heldProc
	// computeSince and mpsSince are, while a shared device's compute
	// list (MPS clients' list) is refused, the time of the first sample
	// that refused it; zero while it is read
	computeSince, mpsSince time.Time
	// mig are the tenants holding each MIG instance (by instance UUID):
	// those with processes in it and a selector's tenant of an idle one
	mig map[string]map[string]migHeld
	// migSince is, by instance UUID, the time of the first sample that
	// refused the process list of a MIG instance that refuses it
	migSince map[string]time.Time
}

// intervalState is the previous sample's tenancy and the current one's.
// Each device has two tenancies that the samples fill in turn (pool, gen),
// their maps cleared and kept: a sample allocates nothing for a device
// it has seen before.
type intervalState struct {
	at        time.Time // the readings cur is of
	prev, cur map[devKey]*devTenancy
	pool      map[devKey]*[2]devTenancy
	gen       int // the one of each device's two tenancies cur fills
}

// begin starts the tenancy of readings at t; a rebuild of the same
// readings keeps the previous sample's, so that it gives the same figures.
// A device missing from a sample (down, or gone) has no previous tenancy
// in the next, whose figures are then judged by its own processes only.
func (s *intervalState) begin(t time.Time) {
	if s.cur == nil || !t.Equal(s.at) {
		s.prev, s.cur, s.at = s.cur, s.prev, t
		s.gen ^= 1 // the other tenancy of each device: prev holds this one
	}
	if s.cur == nil {
		s.cur = map[devKey]*devTenancy{}
	}
	clear(s.cur)
}

// device returns d's tenancy in the previous sample (nil when d was not
// in it) and its tenancy in this one, to fill (its maps empty; nil until
// first made).
func (s *intervalState) device(d *gpu.Device) (prev, cur *devTenancy) {
	k := devKey{d.Index, d.UUID}
	if s.pool == nil {
		s.pool = map[devKey]*[2]devTenancy{}
	}
	p := s.pool[k]
	if p == nil {
		p = new([2]devTenancy)
		s.pool[k] = p
	}
	cur = &p[s.gen]
	clear(cur.ctxs)
	clear(cur.shared)
	clear(cur.procs)
	cur.computeSince, cur.mpsSince = time.Time{}, time.Time{}
	clear(cur.mig)
	clear(cur.migSince)
	s.cur[k] = cur
	return s.prev[k], cur
}

// departed says whether a context of prev is not in cur (the contexts
// of this sample): a process (or VM) left the device during the interval.
func (prev *devTenancy) departed(cur map[uint64]bool) bool {
	if prev == nil {
		return false
	}
	for id := range prev.ctxs {
		if !cur[id] {
			return true
		}
	}
	return false
}

// instance returns the tenants of MIG instance uuid in prev; known is
// false when prev has no record of the device.
func (prev *devTenancy) instance(uuid string) (held map[string]migHeld, known bool) {
	if prev == nil {
		return nil, false
	}
	return prev.mig[uuid], true
}

// boundShares caps, for an interval in which a context left the device
// (or one listed at neither end was active), each tenant's share of a
// device figure dev (fractions by index in accs) at what its own samples
// allow: own(a) is the fraction of the interval it had a kernel running
// (memory traffic), and it cannot have had more of the device's activity
// than that. A tenant without a sample allows nothing where others have
// one; where none has one the shares are left as the fallback rule made
// them. It returns the fractions taken off, the departed contexts' part,
// which the readings do not say whose it was.
func boundShares(accs []*tenantAcc, share []float64, dev *float64, own func(*tenantAcc) (float64, bool)) float64 {
	if dev == nil || *dev <= 0 {
		return 0
	}
	anySample := false
	for _, a := range accs {
		_, ok := own(a)
		anySample = anySample || ok
	}
	if !anySample {
		return 0
	}
	var taken float64
	for i, a := range accs {
		if a.tenant == Unassigned {
			continue // it is given what is taken
		}
		v, _ := own(a) // 0 without a sample
		// relative slack: rounding does not make a one-sample series
		if lim := clamp01(v) / *dev; share[i] > lim*(1+1e-9)+1e-12 {
			taken += share[i] - lim
			share[i] = lim
		}
	}
	return taken
}

// intervalWeights are the tenants' weights in a MIG instance shared over
// an interval: the memory each held, the mean of the interval's two ends
// (a tenant that left holds none at its end, one that came none at its
// start), or where the memory of a tenant's processes at either end is
// not known (an unknown is not weighted as none) the mean number of its
// processes; cur and prev are this sample's holds and the previous one's
// (known false: none, when the interval's start is unknown and its end
// stands for it). A tenant without a hold holds nothing (it came, or
// left).
func intervalWeights(accs []*tenantAcc, cur, prev map[string]migHeld, known bool) []float64 {
	mem, procs := make([]float64, len(accs)), make([]float64, len(accs))
	memKnown := true
	for i, a := range accs {
		c, cok := cur[a.tenant]
		p, pok := prev[a.tenant]
		if !known {
			p, pok = c, cok
		}
		mem[i] = (float64(c.memBytes) + float64(p.memBytes)) / 2
		procs[i] = float64(c.procs+p.procs) / 2
		memKnown = memKnown && (!cok || c.memKnown) && (!pok || p.memKnown)
	}
	if w, ok := normalized(mem); ok && memKnown {
		return w
	}
	if w, ok := normalized(procs); ok {
		return w
	}
	w := make([]float64, len(accs))
	for i := range w {
		w[i] = 1 / float64(len(accs))
	}
	return w
}

// normalized returns v over its sum; false when the sum is not positive.
func normalized(v []float64) ([]float64, bool) {
	var sum float64
	for _, x := range v {
		sum += x
	}
	if sum <= 0 {
		return nil, false
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x / sum
	}
	return out, true
}
