package tenant

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// RunlistCount is the cumulative vGPU scheduler log of one software
// runlist of one GPU since the exporter first saw the runlist. NVML's log
// names a runlist by its ID only, with no call that maps it to a vGPU
// instance, so the counts are per runlist, not per VM.
type RunlistCount struct {
	GPU     int    // device index
	UUID    string // device UUID
	Runlist uint32 // software runlist ID
	// RunTime is the time the runlist ran, Preemption the time it waited
	// while preempted, Slices the number of its slots (log entries).
	RunTime    time.Duration
	Preemption time.Duration
	Slices     uint64

	last                 time.Time     // the newest entry counted
	lastRun, lastPreempt time.Duration // its running totals
}

// AddSchedulerLog returns prev plus the vGPU scheduler log entries in r
// (each Device.Scheduler.Log, the entries since the previous sample), as a
// new slice sorted by GPU, UUID and runlist: prev belongs to a published
// Snapshot and is never modified. A nil r, or one without new entries,
// returns prev unchanged.
//
// Only entries newer than the newest one counted for their runlist count,
// so a log read twice is not counted twice; a runlist whose entries in r
// are all older than that had its timestamps go back (the driver restarted
// its log), and they count. Run and preemption time are
// the rise of the driver's running totals per runlist (run time: the sum
// of the slots' run times where the driver gives no total), so they stay
// right when the log, which keeps only the last slots, drops some between
// samples; Slices counts the entries seen and then undercounts. A count
// is held at the largest Duration rather than wrap. A fall of
// a total (the driver reset it) counts the new total. A runlist first seen
// gets its counts at 0, and the entries of that sample only set where
// counting starts: what the totals held before is not the exporter's to
// count, and a counter that appears at 0 lets increase() and rate() see
// everything after.
//
// The runlists of a GPU that r reads up without a vGPU scheduler (MIG mode
// on, where the scheduler is not per GPU, or no longer a vGPU host), or no
// longer lists, are dropped: their series go, and a runlist that comes
// back starts at 0 again, as a new one. A GPU that could not be read (down)
// keeps its counts. A runlist is not dropped for its absence from the log
// while its GPU has the scheduler: the log holds only the last slots, an
// idle VM has none under best effort, and the driver's runlist IDs are a
// small set the next VM takes again.
func AddSchedulerLog(prev []RunlistCount, r *gpu.Readings) []RunlistCount {
	if r == nil {
		return prev
	}
	n := 0
	scheduled := make(map[string]bool, len(r.Devices)) // GPUs whose runlists stay
	for i := range r.Devices {
		d := &r.Devices[i]
		if d.Scheduler != nil {
			n += len(d.Scheduler.Log)
		}
		if d.Scheduler != nil || !d.Up {
			scheduled[d.UUID] = true
		}
	}
	gone := func(c RunlistCount) bool { return !scheduled[c.UUID] }
	if n == 0 && !slices.ContainsFunc(prev, gone) {
		return prev
	}
	type key struct {
		uuid    string
		runlist uint32
	}
	out := slices.DeleteFunc(slices.Clone(prev), gone)
	idx := make(map[key]int, len(out))
	for i, c := range out {
		idx[key{c.UUID, c.Runlist}] = i
	}
	fresh := map[key]bool{}
	for i := range r.Devices {
		d := &r.Devices[i]
		if d.Scheduler == nil {
			continue
		}
		log := d.Scheduler.Log
		if !slices.IsSortedFunc(log, byTime) {
			log = slices.SortedStableFunc(slices.Values(log), byTime)
		}
		// A runlist whose newest entry here is older than the newest one
		// counted had its timestamps go back (the driver restarted its
		// log): its entries are new, and count from there.
		newest := make(map[uint32]time.Time, 8)
		for _, e := range log {
			newest[e.Runlist] = e.Timestamp
		}
		for rl, t := range newest {
			if j, ok := idx[key{d.UUID, rl}]; ok && t.Before(out[j].last) {
				out[j].last = time.Time{}
			}
		}
		for _, e := range log {
			k := key{d.UUID, e.Runlist}
			j, ok := idx[k]
			if !ok {
				idx[k], fresh[k] = len(out), true
				out = append(out, RunlistCount{GPU: d.Index, UUID: d.UUID, Runlist: e.Runlist,
					last: e.Timestamp, lastRun: e.RunTimeTotal, lastPreempt: e.CumulativePreemp})
				continue
			}
			c := &out[j]
			c.GPU = d.Index
			if !e.Timestamp.After(c.last) {
				continue
			}
			if !fresh[k] {
				if e.RunTimeTotal > 0 {
					c.RunTime = addSat(c.RunTime, rise(c.lastRun, e.RunTimeTotal))
				} else {
					c.RunTime = addSat(c.RunTime, e.RunTime)
				}
				c.Preemption = addSat(c.Preemption, rise(c.lastPreempt, e.CumulativePreemp))
				c.Slices++
			}
			c.last, c.lastRun, c.lastPreempt = e.Timestamp, e.RunTimeTotal, e.CumulativePreemp
		}
	}
	slices.SortFunc(out, func(a, b RunlistCount) int {
		return cmp.Or(cmp.Compare(a.GPU, b.GPU), cmp.Compare(a.UUID, b.UUID), cmp.Compare(a.Runlist, b.Runlist))
	})
	return out
}

// rise is how much a running total grew from prev to cur; a total that
// fell was reset and counts from 0.
func rise(prev, cur time.Duration) time.Duration {
	if cur >= prev {
		return cur - prev
	}
	return cur
}

// addSat is a+d for a count a and a rise d (neither negative), held at
// the largest Duration rather than wrapping below zero: a driver's total
// near it, once reset, would otherwise turn the counter negative.
func addSat(a, d time.Duration) time.Duration {
	if d > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + d
}

func byTime(a, b gpu.VGPUSchedulerLogEntry) int { return a.Timestamp.Compare(b.Timestamp) }
