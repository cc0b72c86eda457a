package dcgmexp

import (
	"context"
	"fmt"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// The page's energy counter is DCGM's copy, up to dcgm-exporter's collect
// interval (30 s by default) behind NVML's. A sample whose NVML energy
// read failed got the page's copy: the counter went back (here 9 kJ, 30 s
// at 300 W), a counter reset to vgpu_gpu_energy_joules_total's readers
// and to the tenant meter, which billed the GPU's whole counter at once.
// Now a GPU whose counter NVML has read is left without one in such a
// sample; one whose counter NVML never reads still gets the page's on
// every sample.
func TestPageEnergyCounterFillsOnlyGPUsWithoutOne(t *testing.T) {
	const nvml = 777_600_000.0 // J: 30 days at 300 W
	page := fmt.Sprintf("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=%q} %.0f\n", uuidA, (nvml-9000)*1e3)
	for _, tc := range []struct {
		name  string
		inner []*float64 // NVML's reads, sample by sample (nil: failed)
		want  []*float64 // the counter sampled
	}{
		{"read by NVML, then not", []*float64{gpu.Float(nvml), nil, gpu.Float(nvml + 300)}, []*float64{gpu.Float(nvml), nil, gpu.Float(nvml + 300)}},
		{"never read by NVML", []*float64{nil, nil}, []*float64{gpu.Float(nvml - 9000), gpu.Float(nvml - 9000)}},
		// once NVML has read it, never the page's again
		{"read by NVML later", []*float64{nil, gpu.Float(nvml), nil}, []*float64{gpu.Float(nvml - 9000), gpu.Float(nvml), nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &fakeSource{}
			s, err := New(inner, Options{URL: serve(t, []byte(page), nil).URL + "/metrics"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i, e := range tc.inner {
				inner.rd = &gpu.Readings{Devices: []gpu.Device{{UUID: uuidA, Up: true, EnergyJoules: e}}}
				rd, err := s.Sample(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if got, want := rd.Devices[0].EnergyJoules, tc.want[i]; (got == nil) != (want == nil) || got != nil && *got != *want {
					t.Errorf("sample %d: energy counter %s, want %s", i, show(got), show(want))
				}
			}
		})
	}
}

func show(p *float64) string {
	if p == nil {
		return "absent"
	}
	return fmt.Sprintf("%.0f J", *p)
}
