package tenant

import (
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A refused process list is not an empty one: who runs there is not
// known, and the processes it held at the sample before are not known to
// have left. A shared device keeps, each sample, which list each of its
// processes came from (devTenancy.procs), so that a process is carried
// forward only while the list that would hold it is refused; one missing
// from a list that was read has left (docs/tenants-come-and-go.md).

// refusedSince is when the list a shared device refuses at t began to be
// refused: the time the sample before gave (prev, zero: read then), else t.
func refusedSince(unread bool, prev, t time.Time) time.Time {
	switch {
	case !unread:
		return time.Time{}
	case !prev.IsZero():
		return prev
	}
	return t
}

// carryShared carries forward, into sd, the processes of d's sample
// before whose list (an MPS client's: the MPS clients'; any other's: the
// compute list) is refused and which are not read now, with their MPS
// reservations, their memory not known; none is carried once its list has
// been refused for longer than the departed retention (not 0). While any
// is, the parts of the sample before of its tenants are split by their
// processes of that sample: a tenant's part in the fraction of them that
// is carried is carried with it (tenantAcc.carried; a tenant none of whose
// processes or VMs is read now is unread), and the part in the fraction
// that left (missing from a list that was read, or read now as another
// tenant's) is sd.gone, with the parts of the tenants none of whose
// processes is left. The part of the processes read now is not carried:
// those read weigh what their own samples allow.
func (b *Builder) carryShared(sd *sharedDevice, prevT *devTenancy) {
	keep := b.departed.keep
	d, curT, perTenant := sd.d, sd.tenancy, sd.perTenant
	t := b.attr.interval.at
	var prevCompute, prevMPS time.Time
	if prevT != nil {
		prevCompute, prevMPS = prevT.computeSince, prevT.mpsSince
	}
	curT.computeSince = refusedSince(d.ProcessesUnread, prevCompute, t)
	curT.mpsSince = refusedSince(d.MPSProcessesUnread, prevMPS, t)
	if prevT == nil {
		return
	}
	carry := func(since time.Time) bool { return !since.IsZero() && carrying(since, t, keep) }
	carryCompute, carryMPS := carry(curT.computeSince), carry(curT.mpsSince)
	// each tenant's processes of the sample before: how many, how many of
	// them are carried, and how many left
	type held struct{ all, carried, gone int }
	byTenant := make(map[string]*held, len(prevT.shared))
	for pid, h := range prevT.procs {
		n := byTenant[h.tenant]
		if n == nil {
			n = &held{}
			byTenant[h.tenant] = n
		}
		n.all++
		if now, ok := curT.procs[pid]; ok {
			if now.tenant != h.tenant {
				n.gone++ // its PID read as another tenant's
			}
			continue // read now
		}
		if h.mps && !carryMPS || !h.mps && !carryCompute {
			n.gone++ // known gone: its list was read
			continue
		}
		n.carried++
		_, read := perTenant.byTenant[accKey{"", h.tenant}]
		a := perTenant.get(h.tenant, "")
		a.unread = a.unread || !read
		a.procs++
		a.listed++
		a.memUnknown++
		if h.reserve > 0 {
			a.addReserve(h.reserve)
		}
		curT.procs[pid] = h
		curT.ctxs[uint64(pid)] = true
		sd.carried = true
	}
	if !sd.carried {
		return
	}
	for tn, n := range byTenant {
		if n.carried == 0 {
			continue
		}
		part := prevT.shared[tn]
		f := float64(n.carried) / float64(n.all)
		perTenant.get(tn, "").carried = &sharedHeld{sm: f * part.sm, dram: f * part.dram}
	}
	for tn, h := range prevT.shared {
		f := 1.0 // none of its processes left
		if n := byTenant[tn]; n != nil {
			f = float64(n.gone) / float64(n.all)
		}
		sd.gone.sm += f * h.sm
		sd.gone.dram += f * h.dram
	}
}

// carriedPart is, by f (a figure of a hold), a tenant's part carried
// forward on sd and whether it has one: its carried part, and
// unassigned's besides the parts of the processes that left (sd.gone).
func (sd *sharedDevice) carriedPart(f func(*sharedHeld) float64) func(*tenantAcc) (float64, bool) {
	gone := sd.gone.sm > 0 || sd.gone.dram > 0
	return func(a *tenantAcc) (float64, bool) {
		var v float64
		if a.carried != nil {
			v = f(a.carried)
		}
		if a.tenant == Unassigned && gone {
			return v + f(&sd.gone), true
		}
		return v, a.carried != nil
	}
}

// carryMIG records that MIG instance uuid refuses its process list and
// says whether its holders of the sample before are carried forward: not
// once the list has been refused for longer than the departed retention
// (not 0).
func (b *Builder) carryMIG(prevT, curT *devTenancy, uuid string) bool {
	var prev time.Time
	if prevT != nil {
		prev = prevT.migSince[uuid]
	}
	if curT.migSince == nil {
		curT.migSince = map[string]time.Time{}
	}
	t := b.attr.interval.at
	since := refusedSince(true, prev, t)
	curT.migSince[uuid] = since
	return carrying(since, t, b.departed.keep)
}

// carrying says whether a list refused since since is carried at t: for
// at most keep (--tenants.departed-retention; 0: no bound).
func carrying(since, t time.Time, keep time.Duration) bool {
	return keep <= 0 || t.Sub(since) <= keep
}

// carriedShares are the tenants' shares of a shared device's figure dev
// while a process list is refused (by index in accs, adding up to 1). A
// tenant's part carried forward (part, ok: it has one) weighs that part
// of the sample before; a tenant read (not tenantAcc.unread, one with a
// part carried too) weighs besides what its own samples allow, the
// fraction of the interval it had a kernel running (memory traffic: own)
// over dev, at most all of it, and nothing without a sample where others
// have one. Where no tenant read has a sample (or dev is not known),
// those read split what the carried parts leave by share, their shares by
// the usual rule. Where the weights add up to 1 or more the shares are
// the weights over their sum; where they add up to less, each tenant read
// gets its weight and the carried parts split the rest in proportion
// (equally where none weighs): no tenant read gets more than its own
// samples allow.
func carriedShares(accs []*tenantAcc, share []float64, dev *float64, own func(*tenantAcc) (float64, bool), part func(*tenantAcc) (float64, bool)) []float64 {
	read, kept := make([]float64, len(accs)), make([]float64, len(accs))
	carried := make([]bool, len(accs))
	var sumKept, rest float64
	n, sampled := 0, false
	for i, a := range accs {
		if v, ok := part(a); ok {
			kept[i], carried[i] = v, true
			sumKept += v
			n++
		}
		if a.unread {
			continue
		}
		rest += share[i]
		_, ok := own(a)
		sampled = sampled || ok
	}
	var sumRead float64
	for i, a := range accs {
		switch {
		case a.unread:
		case sampled && dev != nil && *dev > 0:
			v, _ := own(a) // 0 without a sample
			read[i] = min(1, clamp01(v) / *dev)
		case sumKept < 1 && rest > 0:
			read[i] = share[i] / rest * (1 - sumKept)
		}
		sumRead += read[i]
	}
	if n == 0 {
		if out, ok := normalized(read); ok {
			return out
		}
		return share
	}
	out := make([]float64, len(accs))
	if total := sumRead + sumKept; total >= 1 {
		for i := range out {
			out[i] = (read[i] + kept[i]) / total
		}
		return out
	}
	left := 1 - sumRead
	for i := range out {
		out[i] = read[i]
		switch {
		case sumKept > 0:
			out[i] += kept[i] / sumKept * left
		case carried[i]:
			out[i] += left / float64(n)
		}
	}
	return out
}

// forget drops, from both tenancies of every device, the holders the
// tenant predicate says to (a tenant a reload removed), so that none is
// carried forward under a name the tenants file no longer has.
func (s *intervalState) forget(drop func(tenant string) bool) {
	for _, p := range s.pool {
		for i := range p {
			t := &p[i]
			for tn := range t.shared {
				if drop(tn) {
					delete(t.shared, tn)
				}
			}
			for pid, h := range t.procs {
				if drop(h.tenant) {
					delete(t.procs, pid)
				}
			}
			for _, held := range t.mig {
				for tn := range held {
					if drop(tn) {
						delete(held, tn)
					}
				}
			}
		}
	}
}

// procList is the list p came from: the MPS clients' (true), else the
// compute list.
func procList(p *gpu.Process) bool { return p.Type == gpu.ProcessMPS }
