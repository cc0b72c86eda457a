package sim

import "time"

// WindowStats is ground truth over a window of virtual time.
type WindowStats struct {
	Start, End time.Time
	Tenants    []TenantWindow
	GPUs       []GPUWindow
}

// TenantWindow is what one tenant got in the window.
type TenantWindow struct {
	Tenant string
	GPU    string // UUID of the GPU the tenant is on at the window's end
	// Completed requests (training: steps) and their latencies, ascending;
	// beyond 1,048,576 requests in one window, Latencies is a uniform
	// sample of that size.
	Completed int
	Latencies []time.Duration
	// SLO and the number of requests completed at or under its target.
	// Under a TTFT SLO (SLOMetric "ttft"), Latencies and Good are of the
	// requests' times to first token. Under an ITL SLO (SLOMetric "itl")
	// they are of tokens: Tokens is the number of tokens judged (every
	// token after a request's first), Latencies their inter-token
	// latencies and Good those at or under the target.
	SLOQuantile float64
	SLOTarget   time.Duration
	SLOMetric   string // "" (end to end), SLOMetricTTFT or SLOMetricITL
	Good        int
	Tokens      int
	// SMShare and BWShare are the time-averaged fractions of the device (or
	// its MIG instance) the tenant used.
	SMShare, BWShare float64
	// Work is useful work: FLOPs for inference, completed steps for training.
	Work float64
	// Redo (training) is the steps lost to restarts, counted in Work when
	// first done, that are still to be redone at the window's end: the
	// steps the job redoes are not work, so a report of the whole run
	// takes the last window's Redo from its work.
	Redo int
	OOMs int
	// Dropped counts requests rejected because the tenant's queue was full
	// (max_queue), lost when its process stopped, failed, moved or was
	// drained past the drain timeout, refused while it was stopped or
	// down after a failed restart, or
	// timed out (TimedOut of them).
	Dropped int
	// DroppedTokens (ITL SLO) counts the tokens the dropped requests will
	// never produce, each after its request's first: all but one of a
	// request dropped before its first token, the rest of one dropped
	// mid-stream; at least one a request. Each is an inter-token
	// observation missed (Ended).
	DroppedTokens int
	// TimedOut counts requests older than the client's timeout: given up
	// while waiting or running, or completed too late.
	TimedOut int
	// Overdue counts the requests still waiting or running at the window's
	// end that are already older than the SLO target (under a TTFT SLO,
	// those without a first token and the running ones whose first token
	// came later than the target; under an ITL SLO, the running requests
	// whose next token is already later than the target): whenever they
	// end, they will not be good. They are not in
	// Completed or Dropped (a later window counts them when they end); a
	// report of the whole run adds the last window's Overdue to the
	// requests that missed.
	Overdue int
}

// GPUWindow is a GPU's averages over the window.
type GPUWindow struct {
	UUID                                     string
	Index                                    int
	SMActive, DRAMActive, PowerW, SMClockMHz float64
}

// Judged is the number of observations the window's SLO judged: its
// completed requests, or under an ITL SLO its tokens.
func (tw *TenantWindow) Judged() int {
	if tw.SLOMetric == SLOMetricITL {
		return tw.Tokens
	}
	return tw.Completed
}

// Ended is the number of observations that ended in the window, good or
// not: Judged, and those of its dropped requests, which are missed. A
// dropped request is one missed observation; under an ITL SLO it misses
// every token it will never produce, at least one (DroppedTokens), as
// many as serving it late could have judged late: dropping a stream
// never looks better than serving it slowly. Attainment is Good over Ended (plus Overdue
// at the end of a run).
func (tw *TenantWindow) Ended() int {
	if tw.SLOMetric == SLOMetricITL {
		return tw.Tokens + tw.DroppedTokens
	}
	return tw.Completed + tw.Dropped
}

// Window returns ground truth since the previous Window call (or the
// start) and starts a new window.
func (s *Simulator) Window() WindowStats {
	ws := s.WindowUnsorted()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sortBuf = ws.SortLatencies(s.sortBuf)
	return ws
}

// SortLatencies sorts every tenant's Latencies ascending, as Window
// returns them; buf is scratch of any size, returned grown for the next
// call.
func (ws *WindowStats) SortLatencies(buf []time.Duration) []time.Duration {
	for i := range ws.Tenants {
		buf = sortDurations(ws.Tenants[i].Latencies, buf)
	}
	return buf
}

// ReuseLatencies hands back the latency slices of ws, a window of s the
// caller no longer reads (nor anything that shares its Latencies): later
// windows fill them instead of new ones. It may be called from any
// goroutine.
func (s *Simulator) ReuseLatencies(ws *WindowStats) {
	s.spareMu.Lock()
	defer s.spareMu.Unlock()
	if s.spare == nil {
		s.spare = make([][][]time.Duration, len(s.tenants))
	}
	for i := range min(len(ws.Tenants), len(s.spare)) {
		if l := ws.Tenants[i].Latencies; cap(l) > 0 {
			s.spare[i] = append(s.spare[i], l[:0])
		}
	}
}

// latencySlice returns an empty latency slice for tenant i with room for
// n: the latest spare handed back for i when it has the room, else a new
// one with a quarter more (the next windows may keep a few more, and its
// spare should take them).
func (s *Simulator) latencySlice(i, n int) []time.Duration {
	s.spareMu.Lock()
	defer s.spareMu.Unlock()
	if i < len(s.spare) && len(s.spare[i]) > 0 {
		sp := s.spare[i]
		l := sp[len(sp)-1]
		sp[len(sp)-1] = nil
		s.spare[i] = sp[:len(sp)-1]
		if cap(l) >= n {
			return l
		}
	}
	return make([]time.Duration, 0, n+n/4)
}

// WindowUnsorted is Window but for the order of each tenant's Latencies,
// which is the order the window kept them in (SortLatencies sorts them):
// for a caller that sorts them elsewhere, off the simulator's path.
func (s *Simulator) WindowUnsorted() WindowStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush()
	ws := WindowStats{Start: s.at(s.winStart), End: s.at(s.now)}
	secs := float64(s.now-s.winStart) / 1e9
	for i, t := range s.tenants {
		tw := TenantWindow{
			Tenant: t.spec.Name, GPU: s.gpus[t.gpu].uuid,
			Completed: t.completed, Latencies: t.lat, Good: t.good, Tokens: t.itlTokens,
			Work: t.work, OOMs: t.ooms, Dropped: t.dropped, DroppedTokens: t.droppedTokens,
			TimedOut: t.timedOut, Redo: t.redo,
		}
		if tw.Latencies == nil {
			tw.Latencies = []time.Duration{}
		}
		if t.spec.SLO != nil {
			tw.SLOQuantile, tw.SLOTarget, tw.SLOMetric = t.spec.SLO.Quantile, time.Duration(t.spec.SLO.Target), t.spec.SLO.Metric
			tw.Overdue = t.overdue(s.now)
		}
		if secs > 0 && t.dom != nil {
			tw.SMShare = t.acc[1].sm / (secs * 1e9)
			tw.BWShare = t.acc[1].bytes / (t.dom.g.m.BandwidthBS * t.dom.bwFrac * secs)
		}
		ws.Tenants = append(ws.Tenants, tw)
		// the window's slice now belongs to the caller; the next one is
		// sized like this one
		t.lat = s.latencySlice(i, len(tw.Latencies))
		t.completed, t.good, t.work, t.ooms, t.dropped, t.timedOut, t.itlTokens, t.droppedTokens = 0, 0, 0, 0, 0, 0, 0, 0
		t.acc[1] = tenantTotals{}
	}
	for _, g := range s.gpus {
		a := &g.acc[1]
		gw := GPUWindow{UUID: g.uuid, Index: g.idx}
		if a.ns > 0 {
			gw.SMActive = a.sm / a.ns
			gw.DRAMActive = a.bytes / (g.m.BandwidthBS * a.ns / 1e9)
			gw.PowerW = a.energy / (a.ns / 1e9)
			gw.SMClockMHz = a.clockNs / a.ns
		}
		ws.GPUs = append(ws.GPUs, gw)
		g.acc[1] = deviceTotals{}
		for _, d := range g.domains {
			d.acc[1] = domainTotals{}
		}
	}
	s.winStart = s.now
	return ws
}
