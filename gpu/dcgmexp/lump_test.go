package dcgmexp

import (
	"fmt"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// dcgm-exporter refreshes its page once a collect interval (-c, 30 s by
// default) and the exporter reads it every second: the page's energy
// counter stays put for 29 samples and then moves by 30 s of energy. Each
// copy was served as a fresh reading, and the guard, timing the step from
// the last copy (a second before), refused it: 9000 J at 300 W is more
// than a 350 W GPU (700 W at most) draws in 1 s and its slack. The copies
// are now marked EnergyRepeated and still served; the step is taken.
func TestPageEnergyRepeatedMarked(t *testing.T) {
	const n = 61
	value := func(i int) float64 { return 1e6 + 9000*float64(i/30) } // J
	var bodies []string
	for i := range n {
		bodies = append(bodies, energyPage(fmt.Sprintf("%.0f", value(i)*1000)))
	}
	clock := gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	inner := &fakeSource{rd: &gpu.Readings{Devices: []gpu.Device{{UUID: uuidA, Up: true, PowerWatts: gpu.Float(300), PowerLimitW: gpu.Float(350)}}}}
	s := newSource(t, inner, Options{URL: pages(t, bodies...).URL, Clock: clock})
	for i := range n {
		d := sampleOnce(t, s).Devices[0]
		repeated := i%30 != 0
		switch {
		case d.EnergyJoules == nil:
			t.Errorf("sample %d: no energy counter served, want %.0f J", i, value(i))
		case *d.EnergyJoules != value(i):
			t.Errorf("sample %d: energy counter %.0f J, want %.0f J", i, *d.EnergyJoules, value(i))
		}
		if d.EnergyRepeated != repeated {
			t.Errorf("sample %d: EnergyRepeated %v, want %v", i, d.EnergyRepeated, repeated)
		}
		clock.Advance(time.Second)
	}
}
