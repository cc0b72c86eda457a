package nvml

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// maxMIGDevices bounds the MIG device slots read per GPU: a GPU has at
// most 7 compute slices, hence at most 7 MIG devices; nvmlDeviceGetMaxMigDeviceCount
// is trusted up to this.
const maxMIGDevices = 64

// readMIG fills the MIG mode and, in MIG mode, one MIGInstance per GPU
// instance, with the MIG devices of its compute instances (one, unless it
// was split with nvidia-smi mig -cci).
func (rd *devReader) readMIG(d *gpu.Device) {
	b, h := rd.b, rd.ds.handle
	if !b.has(symMigMode) {
		rd.skip(symMigMode)
		return
	}
	cur, _, r := h.GetMigMode()
	if !rd.ok("nvmlDeviceGetMigMode", r) {
		return
	}
	d.MIGEnabled = cur == nvml.DEVICE_MIG_ENABLE
	if !d.MIGEnabled {
		return
	}
	if b.has(symGIProfileInfo) {
		rd.profileNames()
		d.MIGSMCount = rd.ds.giFullSMs
		if rd.fatal != nil {
			return
		}
	}
	if !b.has(symMaxMigDeviceCount, symMigDeviceByIndex) {
		rd.skip(symMigDeviceByIndex)
		rd.migUnlisted = true // no MIG device's list can be read
		return
	}
	n, r := h.GetMaxMigDeviceCount()
	if !rd.ok("nvmlDeviceGetMaxMigDeviceCount", r) {
		rd.migUnlisted = true
		return
	}
	if n > maxMIGDevices {
		rd.b.logOnce(rd.ds.uuid+"/migcount", "msg", "NVML's maximum MIG device count is implausible; only the first slots are read",
			"gpu", rd.ds.index, "uuid", rd.ds.uuid, "count", n, "read", maxMIGDevices)
		n = maxMIGDevices
	}
	type migKey struct{ gi, ci int }
	seen := map[migKey]bool{}
	seenUUID := map[string]bool{}
	byGI := map[int]int{} // index in d.MIG of each GPU instance read
	for i := 0; i < n; i++ {
		m, r := h.GetMigDeviceHandleByIndex(i)
		if r == nvml.ERROR_NOT_FOUND || r == nvml.ERROR_INVALID_ARGUMENT {
			continue // no MIG device in this slot
		}
		if !rd.ok("nvmlDeviceGetMigDeviceHandleByIndex", r) {
			if rd.fatal != nil {
				return
			}
			rd.migUnlisted = true // a MIG device whose list is not read
			continue
		}
		inst := gpu.MIGInstance{GPUInstanceID: -1, ComputeInstanceID: -1}
		if u, r := m.GetUUID(); rd.ok("nvmlDeviceGetUUID(MIG)", r) {
			inst.UUID = u
		}
		if gi, r := m.GetGpuInstanceId(); rd.ok("nvmlDeviceGetGpuInstanceId", r) {
			inst.GPUInstanceID = gi
		}
		if rd.fatal != nil {
			return
		}
		if inst.UUID == "" && inst.GPUInstanceID < 0 {
			// Neither its UUID nor its GPU instance: its compute instance
			// was destroyed since the slot was read (the handle is void).
			continue
		}
		if ci, r := m.GetComputeInstanceId(); rd.ok("nvmlDeviceGetComputeInstanceId", r) {
			inst.ComputeInstanceID = ci
		}
		inst.MemoryTotalBytes, inst.MemoryUsedBytes, _ = rd.memoryInfo(m, "(MIG)")
		var attrs *nvml.DeviceAttributes
		if b.has(symAttributes) || b.has(symAttributesV1) {
			if a, r := m.GetAttributes(); rd.ok("nvmlDeviceGetAttributes", r) {
				attrs = &a
				inst.SMCount = int(a.MultiprocessorCount)
			}
		}
		inst.Profile, inst.ProfileBuilt = rd.migProfile(inst.GPUInstanceID, attrs)
		if rd.fatal != nil {
			return
		}
		// The same MIG device in two slots is one instance.
		if inst.UUID != "" && seenUUID[inst.UUID] {
			continue
		}
		// Two MIG devices of their own UUIDs whose compute instance IDs
		// NVML did not give are two compute instances of the GPU instance
		// (each served with ID -1).
		if k := (migKey{inst.GPUInstanceID, inst.ComputeInstanceID}); inst.GPUInstanceID >= 0 && (inst.ComputeInstanceID >= 0 || inst.UUID == "") {
			if seen[k] {
				// of no UUID nor compute instance ID: the same device in
				// two slots, or another compute instance whose list is
				// not read
				rd.migUnlisted = rd.migUnlisted || inst.ComputeInstanceID < 0
				continue
			}
			seen[k] = true
		}
		if inst.UUID != "" {
			seenUUID[inst.UUID] = true
		}
		if inst.GPUInstanceID >= 0 {
			rd.migHandles = append(rd.migHandles, migHandle{inst.GPUInstanceID, inst.ComputeInstanceID, m})
			// A GPU instance split in several compute instances is one
			// instance, each of its compute instances a MIG device.
			if j, ok := byGI[inst.GPUInstanceID]; ok {
				foldComputeInstance(&d.MIG[j], inst)
				continue
			}
			byGI[inst.GPUInstanceID] = len(d.MIG)
		} else {
			// its processes cannot be placed: its list is not read
			rd.migUnlisted = true
		}
		d.MIG = append(d.MIG, inst)
	}
}

// foldComputeInstance adds m, the MIG device of another compute instance of
// inst's GPU instance, to inst: the first compute instance stays the one of
// the lowest ID, the others follow by ID; the SMs add up (0, unknown, where
// either's is); the memory and the profile, the GPU instance's, are taken
// from m where inst lacks them.
func foldComputeInstance(inst *gpu.MIGInstance, m gpu.MIGInstance) {
	ci := gpu.MIGComputeInstance{UUID: m.UUID, ID: m.ComputeInstanceID}
	if m.ComputeInstanceID >= 0 && (inst.ComputeInstanceID < 0 || m.ComputeInstanceID < inst.ComputeInstanceID) {
		ci, inst.UUID, inst.ComputeInstanceID = gpu.MIGComputeInstance{UUID: inst.UUID, ID: inst.ComputeInstanceID}, m.UUID, m.ComputeInstanceID
	}
	inst.OtherComputeInstances = append(inst.OtherComputeInstances, ci)
	slices.SortStableFunc(inst.OtherComputeInstances, func(a, b gpu.MIGComputeInstance) int { return cmp.Compare(a.ID, b.ID) })
	if inst.SMCount > 0 && m.SMCount > 0 {
		inst.SMCount += m.SMCount
	} else {
		inst.SMCount = 0
	}
	if inst.MemoryTotalBytes == 0 {
		inst.MemoryTotalBytes, inst.MemoryUsedBytes = m.MemoryTotalBytes, m.MemoryUsedBytes
	}
	if inst.Profile == "" || inst.ProfileBuilt && !m.ProfileBuilt && m.Profile != "" {
		inst.Profile, inst.ProfileBuilt = m.Profile, m.ProfileBuilt
	}
}

// migProfile names the profile of GPU instance gi ("3g.71gb"), from the GPU
// instance's profile when the driver says it, else (built) from the MIG
// device's attributes, which carry no variant's suffix: without root
// nvmlDeviceGetGpuInstanceById is refused, and as root it may fail once.
func (rd *devReader) migProfile(gi int, attrs *nvml.DeviceAttributes) (name string, built bool) {
	b, h := rd.b, rd.ds.handle
	if gi >= 0 && b.has(symGpuInstanceByID, symGIProfileInfo) {
		if g, r := h.GetGpuInstanceById(gi); rd.ok("nvmlDeviceGetGpuInstanceById", r) {
			if info, r := g.GetInfo(); rd.ok("nvmlGpuInstanceGetInfo", r) {
				if name, ok := rd.profileNames()[info.ProfileId]; ok {
					return name, false
				}
			}
		}
	}
	if attrs != nil && attrs.GpuInstanceSliceCount > 0 {
		rd.b.logOnce(rd.ds.uuid+"/migbuilt", "msg", "MIG profile named from its slices and memory, without a variant's suffix (+gfx, -me, +me.all, +me); no MIG relayout is planned from such a name",
			"gpu", rd.ds.index, "uuid", rd.ds.uuid, "gpu_instance", gi)
		return fmt.Sprintf("%dg.%dgb", attrs.GpuInstanceSliceCount, memGB(attrs.MemorySizeMB)), true
	}
	return "", false
}

// profileNames are the names of the GPU's GPU instance profiles by profile
// ID, read once per handle, with the SMs of its profile of the most slices
// (ds.giFullSMs). A GPU instance's info gives its profile's ID
// (nvidia-smi mig -lgip's, 9 for an H100's 3g.40gb), which is not the
// index (NVML_GPU_INSTANCE_PROFILE_*) nvmlDeviceGetGpuInstanceProfileInfo
// takes: the index of each ID is found by asking for every index.
func (rd *devReader) profileNames() map[uint32]string {
	ds := rd.ds
	if ds.giProfiles != nil {
		return ds.giProfiles
	}
	profiles, r := rd.b.giProfiles(ds.handle)
	if r != nvml.SUCCESS {
		rd.ok("nvmlDeviceGetGpuInstanceProfileInfo", r)
		return nil
	}
	names := map[uint32]string{}
	var full nvml.GpuInstanceProfileInfo
	for _, p := range profiles {
		if _, dup := names[p.info.Id]; !dup {
			names[p.info.Id] = p.name
		}
		if p.info.SliceCount > full.SliceCount || p.info.SliceCount == full.SliceCount && p.info.MultiprocessorCount > full.MultiprocessorCount {
			full = p.info
		}
	}
	if len(names) > 0 { // none (not in MIG mode yet?): ask again next time
		ds.giProfiles, ds.giFullSMs = names, int(full.MultiprocessorCount)
	}
	return names
}

// giProfile is one GPU instance profile of a GPU: its info and its name.
type giProfile struct {
	info nvml.GpuInstanceProfileInfo
	name string
	// built is the name from the index, slices and memory (profileName),
	// the one served before the driver's own was read: where the two
	// differ ("4g.95gb" against the driver's "4g.96gb"), a layout named
	// so (journaled, or configured) is still known by it
	built string
}

// giProfiles lists the GPU instance profiles of GPU h in index order, each
// named as nvidia-smi mig -lgip names it. An index the GPU has no profile
// at is skipped; a fatal return (a lost GPU) ends the list and is returned.
// The MIG instances' profile label and the MIG layout knob both name
// profiles this way, so a name read from one is accepted by the other.
func (b *Backend) giProfiles(h nvml.Device) ([]giProfile, nvml.Return) {
	var out []giProfile
	for i := 0; i < nvml.GPU_INSTANCE_PROFILE_COUNT; i++ {
		p, r := h.GetGpuInstanceProfileInfo(i)
		if r != nvml.SUCCESS {
			if classify(r) == outcomeFatal {
				return out, r
			}
			continue // an index this GPU has no profile at
		}
		out = append(out, giProfile{info: p, name: b.giProfileName(h, i, p), built: profileName(i, p)})
	}
	return out, nvml.SUCCESS
}

// giProfileName names the GPU instance profile p at index: the driver's own
// name where it gives one (nvmlGpuInstanceProfileInfo_v3_t.name, "MIG
// 1g.24gb+gfx", the name nvidia-smi prints), else the name built from the
// index, slices and memory.
func (b *Backend) giProfileName(h nvml.Device, index int, p nvml.GpuInstanceProfileInfo) string {
	if b.has(symGIProfileInfoV) {
		if v3, r := b.giProfileInfoV3(h, index); r == nvml.SUCCESS && v3.Id == p.Id {
			if name := driverProfileName(v3.Name, p.SliceCount); name != "" {
				return name
			}
		}
	}
	return profileName(index, p)
}

// giProfileInfoV3 asks the driver for the v3 info, which carries the
// profile's name, of the GPU instance profile at index. The version
// mismatch of a driver without v3 leaves the name to be built.
func giProfileInfoV3(h nvml.Device, index int) (nvml.GpuInstanceProfileInfo_v3, nvml.Return) {
	return h.GetGpuInstanceProfileInfoV(index).V3()
}

// driverProfileName is a profile name from the driver without its "MIG "
// prefix ("1g.24gb+me.all"); "" unless it names a profile of that many
// slices in printable ASCII: a byte outside it (not UTF-8, a control
// character) would leave the name no label value, and the profile's
// series unserved.
func driverProfileName(raw [96]int8, slices uint32) string {
	b := make([]byte, 0, len(raw))
	for _, c := range raw {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	name := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(b)), "MIG "))
	if !strings.HasPrefix(name, fmt.Sprintf("%dg.", slices)) || strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return ""
	}
	return name
}

// profileSuffixes are the suffixes nvidia-smi gives the variants of a
// profile by index (NVML_GPU_INSTANCE_PROFILE_*): "+me" with a media
// extension (decoders, encoders, JPEG and OFA shared by no other
// instance), "+me.all" with every media engine of the GPU, "-me" with
// none, "+gfx" with graphics. Every index go-nvml defines is listed, the
// plain ones with "".
var profileSuffixes = map[int]string{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE:        "",
	nvml.GPU_INSTANCE_PROFILE_2_SLICE:        "",
	nvml.GPU_INSTANCE_PROFILE_3_SLICE:        "",
	nvml.GPU_INSTANCE_PROFILE_4_SLICE:        "",
	nvml.GPU_INSTANCE_PROFILE_7_SLICE:        "",
	nvml.GPU_INSTANCE_PROFILE_8_SLICE:        "",
	nvml.GPU_INSTANCE_PROFILE_6_SLICE:        "",
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1:   "+me",
	nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1:   "+me",
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2:   "", // 1g.20gb on an H100: told apart by its memory
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX:    "+gfx",
	nvml.GPU_INSTANCE_PROFILE_2_SLICE_GFX:    "+gfx",
	nvml.GPU_INSTANCE_PROFILE_4_SLICE_GFX:    "+gfx",
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME:  "-me",
	nvml.GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:  "-me",
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME: "+me.all",
	nvml.GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME: "+me.all",
	nvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX:    "+gfx",
}

// profileName builds the nvidia-smi name of the GPU instance profile at
// index (NVML_GPU_INSTANCE_PROFILE_*): slices and memory in GB rounded up
// ("1g.10gb", "3g.71gb") and the suffix of the index's variant
// ("1g.24gb+gfx", "1g.24gb-me").
func profileName(index int, p nvml.GpuInstanceProfileInfo) string {
	return fmt.Sprintf("%dg.%dgb%s", p.SliceCount, memGB(p.MemorySizeMB), profileSuffixes[index])
}

func memGB(mb uint64) uint64 { return uint64(math.Ceil(float64(mb) / 1024)) }
