package nvml

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// h100ProfileIDs are the GPU instance profile IDs an H100 80GB driver
// reports (nvidia-smi mig -lgip, nvmlGpuInstanceProfileInfo_t.id) for each
// profile index (NVML_GPU_INSTANCE_PROFILE_*) the profile is queried by.
// go-nvml's mock gives every profile its index as ID; the driver does not.
var h100ProfileIDs = map[int]uint32{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE:      19, // 1g.10gb
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: 20, // 1g.10gb+me
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: 15, // 1g.20gb
	nvml.GPU_INSTANCE_PROFILE_2_SLICE:      14, // 2g.20gb
	nvml.GPU_INSTANCE_PROFILE_3_SLICE:      9,  // 3g.40gb
	nvml.GPU_INSTANCE_PROFILE_4_SLICE:      5,  // 4g.40gb
	nvml.GPU_INSTANCE_PROFILE_7_SLICE:      0,  // 7g.80gb
}

// driverProfileIDs makes a mock GPU report the driver's profile IDs: in its
// profile infos, in the infos of its GPU instances (those made before too)
// and in the calls that take a profile info. The mock's instances keep the
// index inside, where it keys their compute instance profiles.
func driverProfileIDs(d *server.Device, ids map[int]uint32) {
	index := map[uint32]uint32{}
	for i, id := range ids {
		index[id] = uint32(i)
	}
	byIndex := func(p *nvml.GpuInstanceProfileInfo) *nvml.GpuInstanceProfileInfo {
		q := *p
		q.Id = index[p.Id]
		return &q
	}
	realInfo := func(gi *server.GpuInstance) {
		gi.GetInfoFunc = func() (nvml.GpuInstanceInfo, nvml.Return) {
			info := gi.Info
			info.ProfileId = ids[int(gi.Info.ProfileId)]
			return info, nvml.SUCCESS
		}
	}
	for _, gi := range sortedGIs(d) {
		realInfo(gi)
	}
	profile, create, list := d.GetGpuInstanceProfileInfoFunc, d.CreateGpuInstanceFunc, d.GetGpuInstancesFunc
	d.GetGpuInstanceProfileInfoFunc = func(i int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
		p, r := profile(i)
		if id, ok := ids[i]; ok && r == nvml.SUCCESS {
			p.Id = id
		}
		return p, r
	}
	d.CreateGpuInstanceFunc = func(p *nvml.GpuInstanceProfileInfo) (nvml.GpuInstance, nvml.Return) {
		gi, r := create(byIndex(p))
		if r == nvml.SUCCESS {
			realInfo(gi.(*server.GpuInstance))
		}
		return gi, r
	}
	d.GetGpuInstancesFunc = func(p *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
		return list(byIndex(p))
	}
}

// A MIG instance is named by the profile whose ID its GPU instance has, not
// by the profile at that index: on an H100 the 3g.40gb instance (ID 9) was
// served as 1g.20gb (index 9) and the 7g.80gb one (ID 0) as 1g.10gb.
func TestMIGProfileByDriverID(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.enableMIG(0, nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1)
	f.enableMIG(1, nvml.GPU_INSTANCE_PROFILE_7_SLICE)
	driverProfileIDs(f.devs[0], h100ProfileIDs)
	driverProfileIDs(f.devs[1], h100ProfileIDs)
	b := f.backend()
	rd := sample(t, b)
	for dev, want := range [][]string{{"3g.40gb", "1g.10gb+me"}, {"7g.80gb"}} {
		var got []string
		for _, m := range rd.Devices[dev].MIG {
			got = append(got, m.Profile)
		}
		if !slices.Equal(got, want) {
			t.Errorf("GPU %d MIG profiles %v, want %v", dev, got, want)
		}
	}
	if n := f.logs.count("call=nvmlDeviceGetGpuInstanceProfileInfo"); n != 0 {
		t.Errorf("%d log lines about nvmlDeviceGetGpuInstanceProfileInfo:\n%s", n, f.logs.String())
	}
}

// The MIG layout knob knows the media-extension profile by its name on a
// driver whose profile IDs are not the indices (1g.10gb+me has ID 20, not
// index 7, on an H100): it was refused as an unknown profile.
func TestConfigureMIGByDriverID(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.enableMIG(0, nvml.GPU_INSTANCE_PROFILE_7_SLICE)
	driverProfileIDs(f.devs[0], h100ProfileIDs)
	b := f.backend()
	want := []string{"3g.40gb", "1g.10gb+me", "2g.20gb"}
	if err := b.ConfigureMIG(context.Background(), f.devs[0].UUID, want); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Second)
	var got []string
	for _, m := range sample(t, b).Devices[0].MIG {
		got = append(got, m.Profile)
	}
	if !slices.Equal(got, want) {
		t.Errorf("layout after ConfigureMIG = %v, want %v", got, want)
	}
	f.closeWithoutLeaks(b)
}

// The driver's own profile name (v3 profile info, "MIG 4g.96gb+gfx") is
// the name nvidia-smi prints: it wins over the one built from the index,
// slices and memory, whose rounding may differ (4g.95gb), in the MIG
// instances' profile and in the MIG layout knob alike. A name that does
// not name a profile of its slices is not taken.
func TestMIGProfileDriverNames(t *testing.T) {
	f := newFixture(t, rtxProServer(t))
	names := map[int]string{}
	want := map[int]string{}
	for _, p := range rtxProProfiles {
		names[p.index] = "MIG " + strings.Replace(p.want, "4g.95gb", "4g.96gb", 1)
		want[p.index] = strings.TrimPrefix(names[p.index], "MIG ")
	}
	names[nvml.GPU_INSTANCE_PROFILE_2_SLICE] = "MIG 7g.48gb" // not a 2-slice name
	want[nvml.GPU_INSTANCE_PROFILE_2_SLICE] = "2g.48gb"
	names[nvml.GPU_INSTANCE_PROFILE_1_SLICE] = ""
	want[nvml.GPU_INSTANCE_PROFILE_1_SLICE] = "1g.24gb"
	f.driverGINames(0, names)
	f.enableMIG(0, nvml.GPU_INSTANCE_PROFILE_4_SLICE_GFX)
	b := f.backend()
	if mig := sample(t, b).Devices[0].MIG; len(mig) != 1 || mig[0].Profile != "4g.96gb+gfx" {
		t.Errorf("MIG instances %+v, want one of profile 4g.96gb+gfx", mig)
	}
	for _, p := range rtxProProfiles {
		if err := b.ConfigureMIG(context.Background(), f.devs[0].UUID, []string{strings.ToUpper(want[p.index])}); err != nil {
			t.Errorf("ConfigureMIG(%q): %v", want[p.index], err)
			continue
		}
		f.clock.Advance(time.Second)
		if mig := sample(t, b).Devices[0].MIG; len(mig) != 1 || mig[0].Profile != want[p.index] {
			t.Errorf("after ConfigureMIG(%q): %+v", want[p.index], mig)
		}
	}
	// the name built before the driver's was read, which a layout
	// journaled then holds, is still known (not listed)
	if err := b.ConfigureMIG(context.Background(), f.devs[0].UUID, []string{"4g.95gb"}); err != nil {
		t.Errorf("ConfigureMIG(4g.95gb), the name built from slices and memory: %v", err)
	} else {
		f.clock.Advance(time.Second)
		if mig := sample(t, b).Devices[0].MIG; len(mig) != 1 || mig[0].Profile != "4g.96gb" {
			t.Errorf("after ConfigureMIG(4g.95gb): %+v, want one instance served as 4g.96gb", mig)
		}
	}
	err := b.ConfigureMIG(context.Background(), f.devs[0].UUID, []string{"5g.1gb"})
	if err == nil || !strings.Contains(err.Error(), "4g.96gb, ") || strings.Contains(err.Error(), "4g.95gb") {
		t.Errorf("ConfigureMIG(5g.1gb) = %v, want it refused with the driver's names listed, not the built ones", err)
	}
}

// Every GPU instance profile index go-nvml defines has its suffix: an
// index added by a newer go-nvml fails here until it is named.
func TestProfileSuffixesCoverEveryIndex(t *testing.T) {
	for i := 0; i < nvml.GPU_INSTANCE_PROFILE_COUNT; i++ {
		if _, ok := profileSuffixes[i]; !ok {
			t.Errorf("GPU instance profile index %d has no suffix", i)
		}
	}
	if len(profileSuffixes) != nvml.GPU_INSTANCE_PROFILE_COUNT {
		t.Errorf("%d suffixes for %d profile indices", len(profileSuffixes), nvml.GPU_INSTANCE_PROFILE_COUNT)
	}
}
