package sim

import (
	"math"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// runSliced is time-slicing (and the vGPU scheduler): one context at a time
// owns the domain for a slice; switching costs switchCost.
func (d *domain) runSliced(s *Simulator, t, t1 int64, clockFactor float64) {
	g := d.g
	// Time-slicing and best-effort vGPU are work conserving: an idle
	// context yields at once. Equal- and fixed-share vGPU hold a VM's
	// slot for its whole length even when the VM is idle.
	vgpu := d.kind == schedVGPU
	strict := vgpu && g.vgpu.Policy != gpu.VGPUPolicyBestEffort
	for t < t1 {
		if t >= d.due || t > d.expiry {
			d.due = d.boundary(s, t)
		} else if d.cur >= 0 {
			// only the resident context can have changed (d.due)
			d.rewant(d.members[d.cur], t)
			if f := d.members[d.cur].frozenTill(t); f > 0 {
				d.due = min(d.due, f) // paused once its job ended
			}
		}
		next := min(d.due, t1)
		if d.switchEnd > t {
			e := min(next, d.switchEnd)
			d.step.switch_ += float64(e - t)
			d.busyOver(t, e)
			t = e
			continue
		}
		// who wants to run at t (m.want: pick and the preemption count
		// below read it while nothing has changed)
		busy := d.wanting
		var cur *tenant
		curWants := false
		if d.cur >= 0 {
			cur = d.members[d.cur]
			curWants = cur.want
		}
		others := busy
		if curWants {
			others--
		}
		repick := !curWants || (others > 0 && t >= d.sliceEnd)
		if vgpu && t >= d.sliceEnd {
			repick = true // a new slot (logged) even for a lone VM
		}
		if strict {
			repick = cur == nil || t >= d.sliceEnd
		}
		if repick {
			nx, slot := d.pick(t)
			if nx < 0 {
				t = next
				continue
			}
			if vgpu {
				d.logSlot(s, t)
				d.slotTarget, d.slotRun = slot, 0
			}
			if nx != d.cur {
				d.cur = nx
				d.switchEnd = t + switchCost(busy)
				d.sliceEnd = d.switchEnd + slot
				g.ctxSwitches++
				// the switch runs up to next at once (boundary at t
				// would give next again)
				e := min(next, d.switchEnd)
				d.step.switch_ += float64(e - t)
				d.busyOver(t, e)
				t = e
				if t >= next || t > d.expiry || t >= d.sliceEnd {
					continue
				}
				// Nothing changed during the switch: the new context
				// runs at once, as the next pass would have it.
				curWants = d.members[nx].want
				others = busy
				if curWants {
					others--
				}
			} else {
				d.sliceEnd = t + slot
			}
		}
		cur = d.members[d.cur]
		end := next
		if (others > 0 || vgpu) && d.sliceEnd < end {
			end = d.sliceEnd
		}
		if !cur.want {
			t = end // an idle VM's slot
			continue
		}
		if !cur.job.active && !cur.startJob(t) {
			if f := cur.frozenTill(t); f > 0 {
				// paused: the context yields like an idle one
				d.due = min(d.due, f)
				d.rewant(cur, t)
				continue
			}
			t = end
			continue
		}
		if cur.pause > t {
			d.due = min(d.due, cur.pause) // as boundary would see it
		}
		if !cur.wants(t) {
			// the job's host phase (LLM iteration overhead), which
			// boundary did not see yet: the context yields like an idle
			// one (d.due wakes it when the phase ends); a strict vGPU
			// slot stays its VM's
			d.rewant(cur, t)
			continue
		}
		share := cur.w.SMFraction
		jobSeconds := d.slicedJobTime(cur, share, clockFactor)
		ttc := int64(math.Ceil(cur.job.rem * jobSeconds * 1e9))
		done := false
		if t+ttc <= end {
			end, done = t+ttc, true
		}
		dt := end - t
		d.busyOver(t, end)
		d.slotRun += dt
		if vgpu {
			for i, m := range d.members {
				if i != d.cur && m.want {
					m.preempt += dt
				}
			}
		}
		if cur.draining {
			d.due = end // its drain may end with the job: look at everything again
		}
		d.progress(s, cur, dt, jobSeconds, share, done, end)
		t = end
	}
}

// rewant refreshes m's want at t after its own job changed its state,
// keeping d.wanting up to date.
func (d *domain) rewant(m *tenant, t int64) {
	if w := m.wants(t); w != m.want {
		m.want = w
		if w {
			d.wanting++
		} else {
			d.wanting--
		}
	}
}

// slicedJobTime is the time (s) of t's job running alone on share of the
// domain's SMs, kept with what it depends on (the domain, the job, the
// share, the SM clock and the memory clock) so that the job's later
// segments reuse it.
func (d *domain) slicedJobTime(t *tenant, share, clockFactor float64) float64 {
	c, memLock := &t.jt, d.g.memLock
	if c.d != d || c.seq != t.jobSeq || c.share != share || c.clockFactor != clockFactor || c.memLock != memLock {
		cp, w := d.capacity(share, clockFactor)
		c.d, c.seq, c.share, c.clockFactor, c.memLock = d, t.jobSeq, share, clockFactor, memLock
		c.seconds = jobTime(&t.job, cp, w, t.job.noise(*t.w.ServiceNoise))
	}
	return c.seconds
}

// pick chooses the next context round robin after the resident one and
// the length of its slot; -1 when nothing wants to run.
func (d *domain) pick(t int64) (int, int64) {
	// m.want is each member's wants(t), set by runSliced
	n := len(d.members)
	g := d.g
	if d.kind != schedVGPU {
		for k := 1; k <= n; k++ {
			if i := d.after(k); d.members[i].want {
				return i, g.slice
			}
		}
		return -1, 0
	}
	v := &g.vgpu
	if v.Policy == gpu.VGPUPolicyBestEffort && v.ARR && t >= d.arrNext {
		// Adaptive round robin observes the VMs' backlogs at its frequency;
		// between observations the slices follow the last one.
		for _, m := range d.members {
			m.arrBacklog = m.queued()
		}
		d.arrNext = t + int64(1e9/float64(v.Frequency))
	}
	if d.wanting == 0 {
		return -1, 0
	}
	for k := 1; k <= n; k++ {
		i := d.after(k)
		m := d.members[i]
		switch v.Policy {
		case gpu.VGPUPolicyBestEffort:
			if !m.want {
				continue
			}
		case gpu.VGPUPolicyEqualShare:
			if !m.alive {
				continue
			}
		}
		return i, vgpuSlot(v, m.spec.VM.Weight, m.arrBacklog)
	}
	return -1, 0
}

// vgpuSlot is the length (ns) of a VM's slot under v: the time slice;
// with adaptive round robin, longer for a VM that keeps a backlog; under
// fixed share, weight times. Slices stay within [min, max]; only fixed
// share's weighted slots may go beyond max, weight times at most. The
// product is taken in float64 and bounded before it is an int64, and a
// slot is at most maxDuration (no run is longer): a product past int64's
// range wrapped, and the heavier VM got the shortest slot.
func vgpuSlot(v *VGPUSpec, weight uint32, backlog int) int64 {
	slot, hi := float64(v.TimeSlice), float64(v.MaxTimeSlice)
	switch v.Policy {
	case gpu.VGPUPolicyBestEffort:
		if v.ARR {
			slot *= 1 + float64(backlog)/float64(v.AvgFactor)
		}
	case gpu.VGPUPolicyFixedShare:
		slot *= float64(weight)
		hi *= float64(max(1, weight))
	}
	return int64(min(max(slot, float64(v.MinTimeSlice)), hi, float64(maxDuration)))
}

// after is the index of the k-th member (1 <= k <= len(members)) after
// the resident one, round robin; from the first when none is resident.
func (d *domain) after(k int) int {
	if d.cur < 0 {
		return k - 1
	}
	i := d.cur + k
	if i >= len(d.members) {
		i -= len(d.members)
	}
	return i
}

// logSlot appends the slot that ends at t to the vGPU scheduler log. As in
// NVML's log, the entry is stamped with the time the runlist was preempted
// and names it by a software runlist ID: the tenant's index in the
// scenario, one runlist per VM.
func (d *domain) logSlot(s *Simulator, t int64) {
	if d.slotTarget == 0 || d.cur < 0 || d.cur >= len(d.members) {
		return
	}
	m := d.members[d.cur]
	g := d.g
	if len(g.schedLog) >= 2*schedLogMax {
		// keep the newest entries; compacting in bulk keeps this amortized O(1)
		n := copy(g.schedLog, g.schedLog[len(g.schedLog)-schedLogMax+1:])
		g.schedLog = g.schedLog[:n]
	}
	m.runTotal += d.slotRun
	// filled in place (a composite literal is built aside and copied,
	// which costs at every slot)
	g.schedLog = append(g.schedLog, gpu.VGPUSchedulerLogEntry{})
	e := &g.schedLog[len(g.schedLog)-1]
	e.Timestamp = s.at(t)
	e.Runlist = uint32(m.idx)
	e.RunTime = time.Duration(d.slotRun)
	e.RunTimeTotal = time.Duration(m.runTotal)
	e.TargetTimeSlice = time.Duration(d.slotTarget)
	e.CumulativePreemp = time.Duration(m.preempt)
	e.Weight = m.spec.VM.Weight
}
