package sim

import "math"

// runMPS runs every client concurrently, each capped at its active-thread
// fraction. Oversubscribed SMs are shared by what each client's kernels
// occupy; HBM bandwidth in proportion to demand, less the contention loss
// of co-located bandwidth-bound clients (docs/calibration.md, MPS).
func (d *domain) runMPS(s *Simulator, t, t1 int64, clockFactor float64) {
	peak := d.g.peakBW() * d.bwFrac
	for t < t1 {
		if t >= d.due || t > d.expiry {
			d.due = d.boundary(s, t)
		}
		end := min(d.due, t1) // until d.due only the running clients change
		d.act = d.act[:0]
		for _, m := range d.members {
			if !m.wants(t) || (!m.job.active && !m.startJob(t)) {
				if f := m.frozenTill(t); f > 0 && m.alive {
					d.due, end = min(d.due, f), min(end, f) // paused until f
				}
				continue
			}
			if m.pause > t {
				d.due = min(d.due, m.pause) // as boundary would see it
			}
			if !m.wants(t) {
				// the job's host phase (LLM iteration overhead), which
				// boundary did not see yet
				end = min(end, max(m.pause, t+1))
				continue
			}
			d.addAct(m)
		}
		if len(d.act) == 0 {
			t = end
			continue
		}
		if !d.mpsCached(clockFactor, peak) {
			d.allocMPS(clockFactor, peak)
		}
		for _, m := range d.act {
			m.left = int64(math.Ceil(m.job.rem * m.jobSeconds * 1e9))
			end = min(end, t+m.left)
		}
		dt := end - t
		d.busyOver(t, end)
		for _, m := range d.act {
			done := t+m.left <= end
			if m.draining {
				d.due = end // its drain may end with the job: look at everything again
			}
			d.progress(s, m, dt, m.jobSeconds, m.share, done, end)
		}
		t = end
	}
}

// addAct appends m to the running clients, over the same client left
// there by the previous segment without writing it again: a pointer's
// write costs a write barrier while the collector marks.
func (d *domain) addAct(m *tenant) {
	n := len(d.act)
	if n < cap(d.act) {
		d.act = d.act[:n+1]
		if d.act[n] != m {
			d.act[n] = m
		}
		return
	}
	d.act = append(d.act, m)
}

// mpsClient is a running MPS client as its allocation saw it: its job
// (by sequence number) and its SM cap.
type mpsClient struct {
	t      *tenant
	jobSeq uint64
	cap    float64
}

// bwOf is what an MPS client's capC, capW and bw were worked out for: its
// domain, job, SM share, clock and the domain's peak bandwidth.
type bwOf struct {
	d                        *domain
	seq                      uint64
	share, clockFactor, peak float64
}

// mpsKey is what an MPS allocation depends on besides the clients' jobs.
type mpsKey struct {
	clockFactor, peak, warm float64
}

// mpsCached says whether the running clients' shares and job times of the
// previous segment hold for this one: the same clients with the same jobs
// and caps at the same clock and bandwidth. It records this segment's
// clients for the next.
func (d *domain) mpsCached(clockFactor, peak float64) bool {
	key := mpsKey{clockFactor, peak, d.warm}
	same := key == d.mpsKey && len(d.act) == len(d.mpsPrev)
	for i, m := range d.act {
		p := mpsClient{m, m.jobSeq, min(m.w.SMFraction, m.mpsEff)}
		switch {
		case i >= len(d.mpsPrev):
			d.mpsPrev = append(d.mpsPrev, p)
		case p != d.mpsPrev[i]:
			// (written only when changed: a pointer's write costs a write
			// barrier while the collector marks)
			same = false
			d.mpsPrev[i] = p
		}
	}
	d.mpsPrev = d.mpsPrev[:len(d.act)]
	d.mpsKey = key
	return same
}

// allocMPS sets each running client's SM share, bandwidth and job time.
func (d *domain) allocMPS(clockFactor, peak float64) {
	capSum := 0.0
	for _, m := range d.act {
		m.share = min(m.w.SMFraction, m.mpsEff)
		capSum += m.share
	}
	if capSum > 1 {
		d.shareSMs()
	}
	if d.warm > 0 {
		d.yieldToWarmup()
	}
	demand, top := 0.0, 0.0
	for _, m := range d.act {
		// capC, capW and bw change only with these (field by field: a key
		// struct costs more than it saves here)
		if c := &m.bwOf; c.d != d || c.seq != m.jobSeq || c.share != m.share || c.clockFactor != clockFactor || c.peak != peak {
			m.capC, m.capW = d.capacity(m.share, clockFactor)
			m.bw = m.job.bytes / jobTime(&m.job, m.capC, m.capW, 1)
			if c.d != d {
				c.d = d // (a pointer: written only when changed)
			}
			c.seq, c.share, c.clockFactor, c.peak = m.jobSeq, m.share, clockFactor, peak
		}
		demand += m.bw
		top = max(top, m.bw)
	}
	avail := peak
	if len(d.act) > 1 && demand > 0 {
		// contention: the more of the demand comes from clients other
		// than the largest, and the nearer the peak, the more is lost
		c := min(mpsContentionCap, (demand-top)/demand)
		avail = peak * (1 - mpsContention*c*min(1, demand/peak))
	}
	for _, m := range d.act {
		sigma := *m.w.ServiceNoise
		if len(d.act) > 1 {
			sigma += mpsTailSigma * min(1, (demand-m.bw)/peak)
		}
		w := m.capW
		if demand > avail {
			w = avail * m.bw / demand
		}
		m.jobSeconds = jobTime(&m.job, m.capC, w, m.job.noise(sigma))
	}
}

// shareSMs divides the domain's SMs among the running clients when their
// caps sum over 1: in proportion to what each client's kernels occupy (its
// SM cap times its occupancy), none beyond its cap; what a capped client
// leaves goes to the others.
func (d *domain) shareSMs() {
	left := 1.0
	for _, m := range d.act {
		m.fixed = false
	}
	for range d.act {
		wsum := 0.0
		for _, m := range d.act {
			if !m.fixed {
				wsum += m.share * m.w.Occupancy
			}
		}
		capped := false
		for _, m := range d.act {
			if !m.fixed && left*m.w.Occupancy >= wsum {
				m.fixed, capped = true, true
				left -= m.share
			}
		}
		if !capped {
			for _, m := range d.act {
				if !m.fixed {
					m.share = left * m.share * m.w.Occupancy / wsum
				}
			}
			return
		}
	}
}
