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
		// the running clients as their allocation sees them, against the
		// previous segment's (mpsPrev): the same clients with the same jobs
		// and caps at the same clock and bandwidth keep their shares and
		// job times
		same, capSum := true, 0.0
		for i, m := range d.members {
			// (a plain client past its pause with its job in flight runs:
			// it wants to, as wants would say)
			if !m.job.active || !m.alive || t < m.pause || m.duty > 0 || m.draining {
				if !m.wants(t) || (!m.job.active && !m.startJob(t)) {
					if f := m.frozenTill(t); f > 0 && m.alive {
						d.due, end = min(d.due, f), min(end, f) // paused until f
					}
					continue
				}
				if m.pause > t {
					// the job just started has a host phase first (LLM
					// iteration overhead), which boundary did not see
					// yet; a client that wants to run is otherwise past
					// its pause
					d.due, end = min(d.due, m.pause), min(end, m.pause)
					continue
				}
			}
			n := len(d.act)
			d.act = append(d.act, int32(i))
			c := mpsClient{m.idx, m.jobSeq, m.mpsCap}
			capSum += c.cap
			switch {
			case n >= len(d.mpsPrev):
				same = false
				d.mpsPrev = append(d.mpsPrev, c)
			case c != d.mpsPrev[n]:
				same = false
				d.mpsPrev[n] = c
			}
		}
		if len(d.act) == 0 {
			if d.warm > 0 {
				d.busyOver(t, end)
				d.warmOver(end-t, d.warm)
			}
			t = end
			continue
		}
		if key := (mpsKey{clockFactor, peak, d.warm}); !same || key != d.mpsKey || len(d.act) != len(d.mpsPrev) {
			d.mpsPrev = d.mpsPrev[:len(d.act)]
			d.mpsKey = key
			d.allocMPS(clockFactor, peak, capSum)
		}
		for _, k := range d.act {
			m := d.members[k]
			m.left = int64(math.Ceil(m.job.rem * m.jobSeconds * 1e9))
			end = min(end, t+m.left)
		}
		dt := end - t
		d.busyOver(t, end)
		if d.warm > 0 {
			d.warmOver(dt, d.warmOn)
		}
		for _, k := range d.act {
			m := d.members[k]
			done := t+m.left <= end
			if m.draining {
				d.due = end // its drain may end with the job: look at everything again
			}
			d.progress(s, m, dt, m.jobSeconds, m.share, done, end)
		}
		t = end
	}
}

// mpsClient is a running MPS client as its allocation saw it (runMPS
// compares the running clients with the previous segment's): the tenant
// (by index), its job (by sequence number) and its SM cap. (It holds no
// pointer: a pointer's write costs a write barrier while the collector
// marks.)
type mpsClient struct {
	t      int
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

// allocMPS sets each running client's SM share, bandwidth and job time;
// capSum is the sum of the clients' caps (d.mpsPrev).
//
// (Plain comparisons stand for the built-in min and max below: every
// figure is finite and not negative, and their care for NaN and signed
// zeros costs on this path.)
func (d *domain) allocMPS(clockFactor, peak, capSum float64) {
	// the caps are the shares unless they oversubscribe the SMs or warming
	// standbys take some
	capped := capSum > 1 || d.warm > 0
	if capped {
		for i, k := range d.act {
			d.members[k].share = d.mpsPrev[i].cap
		}
		if capSum > 1 {
			d.shareSMs()
		}
		if d.warm > 0 {
			d.yieldToWarmup()
		}
	}
	demand, top := 0.0, 0.0
	for i, k := range d.act {
		m := d.members[k]
		if !capped {
			m.share = d.mpsPrev[i].cap
		}
		// capC, capW and bw change only with these (field by field: a key
		// struct costs more than it saves here)
		if c := &m.bwOf; c.d != d || c.seq != m.jobSeq || c.share != m.share || c.clockFactor != clockFactor || c.peak != peak {
			m.capC, m.capW = d.capacity(m.share, clockFactor)
			m.tc, m.tw = jobTimes(&m.job, m.capC, m.capW)
			m.bw = m.job.bytes / rooflineTime(&m.job, m.tc, m.tw, 1)
			if c.d != d {
				c.d = d // (a pointer: written only when changed)
			}
			c.seq, c.share, c.clockFactor, c.peak = m.jobSeq, m.share, clockFactor, peak
		}
		demand += m.bw
		if m.bw > top {
			top = m.bw
		}
	}
	avail := peak
	if len(d.act) > 1 && demand > 0 {
		// contention: the more of the demand comes from clients other
		// than the largest, and the nearer the peak, the more is lost
		c := min(mpsContentionCap, (demand-top)/demand)
		avail = peak * (1 - mpsContention*c*min(1, demand/peak))
	}
	for _, k := range d.act {
		m := d.members[k]
		sigma := *m.w.ServiceNoise
		if len(d.act) > 1 {
			f := (demand - m.bw) / peak
			if f > 1 {
				f = 1
			}
			sigma += mpsTailSigma * f
		}
		tw := m.tw
		if demand > avail {
			tw = m.job.bytes / (avail * m.bw / demand)
		}
		m.jobSeconds = rooflineTime(&m.job, m.tc, tw, m.job.noise(sigma))
	}
}

// shareSMs divides the domain's SMs among the running clients when their
// caps sum over 1: in proportion to what each client's kernels occupy (its
// SM cap times its occupancy), none beyond its cap; what a capped client
// leaves goes to the others.
func (d *domain) shareSMs() {
	left := 1.0
	for _, k := range d.act {
		m := d.members[k]
		m.fixed = false
	}
	for range d.act {
		wsum := 0.0
		for _, k := range d.act {
			m := d.members[k]
			if !m.fixed {
				wsum += m.share * m.w.Occupancy
			}
		}
		capped := false
		for _, k := range d.act {
			m := d.members[k]
			if !m.fixed && left*m.w.Occupancy >= wsum {
				m.fixed, capped = true, true
				left -= m.share
			}
		}
		if !capped {
			for _, k := range d.act {
				m := d.members[k]
				if !m.fixed {
					m.share = left * m.share * m.w.Occupancy / wsum
				}
			}
			return
		}
	}
}
