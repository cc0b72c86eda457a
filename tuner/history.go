package tuner

import (
	"slices"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// HistoryPoints is how many rounds the status's history keeps: an hour at
// the default interval of 15s.
const HistoryPoints = 240

// SettingKey names one knob of a GPU (and process) in the history.
type SettingKey struct {
	GPU      string // UUID
	GPUIndex int
	Tenant   string // the MPS client's tenant, if known
	Knob     gpu.Knob
	PID      uint32
}

// RoundPoint is one round's numbers. Its maps are never changed once made.
type RoundPoint struct {
	At time.Time
	// Burn is each latency tenant's burn over the fast window, for those
	// with a request in it.
	Burn map[string]float64
	// Values are the numeric values (Numeric) of the knobs that apply to
	// each GPU's sharing mode and of those the tuner set a target for: as
	// read, or, where the readings do not say, the target.
	Values map[SettingKey]float64
}

// roundRing is a ring of the latest rounds' points.
type roundRing struct {
	buf  []RoundPoint
	next int // where the next point goes once buf is full
	max  int
}

func newRoundRing(max int) *roundRing { return &roundRing{max: max} }

// add keeps p, dropping the oldest point when full.
func (h *roundRing) add(p RoundPoint) {
	if len(h.buf) < h.max {
		h.buf = append(h.buf, p)
		return
	}
	h.buf[h.next] = p
	h.next = (h.next + 1) % h.max
}

// points returns a copy of the points, oldest first.
func (h *roundRing) points() []RoundPoint {
	return append(slices.Clone(h.buf[h.next:]), h.buf[:h.next]...)
}

// Numeric is a value as a number for the history, in the unit KnobUnit
// names: a fraction (an MPS cap, a pause duty), watts, a time-slice level's rank (short 0 to long 3),
// the top of a locked clock range in MHz (0: unlocked), a vGPU scheduler
// policy's rank; false for a value without one (the default power limit,
// a MIG layout, a placement).
func Numeric(v Value) (float64, bool) {
	switch x := v.(type) {
	case Fraction:
		return float64(x), true
	case Duty:
		return float64(x), true
	case Watts:
		return float64(x), x != 0
	case Level:
		n, ok := levelOrder[gpu.TimeSliceLevel(x)]
		return float64(n), ok
	case ClockRange:
		return float64(x.MaxMHz), true
	case Scheduler:
		n := slices.Index(schedulerOrder, x.Policy)
		return float64(n), n >= 0
	}
	return 0, false
}

// schedulerOrder ranks the vGPU scheduler policies for Numeric.
var schedulerOrder = []gpu.VGPUPolicy{gpu.VGPUPolicyBestEffort, gpu.VGPUPolicyEqualShare, gpu.VGPUPolicyFixedShare}

// roundPoint makes the history's point of a round at now: the burns, and
// the value of each knob that applies to a GPU, as read, or as targeted
// (targets, with the value in effect as effective finds it).
func roundPoint(now time.Time, snap *tenant.Snapshot, burns []TenantBurn, targets []Setting) RoundPoint {
	p := RoundPoint{At: now, Burn: map[string]float64{}, Values: map[SettingKey]float64{}}
	for _, b := range burns {
		if b.Known {
			p.Burn[b.Tenant] = b.Burn
		}
	}
	seen := map[Target]bool{}
	put := func(k SettingKey, v Value) {
		if f, ok := Numeric(v); ok {
			p.Values[k] = f
			seen[Target{GPU: k.GPU, Knob: k.Knob, PID: k.PID}] = true
		}
	}
	if snap != nil && snap.Readings != nil {
		owner := pidTenants(snap)
		for i := range snap.Readings.Devices {
			d := &snap.Readings.Devices[i]
			if !d.Up {
				continue
			}
			for _, k := range KnobsFor(d.Mode) {
				if k != gpu.KnobMPSActiveThreads {
					put(SettingKey{GPU: d.UUID, GPUIndex: d.Index, Knob: k}, currentValue(d, k, 0))
					continue
				}
				for _, pr := range d.Processes {
					put(SettingKey{GPU: d.UUID, GPUIndex: d.Index, Tenant: owner[pidKey{d.UUID, pr.PID}], Knob: k, PID: pr.PID}, currentValue(d, k, pr.PID))
				}
			}
		}
	}
	for _, s := range targets {
		k := SettingKey{GPU: s.GPU, GPUIndex: s.GPUIndex, Tenant: s.Tenant, Knob: s.Knob, PID: s.PID}
		if seen[Target{GPU: s.GPU, Knob: s.Knob, PID: s.PID}] {
			continue
		}
		if s.Effective != nil {
			put(k, s.Effective)
		} else {
			put(k, s.Target)
		}
	}
	return p
}

type pidKey struct {
	gpu string
	pid uint32
}

// pidTenants maps each process of the snapshot's usage to its tenant.
func pidTenants(snap *tenant.Snapshot) map[pidKey]string {
	n := 0
	for _, u := range snap.Usage {
		n += len(u.PIDs)
	}
	out := make(map[pidKey]string, n) // at its size: see runningProcs
	for _, u := range snap.Usage {
		for _, pid := range u.PIDs {
			out[pidKey{u.UUID, pid}] = u.Tenant
		}
	}
	return out
}
