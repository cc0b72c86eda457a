package webui

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The tuner page's history: each tenant's burn and each knob's value over
// the rounds the tuner keeps (tuner.Status.History), as JSON series and as
// inline SVG sparklines drawn here, server-side.

// historyView is the rounds' history: one series per tenant's burn and per
// knob's value.
type historyView struct {
	From    time.Time    `json:"from,omitzero"`
	To      time.Time    `json:"to,omitzero"`
	Tenants []seriesView `json:"tenants"` // unit burn_rate
	Knobs   []seriesView `json:"knobs"`
	Span    string       `json:"-"` // "the last 1h"
}

// seriesView is one series: a tenant's burn, or a knob's value.
type seriesView struct {
	Tenant   string      `json:"tenant,omitempty"`
	GPU      string      `json:"gpu,omitempty"`
	GPUIndex *int        `json:"gpu_index,omitempty"`
	Knob     string      `json:"knob,omitempty"`
	PID      uint32      `json:"pid,omitempty"`
	Unit     string      `json:"unit"`
	Points   []pointView `json:"points"`
	Spark    *sparkline  `json:"-"`
	Now      string      `json:"-"`                // the latest value, as text
	Range    string      `json:"-"`                // lowest – highest, as text
	Unread   string      `json:"unread,omitempty"` // the latest value not read: a clock lock's (markClockLocks)
}

type pointView struct {
	Time  time.Time `json:"time"`
	Value float64   `json:"value"`
}

// tenant returns a tenant's burn series.
func (h historyView) tenant(name string) (seriesView, bool) {
	i := slices.IndexFunc(h.Tenants, func(s seriesView) bool { return s.Tenant == name })
	if i < 0 {
		return seriesView{}, false
	}
	return h.Tenants[i], true
}

// burnUnit is the unit of a tenant's series.
const burnUnit = "burn_rate"

// newHistoryView turns the status's rounds into series.
func newHistoryView(st *tuner.Status) historyView {
	h := historyView{Tenants: []seriesView{}, Knobs: []seriesView{}}
	rounds := st.History
	if len(rounds) == 0 {
		return h
	}
	h.From, h.To = rounds[0].At, rounds[len(rounds)-1].At
	h.Span = durationText(h.To.Sub(h.From))
	tenants := map[string]bool{}
	keys := map[tuner.SettingKey]bool{}
	for _, r := range rounds {
		for t := range r.Burn {
			tenants[t] = true
		}
		for k := range r.Values {
			keys[k] = true
		}
	}
	for _, t := range slices.Sorted(func(yield func(string) bool) {
		for t := range tenants {
			if !yield(t) {
				return
			}
		}
	}) {
		s := seriesView{Tenant: t, Unit: burnUnit}
		vals := make([]*float64, len(rounds))
		for i, r := range rounds {
			if v, ok := r.Burn[t]; ok {
				vals[i] = &v
			}
		}
		h.Tenants = append(h.Tenants, s.fill(rounds, vals, h.From, h.To))
	}
	ks := make([]tuner.SettingKey, 0, len(keys))
	for k := range keys {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b tuner.SettingKey) int {
		return cmp.Or(cmp.Compare(a.GPUIndex, b.GPUIndex), cmp.Compare(knobRank(a.Knob), knobRank(b.Knob)), cmp.Compare(a.PID, b.PID), cmp.Compare(a.Tenant, b.Tenant))
	})
	for _, k := range ks {
		s := seriesView{GPU: k.GPU, GPUIndex: ptr(k.GPUIndex), Tenant: k.Tenant, Knob: string(k.Knob), PID: k.PID, Unit: tuner.KnobUnit(k.Knob)}
		vals := make([]*float64, len(rounds))
		for i, r := range rounds {
			if v, ok := r.Values[k]; ok {
				vals[i] = &v
			}
		}
		h.Knobs = append(h.Knobs, s.fill(rounds, vals, h.From, h.To))
	}
	return h
}

// knobRank orders a GPU's knobs as the GPU table lists them.
func knobRank(k gpu.Knob) int {
	return slices.Index([]gpu.Knob{gpu.KnobPauseDuty, gpu.KnobMPSActiveThreads, gpu.KnobComputeTimeSlice, gpu.KnobVGPUScheduler, gpu.KnobMIGLayout,
		gpu.KnobLockedClocks, gpu.KnobPowerLimit}, k)
}

// fill sets a series' points, texts and sparkline from its value in each
// round (nil where the round has none).
func (s seriesView) fill(rounds []tuner.RoundPoint, vals []*float64, from, to time.Time) seriesView {
	s.Points = []pointView{}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, v := range vals {
		if v != nil {
			s.Points = append(s.Points, pointView{Time: rounds[i].At, Value: *v})
			lo, hi = math.Min(lo, *v), math.Max(hi, *v)
		}
	}
	if len(s.Points) == 0 {
		return s
	}
	s.Now = unitText(s.Unit, s.Points[len(s.Points)-1].Value)
	s.Range = unitText(s.Unit, lo)
	if hi != lo {
		s.Range += " – " + unitText(s.Unit, hi)
	}
	yLo, yHi := scale(s.Unit, lo, hi)
	sp := &sparkline{Width: sparkWidth, Height: sparkHeight, Label: s.label() + ": " + s.Range + ", now " + s.Now}
	x := func(t time.Time) float64 {
		if !to.After(from) {
			return sparkWidth - sparkPad
		}
		return sparkPad + float64(t.Sub(from))/float64(to.Sub(from))*(sparkWidth-2*sparkPad)
	}
	y := func(v float64) float64 {
		if yHi == yLo {
			return sparkHeight / 2
		}
		return sparkHeight - sparkPad - (v-yLo)/(yHi-yLo)*(sparkHeight-2*sparkPad)
	}
	var seg []string
	for i, v := range vals {
		if v == nil {
			sp.addSegment(seg)
			seg = nil
			continue
		}
		seg = append(seg, coord(x(rounds[i].At))+","+coord(y(*v)))
		sp.LastX, sp.LastY = coord(x(rounds[i].At)), coord(y(*v))
	}
	sp.addSegment(seg)
	if s.Unit == burnUnit {
		sp.RefY = coord(y(1))
	}
	s.Spark = sp
	return s
}

// label names a series.
func (s seriesView) label() string {
	if s.Unit == burnUnit {
		return s.Tenant + " burn"
	}
	l := "GPU " + strconv.Itoa(*s.GPUIndex) + " " + s.Knob
	if s.PID != 0 {
		l += " pid " + strconv.FormatUint(uint64(s.PID), 10)
	}
	return l
}

// scale is the vertical range of a series' sparkline: the burn from 0 to
// at least 2 (the line at 1 in the middle), a ratio 0-1, a time-slice
// level and a vGPU policy over their ranks, else the values' own range.
func scale(unit string, lo, hi float64) (float64, float64) {
	switch unit {
	case burnUnit:
		return 0, math.Max(2, hi)
	case "ratio":
		return 0, math.Max(1, hi)
	case "level":
		return 0, 3
	case "policy":
		return 0, 2
	}
	return lo, hi
}

// unitText renders a number of a unit.
func unitText(unit string, v float64) string {
	switch unit {
	case burnUnit:
		return tuner.BurnText(v)
	case "ratio":
		return percentText(v)
	case "watts":
		return tuner.Watts(v).String()
	case "mhz":
		if v == 0 {
			return "unlocked"
		}
		return strconv.FormatFloat(v, 'f', 0, 64) + "MHz"
	case "level":
		if i := int(v); i >= 0 && i < len(levelNames) {
			return levelNames[i]
		}
	case "policy":
		if i := int(v); i >= 0 && i < len(policyNames) {
			return policyNames[i]
		}
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// levelNames and policyNames are the names of tuner.Numeric's ranks.
var (
	levelNames  = []string{string(gpu.TimeSliceShort), string(gpu.TimeSliceDefault), string(gpu.TimeSliceMedium), string(gpu.TimeSliceLong)}
	policyNames = []string{string(gpu.VGPUPolicyBestEffort), string(gpu.VGPUPolicyEqualShare), string(gpu.VGPUPolicyFixedShare)}
)

// A sparkline's size in pixels, and its inner margin.
const (
	sparkWidth  = 240.0
	sparkHeight = 36.0
	sparkPad    = 3.0
)

// sparkline is an inline SVG line drawn by the template: polylines (one
// per run of rounds with a value, a dot for a lone round), the last point,
// and for a burn the line at 1x.
type sparkline struct {
	Width, Height float64
	Segments      []string    // polyline points, "x,y x,y ..."
	Dots          [][2]string // lone points, x and y
	LastX, LastY  string
	RefY          string // "" for none
	Label         string
}

// addSegment adds a run of points: a line, or a dot for a lone point.
func (s *sparkline) addSegment(seg []string) {
	switch len(seg) {
	case 0:
	case 1:
		x, y, _ := strings.Cut(seg[0], ",")
		s.Dots = append(s.Dots, [2]string{x, y})
	default:
		s.Segments = append(s.Segments, strings.Join(seg, " "))
	}
}

func coord(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
