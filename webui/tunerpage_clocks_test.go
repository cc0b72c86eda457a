package webui

import (
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The knob values' row of a clock lock: the readings say whether the
// clocks are locked, never the range, so a range there is the tuner's
// target, said as one (before: "1980MHz" under "Now", as if read); a lock
// with no target says locked, range not read (before: the last value of
// an earlier round, "unlocked", or no row).
func TestTunerPageClockLockHistory(t *testing.T) {
	k := tuner.SettingKey{GPU: "GPU-x", GPUIndex: 0, Knob: gpu.KnobLockedClocks}
	lock := tuner.ClockRange{MinMHz: 1980, MaxMHz: 1980}
	rounds := func(vals ...*float64) []tuner.RoundPoint {
		var out []tuner.RoundPoint
		for i, v := range vals {
			p := tuner.RoundPoint{At: pageTime.Add(time.Duration(i) * time.Minute), Burn: map[string]float64{"a": 1}, Values: map[tuner.SettingKey]float64{}}
			if v != nil {
				p.Values[k] = *v
			}
			out = append(out, p)
		}
		return out
	}
	for _, c := range []struct {
		name    string
		history []tuner.RoundPoint
		locked  *bool
		target  tuner.Mode // "": no target
		now     string
		unread  string
	}{
		{"lock set, read locked", rounds(ptr(0.0), ptr(1980.0)), ptr(true), tuner.ModeEnforce,
			"target 1980MHz (set by the tuner; the driver gives no read-back)", "target"},
		{"lock set, clocks not read", rounds(ptr(1980.0)), nil, tuner.ModeEnforce,
			"target 1980MHz (set by the tuner; the driver gives no read-back)", "target"},
		{"lock recommended, another's lock in force", rounds(ptr(1980.0)), ptr(true), tuner.ModeRecommend,
			"locked (range not read; recommended 1980MHz, not set)", "recommended"},
		{"lock recommended, clocks not read", rounds(ptr(1980.0)), nil, tuner.ModeRecommend,
			"recommended 1980MHz, not set", "recommended"},
		{"an operator's lock after free rounds", rounds(ptr(0.0), nil), ptr(true), "", "locked (range not read)", "locked"},
		{"an operator's lock all along", rounds(nil, nil), ptr(true), "", "locked (range not read)", "locked"},
		{"free", rounds(ptr(1980.0), ptr(0.0)), ptr(false), tuner.ModeEnforce, "unlocked", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			snap := &tenant.Snapshot{Time: pageTime, Readings: &gpu.Readings{Devices: []gpu.Device{{UUID: "GPU-x", Up: true, Mode: gpu.SharingTimeSlice, ClocksLocked: c.locked}}}}
			st := &tuner.Status{Mode: tuner.ModeEnforce, LastRun: pageTime, History: c.history}
			if c.target != "" {
				st.Settings = []tuner.Setting{{GPU: "GPU-x", Knob: gpu.KnobLockedClocks, Target: lock, Mode: c.target}}
			}
			v := newTunerView(simInfo, snap, st, 50)
			var rows []seriesView
			for _, s := range v.History.Knobs {
				if s.Knob == string(gpu.KnobLockedClocks) {
					rows = append(rows, s)
				}
			}
			if len(rows) != 1 {
				t.Fatalf("%d clock lock rows, want 1: %+v", len(rows), v.History.Knobs)
			}
			if rows[0].Now != c.now || rows[0].Unread != c.unread {
				t.Errorf("now %q, unread %q; want %q, %q", rows[0].Now, rows[0].Unread, c.now, c.unread)
			}
			_, body, _ := getPage(t, snap, st, "/tuner")
			if want := `<td>locked_clocks</td><td></td><td class="num">` + strings.ReplaceAll(c.now, "'", "&#39;") + `</td>`; !strings.Contains(body, want) {
				t.Errorf("page has no %s", want)
			}
		})
	}
}
