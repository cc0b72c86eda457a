package webui

import (
	"cmp"
	"slices"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The clock lock's row among the knob values. The readings say whether a
// GPU's clocks are locked, never the range (NVML has no call that reads it
// back, and the simulator reads as NVML does): a value above 0 in a clock
// lock's series is the tuner's target (tuner.RoundPoint: the target where
// the readings do not say), and a lock the tuner has no target for has no
// value at all.

// What a series' latest value is when it was not read (seriesView.Unread).
const (
	unreadTarget      = "target"      // the target the tuner set
	unreadRecommended = "recommended" // the target the tuner recommends, not set
	unreadLocked      = "locked"      // none: the readings say locked, the range is not read
)

// markClockLocks says, in each clock lock's series, what its latest value
// is when it was not read, and adds a series for a GPU whose readings say
// its clocks are locked where the tuner's rounds give it no value.
func markClockLocks(h *historyView, snap *tenant.Snapshot, st *tuner.Status) {
	if st == nil || len(st.History) == 0 {
		return
	}
	locked := map[string]*gpu.Device{}
	if snap != nil && snap.Readings != nil {
		for i := range snap.Readings.Devices {
			d := &snap.Readings.Devices[i]
			if d.Up && d.ClocksLocked != nil && *d.ClocksLocked && slices.Contains(tuner.KnobsFor(d.Mode), gpu.KnobLockedClocks) {
				locked[d.UUID] = d
			}
		}
	}
	modes := map[string]tuner.Mode{} // the mode of each GPU's clock lock target
	for _, s := range st.Settings {
		if s.Knob == gpu.KnobLockedClocks {
			modes[s.GPU] = s.Mode
		}
	}
	for i := range h.Knobs {
		s := &h.Knobs[i]
		if s.Knob != string(gpu.KnobLockedClocks) {
			continue
		}
		n := len(s.Points)
		latest := n > 0 && s.Points[n-1].Time.Equal(h.To)
		switch {
		case latest && s.Points[n-1].Value > 0:
			v := unitText(s.Unit, s.Points[n-1].Value)
			if m, ok := modes[s.GPU]; ok && m != tuner.ModeEnforce {
				s.Unread, s.Now = unreadRecommended, "recommended "+v+", not set"
				if locked[s.GPU] != nil {
					s.Now = "locked (range not read; recommended " + v + ", not set)"
				}
			} else {
				s.Unread, s.Now = unreadTarget, "target "+v+" (set by the tuner; the driver gives no read-back)"
			}
		case !latest && locked[s.GPU] != nil:
			s.Unread, s.Now = unreadLocked, "locked (range not read)"
		}
		delete(locked, s.GPU)
	}
	if len(locked) == 0 {
		return
	}
	for _, d := range locked {
		h.Knobs = append(h.Knobs, seriesView{GPU: d.UUID, GPUIndex: ptr(d.Index), Knob: string(gpu.KnobLockedClocks), Unit: tuner.KnobUnit(gpu.KnobLockedClocks),
			Points: []pointView{}, Unread: unreadLocked, Now: "locked (range not read)"})
	}
	slices.SortStableFunc(h.Knobs, func(a, b seriesView) int {
		return cmp.Or(cmp.Compare(*a.GPUIndex, *b.GPUIndex), cmp.Compare(knobRank(gpu.Knob(a.Knob)), knobRank(gpu.Knob(b.Knob))))
	})
}
