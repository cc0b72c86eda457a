package dcgmexp

import (
	"fmt"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A failed scrape (dcgm-exporter restarting) left the GPU's activity
// source "", the next page "dcgm" again: vgpu_gpu_info's series changed on
// every restart. The source a page gave is now kept, without ratios, until
// the failure outlasts the maximum age; of a MIG instance too.
func TestActivitySourceKeptOverFailedScrapes(t *testing.T) {
	page := fmt.Sprintf("DCGM_FI_PROF_SM_ACTIVE{UUID=%q} 0.5\nDCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID=%q,GPU_I_ID=\"1\"} 0.25\n", uuidA, uuidB)
	type want struct{ gpu, mig string }
	for _, tc := range []struct {
		name  string
		pages []string // "": the scrape fails
		step  time.Duration
		want  []want
	}{
		{"one failed scrape", []string{page, "", page}, time.Second,
			[]want{{"dcgm", "dcgm-gr-engine"}, {"dcgm", "dcgm-gr-engine"}, {"dcgm", "dcgm-gr-engine"}}},
		{"a page without the fields", []string{page, "# nothing\n", page}, time.Second,
			[]want{{"dcgm", "dcgm-gr-engine"}, {"dcgm", "dcgm-gr-engine"}, {"dcgm", "dcgm-gr-engine"}}},
		// the maximum age is 1 min: kept at 1 min, dropped past it
		{"failing for good", []string{page, "", "", ""}, 30 * time.Second,
			[]want{{"dcgm", "dcgm-gr-engine"}, {"dcgm", "dcgm-gr-engine"}, {"dcgm", "dcgm-gr-engine"}, {"", ""}}},
		{"never a page", []string{""}, time.Second, []want{{"", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			inner := &fakeSource{rd: &gpu.Readings{Devices: []gpu.Device{{UUID: uuidA, Up: true},
				{UUID: uuidB, Up: true, MIGEnabled: true, MIG: []gpu.MIGInstance{{GPUInstanceID: 1}}}}}}
			s := newSource(t, inner, Options{URL: pages(t, tc.pages...).URL, Clock: clock})
			for i, w := range tc.want {
				rd := sampleOnce(t, s)
				a, m := rd.Devices[0].Activity, rd.Devices[1].MIG[0].Activity
				if a.Source != w.gpu || m.Source != w.mig {
					t.Errorf("sample %d (page %.20q): GPU source %q, instance %q; want %q, %q", i, tc.pages[min(i, len(tc.pages)-1)], a.Source, m.Source, w.gpu, w.mig)
				}
				if tc.pages[min(i, len(tc.pages)-1)] != page && (a.SMActive != nil || m.SMActive != nil) {
					t.Errorf("sample %d: ratios without a page: %+v, %+v", i, a, m)
				}
				clock.Advance(tc.step)
			}
			if inner.rd.Devices[0].Activity.Source != "" || inner.rd.Devices[1].MIG[0].Activity.Source != "" {
				t.Error("the inner source's readings changed")
			}
		})
	}
}

// A page judged frozen (its energy counter unmoved past the maximum age
// while NVML reads power), or whose timestamps passed it, lost its ratios
// at the maximum age, but its activity_source was kept one maximum age
// more, from the last sample that merged it: about twice the maximum age
// after the host engine died. The source now goes with the figures: kept
// until the page's last fresh moment (its timestamp, else its counter's
// last move) is older than the maximum age.
func TestActivitySourceGoesWithAFrozenPage(t *testing.T) {
	const e = 777600000000
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	frozen := fmt.Sprintf("DCGM_FI_PROF_SM_ACTIVE{UUID=%q} 0.93\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{UUID=%q} %d\n", uuidA, uuidA, e)
	frozenMIG := fmt.Sprintf("DCGM_FI_PROF_SM_ACTIVE{UUID=%q,GPU_I_ID=\"1\"} 0.93\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{UUID=%q,GPU_I_ID=\"1\"} %d\n", uuidA, uuidA, e)
	stamped := fmt.Sprintf("DCGM_FI_PROF_SM_ACTIVE{UUID=%q} 0.93 %d\n", uuidA, t0.UnixMilli())
	moving := func(i int) string {
		return fmt.Sprintf("DCGM_FI_PROF_SM_ACTIVE{UUID=%q} 0.93\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{UUID=%q} %d\n", uuidA, uuidA, e+i*4_100_000)
	}
	for _, tc := range []struct {
		name string
		mig  bool
		page func(i int) string // of sample i, 10 s apart; "": the scrape fails
		last int                // the last sample with the source (1 min max age)
	}{
		{"frozen page", false, func(int) string { return frozen }, 6},
		{"frozen page of a MIG instance", true, func(int) string { return frozenMIG }, 6},
		{"timestamps past the maximum age", false, func(int) string { return stamped }, 6},
		// a fresh page until 20 s, then none: kept to 80 s, as before
		{"live page, then failing", false, func(i int) string {
			if i > 2 {
				return ""
			}
			return moving(i)
		}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bodies []string
			for i := range 14 {
				bodies = append(bodies, tc.page(i))
			}
			clock := gpu.NewManualClock(t0)
			dev := gpu.Device{UUID: uuidA, Up: true, PowerWatts: gpu.Float(410)}
			if tc.mig {
				dev.MIGEnabled, dev.MIG = true, []gpu.MIGInstance{{GPUInstanceID: 1}}
			}
			inner := &fakeSource{rd: &gpu.Readings{Devices: []gpu.Device{dev}}}
			s := newSource(t, inner, Options{URL: pages(t, bodies...).URL, Clock: clock})
			for i := range bodies {
				d := sampleOnce(t, s).Devices[0]
				want := ""
				if i <= tc.last {
					want = ActivityDCGM
				}
				if d.Activity.Source != want || tc.mig && d.MIG[0].Activity.Source != want {
					mig := ""
					if tc.mig {
						mig = d.MIG[0].Activity.Source
					}
					t.Errorf("sample %d at %v: source %q (instance %q), want %q", i, time.Duration(i)*10*time.Second, d.Activity.Source, mig, want)
				}
				clock.Advance(10 * time.Second)
			}
		})
	}
}
