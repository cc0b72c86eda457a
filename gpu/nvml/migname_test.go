package nvml

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// rtxProProfiles are GPU instance profiles of a 4-slice board with the
// variants an RTX PRO 6000 Blackwell lists apart (nvidia-smi mig -lgip),
// by profile index, with the name nvidia-smi gives each. The mock takes a
// profile's ID for its index, so each ID here is its index.
var rtxProProfiles = []struct {
	index  int
	slices uint32
	mb     uint64
	want   string
}{
	{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 1, 24192, "1g.24gb"},
	{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, 1, 24192, "1g.24gb+me"},
	{nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX, 1, 24192, "1g.24gb+gfx"},
	{nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, 1, 24192, "1g.24gb-me"},
	{nvml.GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, 1, 24192, "1g.24gb+me.all"},
	{nvml.GPU_INSTANCE_PROFILE_2_SLICE, 2, 48384, "2g.48gb"},
	{nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1, 2, 48384, "2g.48gb+me"},
	{nvml.GPU_INSTANCE_PROFILE_2_SLICE_GFX, 2, 48384, "2g.48gb+gfx"},
	{nvml.GPU_INSTANCE_PROFILE_2_SLICE_NO_ME, 2, 48384, "2g.48gb-me"},
	{nvml.GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME, 2, 48384, "2g.48gb+me.all"},
	{nvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX, 3, 72576, "3g.71gb+gfx"},
	{nvml.GPU_INSTANCE_PROFILE_4_SLICE, 4, 97280, "4g.95gb"},
	{nvml.GPU_INSTANCE_PROFILE_4_SLICE_GFX, 4, 97280, "4g.95gb+gfx"},
}

// rtxProServer is a mock of two GPUs with the rtxProProfiles.
func rtxProServer(t testing.TB) *server.Server {
	t.Helper()
	cfg := gpus.H100_SXM5_80GB
	cfg.Name = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
	cfg.MemoryMB = 97887
	cfg.MIGProfiles = gpus.MIGProfileConfig{
		GpuInstanceProfiles:     map[int]nvml.GpuInstanceProfileInfo{},
		ComputeInstanceProfiles: map[int]map[int]nvml.ComputeInstanceProfileInfo{},
	}
	ciIndex := map[uint32]int{1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 2: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE,
		3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 4: nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE}
	for _, p := range rtxProProfiles {
		cfg.MIGProfiles.GpuInstanceProfiles[p.index] = nvml.GpuInstanceProfileInfo{
			Id: uint32(p.index), SliceCount: p.slices, InstanceCount: 4 / p.slices,
			MultiprocessorCount: 46 * p.slices, MemorySizeMB: p.mb,
		}
		ci := ciIndex[p.slices]
		cfg.MIGProfiles.ComputeInstanceProfiles[p.index] = map[int]nvml.ComputeInstanceProfileInfo{
			ci: {Id: uint32(ci), SliceCount: p.slices, InstanceCount: 1, MultiprocessorCount: 46 * p.slices},
		}
	}
	srv, err := server.New(server.WithGPUs(cfg, cfg), server.WithDriverVersion("580.65.06"),
		server.WithNVMLVersion("13.580.65.06"), server.WithCUDADriverVersion(13000))
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// Each variant of a GPU instance profile is named as nvidia-smi names it
// (+gfx, -me, +me.all, ...), in the MIG instances' profile and in the MIG
// layout knob: every variant but the REV1 "+me" ones was named like the
// plain profile ("1g.24gb"), and the knob refused "1g.24gb-me" as unknown.
func TestMIGProfileVariantNames(t *testing.T) {
	var all []string
	for _, tc := range rtxProProfiles {
		all = append(all, tc.want)
		t.Run(tc.want, func(t *testing.T) {
			f := newFixture(t, rtxProServer(t))
			info := f.devs[0].Config.MIGProfiles.GpuInstanceProfiles[tc.index]
			if got := profileName(tc.index, info); got != tc.want {
				t.Errorf("profileName(%d, %d slices, %d MB) = %q, want %q", tc.index, tc.slices, tc.mb, got, tc.want)
			}
			f.enableMIG(0, tc.index)
			f.enableMIG(1, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
			b := f.backend()
			if mig := sample(t, b).Devices[0].MIG; len(mig) != 1 || mig[0].Profile != tc.want {
				t.Errorf("MIG instance of profile %d: %+v, want profile %q", tc.index, mig, tc.want)
			}
			if err := b.ConfigureMIG(context.Background(), f.devs[1].UUID, []string{tc.want}); err != nil {
				t.Fatalf("ConfigureMIG(%q): %v", tc.want, err)
			}
			f.clock.Advance(time.Second)
			if mig := sample(t, b).Devices[1].MIG; len(mig) != 1 || mig[0].Profile != tc.want {
				t.Errorf("after ConfigureMIG(%q): %+v", tc.want, mig)
			}
		})
	}
	// An unknown profile's error lists every variant.
	f := newFixture(t, rtxProServer(t))
	f.enableMIG(0, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	err := f.backend().ConfigureMIG(context.Background(), f.devs[0].UUID, []string{"1g.24gb+bogus"})
	if err == nil {
		t.Fatal("ConfigureMIG accepted an unknown profile")
	}
	_, listed, _ := strings.Cut(err.Error(), "this GPU has ")
	got := strings.Split(strings.TrimSuffix(listed, ")"), ", ")
	slices.Sort(got)
	slices.Sort(all)
	if !slices.Equal(got, all) {
		t.Errorf("error for an unknown profile = %v, want it to list %s", err, strings.Join(all, ", "))
	}
}
