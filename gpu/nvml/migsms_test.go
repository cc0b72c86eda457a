package nvml

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// A MIG GPU's readings carry the SMs of its full-GPU profile (the profile
// of the most slices): where NVML does not know the GPU's SM count (an
// A100), a MIG instance's part of the GPU is its SMs over these, whatever
// instances exist. Out of MIG mode it is 0.
func TestMIGFullProfileSMs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		srv      func() *server.Server
		profiles []int
		wantSMs  int // the GPU's, known for an H100 80GB HBM3 only
		wantMIG  int // the mock's 7-slice profile's
	}{
		{"A100 one 1g instance", dgxa100.New, []int{nvml.GPU_INSTANCE_PROFILE_1_SLICE}, 0, 98},
		{"A100 3g and 4g", dgxa100.New, []int{nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_4_SLICE}, 0, 98},
		{"H100 one 1g instance", dgxh100.New, []int{nvml.GPU_INSTANCE_PROFILE_1_SLICE}, 132, 112},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.srv())
			f.enableMIG(0, tc.profiles...)
			b := f.backend()
			rd := sample(t, b)
			if d := rd.Devices[0]; d.SMCount != tc.wantSMs || d.MIGSMCount != tc.wantMIG || len(d.MIG) != len(tc.profiles) {
				t.Errorf("GPU SMs %d, full-GPU profile's %d, %d instances; want %d, %d, %d", d.SMCount, d.MIGSMCount, len(d.MIG), tc.wantSMs, tc.wantMIG, len(tc.profiles))
			}
			if d := rd.Devices[1]; d.MIGEnabled || d.MIGSMCount != 0 {
				t.Errorf("a GPU out of MIG mode: full-GPU profile's SMs %d, want 0", d.MIGSMCount)
			}
			f.closeWithoutLeaks(b)
		})
	}
}
