package dcgmexp

import (
	"fmt"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A dcgm-exporter whose host engine went away serves its last page for
// good, its lines without timestamps: the same page for an hour, NVML
// reading 410 W, was merged as current (SM active 0.93 from DCGM). A GPU
// whose page energy counter has not moved for longer than the maximum
// age while NVML reads it drawing power is now stale: its figures left
// out, the GPU not counted matched (vgpu_dcgm_exporter_gpus_matched).
func TestFrozenPageStale(t *testing.T) {
	frozen := fmt.Sprintf("DCGM_FI_PROF_SM_ACTIVE{UUID=%q} 0.93\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{UUID=%q} 777600000000\n", uuidA, uuidA)
	moving := func(i int) string {
		return fmt.Sprintf("DCGM_FI_PROF_SM_ACTIVE{UUID=%q} 0.93\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{UUID=%q} %d\n", uuidA, uuidA, 777600000000+i*12300000)
	}
	for _, tc := range []struct {
		name  string
		page  func(i int) string // of the sample i, 30 s apart
		watts *float64           // NVML's power
		want  []bool             // merged
	}{
		// the maximum age is 1 min: merged up to 60 s unmoved, stale past it
		{"frozen, drawing power", func(int) string { return frozen }, gpu.Float(410), []bool{true, true, true, false, false}},
		{"moving every 30 s", moving, gpu.Float(410), []bool{true, true, true, true, true}},
		// an idle page that does not move is not taken for frozen where
		// NVML reads no draw, nor where it reads no power at all
		{"frozen, no draw", func(int) string { return frozen }, gpu.Float(0), []bool{true, true, true, true}},
		{"frozen, power not read", func(int) string { return frozen }, nil, []bool{true, true, true, true}},
		{"frozen, then moving again", func(i int) string {
			if i < 4 {
				return frozen
			}
			return moving(i)
		}, gpu.Float(410), []bool{true, true, true, false, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bodies []string
			for i := range tc.want {
				bodies = append(bodies, tc.page(i))
			}
			clock := gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			inner := &fakeSource{rd: &gpu.Readings{Devices: []gpu.Device{{UUID: uuidA, Up: true, PowerWatts: tc.watts}}}}
			s := newSource(t, inner, Options{URL: pages(t, bodies...).URL, Clock: clock})
			for i, want := range tc.want {
				rd := sampleOnce(t, s)
				merged := rd.Devices[0].Activity.SMActive != nil
				if merged != want || (rd.DCGMExporter.GPUsMatched == 1) != want {
					t.Errorf("sample %d (%v): merged %v, GPUs matched %d; want merged %v", i, time.Duration(i)*30*time.Second, merged, rd.DCGMExporter.GPUsMatched, want)
				}
				if !rd.DCGMExporter.Up {
					t.Errorf("sample %d: not up", i)
				}
				clock.Advance(30 * time.Second)
			}
		})
	}
}
