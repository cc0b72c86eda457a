package tenant

import (
	"math"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestMeterEnergyCounterJump: a counter ahead of its previous reading by
// more than the GPU can draw over the time between is no energy drawn (a
// glitch taken as the counter: a repeated one a backend re-levelled to, or
// a first reading): it meters nothing and the next increase is counted
// from it. Billing it bills the whole counter at once. So is one that far
// behind it, neither a reload nor a copy read late: kept from, it left
// every true reading a copy read late, metering no energy again.
func TestMeterEnergyCounterJump(t *testing.T) {
	const (
		month = 777.6e6 // J: 300 W for 30 days
		w     = 300.0   // J a second
	)
	usage := []Usage{{Tenant: "a", UUID: "GPU-0", SMActive: gpu.Float(0.5)}}
	type read struct {
		at     int64 // s
		joules *float64
		limit  *float64 // W, where it differs from the case's
	}
	r := func(at int64, j float64) read { return read{at: at, joules: gpu.Float(j)} }
	for _, tc := range []struct {
		name          string
		limit         *float64 // W; nil: not read
		reads         []read
		wantGPU, want float64 // the GPU's energy counted, a's
	}{
		// a glitch of 0 re-levelled to, then the true counter: only the
		// increases that follow from one another are counted
		{"stuck low, then the counter", gpu.Float(700), []read{r(1, month), r(2, month+w), r(3, 0), r(4, 0), r(5, month+5*w), r(6, month+6*w)}, 2 * w, w},
		// a first reading glitched high: every true reading is below it,
		// too far below for a copy read late
		{"first reading glitched high", gpu.Float(700), []read{r(1, 1e12), r(2, month), r(3, month+w), r(4, month+2*w)}, 2 * w, w},
		{"first reading glitched low", gpu.Float(700), []read{r(1, 0), r(2, month+w), r(3, month+2*w), r(4, month+3*w)}, 2 * w, w},
		// without the power limit, 10 kW bounds the draw: 1 s + the slack
		// at 10 kW is 3.01 MJ, under a month at 300 W
		{"power limit not read", nil, []read{r(1, 0), r(2, month), r(3, month+w)}, w, w / 2},
		// an increase the GPU can draw is counted: 600 W for 10 s under a
		// 700 W limit after samples read without the counter
		{"counter unread, then a full increase", gpu.Float(700), []read{r(1, month), {at: 2}, {at: 3}, r(11, month+6000)}, 6000, 6000 * 3 / 10.0 / 2},
		// a jump after samples read without the counter: they are owed
		// nothing of it
		{"counter unread, then a jump", gpu.Float(700), []read{r(1, month), {at: 2}, r(3, 2*month), r(4, 2*month+w)}, w, w / 2},
		// the jump bound is twice the limit over the time and slack: 2 MJ
		// after 1000 s is 2 kW, within 2 × 1200 W
		{"a long gap at the limit", gpu.Float(1200), []read{r(1, month), r(1001, month+2e6)}, 2e6, 1.0 / 1000 * 2e6 / 2},
		// 900 s unread at 650 W under a 700 W limit, then the limit read
		// lowered to 150 W: 585 kJ drawn before it is bounded by 700 W
		// (2 × 150 W over 1200 s is 360 kJ)
		{"a long gap, the limit lowered since", gpu.Float(700), []read{r(1, month), {at: 2}, {at: 901, joules: gpu.Float(month + 585e3), limit: gpu.Float(150)}},
			585e3, 585e3 / 900}, // a: half of the two sampled seconds
		// lowered at a sample read without the counter in the gap: the
		// higher limit of the sample before still bounds the increase
		{"a long gap, lowered at an unread sample", gpu.Float(700), []read{r(1, month), {at: 2, limit: gpu.Float(150)}, {at: 901, joules: gpu.Float(month + 585e3), limit: gpu.Float(150)}},
			585e3, 585e3 / 900}, // a: half of the two sampled seconds
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMeterState()
			var meters []Meter
			var gpus []GPUMeter
			for i, rd := range tc.reads {
				limit := tc.limit
				if rd.limit != nil {
					limit = rd.limit
				}
				g := gpu.Readings{Time: time.Unix(100+rd.at, 0), Interval: time.Second,
					Devices: []gpu.Device{{UUID: "GPU-0", Up: true, PowerLimitW: limit, EnergyJoules: rd.joules}}}
				if i == 0 {
					g.Interval = 0
				}
				meters, gpus = m.meter(IdleToIdle, nil, &g, usage)
			}
			g := gpus[0]
			if math.Abs(g.EnergyJoules-tc.wantGPU) > 1e-6 || math.Abs(meters[0].EnergyJoules-tc.want) > 1e-6 {
				t.Errorf("the GPU counted %g J, a %g J; want %g J, a %g J", g.EnergyJoules, meters[0].EnergyJoules, tc.wantGPU, tc.want)
			}
			checkConserved(t, meters, gpus)
		})
	}
}

// TestBuilderEnergyCounterJumpNotBilled: the same through the Builder, a
// tenant's process on a 300 W GPU whose counter read 0 first.
func TestBuilderEnergyCounterJumpNotBilled(t *testing.T) {
	b := mustBuilder(t, memTenants, BuilderOptions{})
	const month = 777.6e6
	var s *Snapshot
	for i, e := range []float64{0, month, month + 300, month + 600} {
		d := gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, PowerLimitW: gpu.Float(700), EnergyJoules: gpu.Float(e),
			Activity:  gpu.Activity{SMActive: gpu.Float(1)},
			Processes: []gpu.Process{{PID: 1, Name: "vllm", UID: -1, SMUtil: gpu.Float(1)}}}
		s = b.Build(&gpu.Readings{Time: time.Unix(int64(100+i), 0), Interval: time.Second, Devices: []gpu.Device{d}}, gpu.SamplerStats{})
	}
	for _, m := range s.Meters {
		if m.Tenant == "chat" && m.EnergyJoules > 600*1.01 {
			t.Errorf("chat billed %.4g J over 3 s on a 300 W GPU", m.EnergyJoules)
		}
	}
	if g := s.GPUMeters[0]; math.Abs(g.EnergyJoules-600) > 1e-6 {
		t.Errorf("the GPU counted %g J, want 600", g.EnergyJoules)
	}
}
