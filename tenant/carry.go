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
// from a list that was read has left (docs/tenants.md, "Tenants that
// come and go").

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
// been refused for longer than the departed retention (not 0). A tenant none of whose
// processes (or VMs) is read now is carried with its parts of the sample
// before (tenantAcc.carried); sd.gone are the parts of the tenants of the
// sample before that neither read nor carried processes hold now: they
// left.
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
	carry := func(since time.Time) bool {
		return !since.IsZero() && (keep <= 0 || t.Sub(since) <= keep)
	}
	carryCompute, carryMPS := carry(curT.computeSince), carry(curT.mpsSince)
	read := make(map[string]bool, len(perTenant.byTenant))
	for k := range perTenant.byTenant {
		read[k.tenant] = true
	}
	for pid, h := range prevT.procs {
		if _, ok := curT.procs[pid]; ok || h.mps && !carryMPS || !h.mps && !carryCompute {
			continue // read now, or known gone: its list was read
		}
		a := perTenant.get(h.tenant, "")
		a.procs++
		a.listed++
		a.memUnknown++
		if h.reserved {
			a.addReserve(h.reserve)
		}
		curT.procs[pid] = h
		curT.ctxs[uint64(pid)] = true
		sd.carried = true
		if !read[h.tenant] && a.carried == nil {
			part := prevT.shared[h.tenant]
			a.carried = &part
		}
	}
	if !sd.carried {
		return
	}
	for tn, h := range prevT.shared {
		if _, ok := perTenant.byTenant[accKey{"", tn}]; !ok {
			sd.gone.sm += h.sm
			sd.gone.dram += h.dram
		}
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
	return b.departed.keep <= 0 || t.Sub(since) <= b.departed.keep
}

// carriedShares are the tenants' shares of a shared device's figure dev
// while a process list is refused (by index in accs, adding up to 1): a
// tenant carried forward weighs its part of the sample before (part), a
// tenant read weighs what its own samples allow, the fraction of the
// interval it had a kernel running (memory traffic: own) over dev, at
// most all of it, and a tenant read without a sample nothing where others
// have one; the shares are the weights over their sum. Where no tenant
// read has a sample (or dev is not known), those read split what the
// carried parts leave by share, their shares by the usual rule. Where
// nothing weighs, the carried tenants split the figure equally.
func carriedShares(accs []*tenantAcc, share []float64, dev *float64, own func(*tenantAcc) (float64, bool), part func(*sharedHeld) float64) []float64 {
	w := make([]float64, len(accs))
	var kept, rest float64
	n, sampled := 0, false
	for i, a := range accs {
		if a.carried != nil {
			w[i] = part(a.carried)
			kept += w[i]
			n++
			continue
		}
		rest += share[i]
		_, ok := own(a)
		sampled = sampled || ok
	}
	for i, a := range accs {
		switch {
		case a.carried != nil:
		case sampled && dev != nil && *dev > 0:
			v, _ := own(a) // 0 without a sample
			w[i] = min(1, clamp01(v) / *dev)
		case kept < 1 && rest > 0:
			w[i] = share[i] / rest * (1 - kept)
		}
	}
	if out, ok := normalized(w); ok || n == 0 {
		if !ok {
			return share
		}
		return out
	}
	for i, a := range accs {
		if a.carried != nil {
			w[i] = 1 / float64(n)
		}
	}
	return w
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
