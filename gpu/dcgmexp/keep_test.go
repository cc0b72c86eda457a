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
