package nvml

import (
	"fmt"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// maxMIGDevices bounds the MIG device slots read per GPU: a GPU has at
// most 7 compute slices, hence at most 7 MIG devices; nvmlDeviceGetMaxMigDeviceCount
// is trusted up to this.
const maxMIGDevices = 64

// readMIG fills the MIG mode and, in MIG mode, one MIGInstance per MIG
// device (GPU instance with its compute instance).
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
	if !b.has(symMaxMigDeviceCount, symMigDeviceByIndex) {
		rd.skip(symMigDeviceByIndex)
		return
	}
	n, r := h.GetMaxMigDeviceCount()
	if !rd.ok("nvmlDeviceGetMaxMigDeviceCount", r) {
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
	for i := 0; i < n; i++ {
		m, r := h.GetMigDeviceHandleByIndex(i)
		if r == nvml.ERROR_NOT_FOUND || r == nvml.ERROR_INVALID_ARGUMENT {
			continue // no MIG device in this slot
		}
		if !rd.ok("nvmlDeviceGetMigDeviceHandleByIndex", r) {
			if rd.fatal != nil {
				return
			}
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
		inst.Profile = rd.migProfile(inst.GPUInstanceID, attrs)
		if rd.fatal != nil {
			return
		}
		// The same MIG device in two slots is one instance.
		if inst.UUID != "" && seenUUID[inst.UUID] {
			continue
		}
		if k := (migKey{inst.GPUInstanceID, inst.ComputeInstanceID}); inst.GPUInstanceID >= 0 {
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		if inst.UUID != "" {
			seenUUID[inst.UUID] = true
		}
		if inst.GPUInstanceID >= 0 {
			rd.migHandles = append(rd.migHandles, migHandle{inst.GPUInstanceID, inst.ComputeInstanceID, m})
		}
		d.MIG = append(d.MIG, inst)
	}
}

// migProfile names the profile of GPU instance gi ("3g.71gb"), from the GPU
// instance's profile when the driver says it, else from the MIG device's
// attributes.
func (rd *devReader) migProfile(gi int, attrs *nvml.DeviceAttributes) string {
	b, h := rd.b, rd.ds.handle
	if gi >= 0 && b.has(symGpuInstanceByID, symGIProfileInfo) {
		if g, r := h.GetGpuInstanceById(gi); rd.ok("nvmlDeviceGetGpuInstanceById", r) {
			if info, r := g.GetInfo(); rd.ok("nvmlGpuInstanceGetInfo", r) {
				if name, ok := rd.profileNames()[info.ProfileId]; ok {
					return name
				}
			}
		}
	}
	if attrs != nil && attrs.GpuInstanceSliceCount > 0 {
		return fmt.Sprintf("%dg.%dgb", attrs.GpuInstanceSliceCount, memGB(attrs.MemorySizeMB))
	}
	return ""
}

// profileNames are the names of the GPU's GPU instance profiles by profile
// ID, read once per handle. A GPU instance's info gives its profile's ID
// (nvidia-smi mig -lgip's, 9 for an H100's 3g.40gb), which is not the
// index (NVML_GPU_INSTANCE_PROFILE_*) nvmlDeviceGetGpuInstanceProfileInfo
// takes: the index of each ID is found by asking for every index.
func (rd *devReader) profileNames() map[uint32]string {
	ds := rd.ds
	if ds.giProfiles != nil {
		return ds.giProfiles
	}
	names := map[uint32]string{}
	for i := 0; i < nvml.GPU_INSTANCE_PROFILE_COUNT; i++ {
		p, r := ds.handle.GetGpuInstanceProfileInfo(i)
		if r != nvml.SUCCESS {
			if classify(r) == outcomeFatal {
				rd.ok("nvmlDeviceGetGpuInstanceProfileInfo", r)
				return nil
			}
			continue // an index this GPU has no profile at
		}
		if _, dup := names[p.Id]; !dup {
			names[p.Id] = profileName(i, p)
		}
	}
	if len(names) > 0 { // none (not in MIG mode yet?): ask again next time
		ds.giProfiles = names
	}
	return names
}

// profileName builds the nvidia-smi name of the GPU instance profile at
// index (NVML_GPU_INSTANCE_PROFILE_*): slices and memory in GB rounded up
// ("1g.10gb", "3g.71gb"), "+me" for the media-extension variants.
func profileName(index int, p nvml.GpuInstanceProfileInfo) string {
	name := fmt.Sprintf("%dg.%dgb", p.SliceCount, memGB(p.MemorySizeMB))
	switch index {
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1:
		name += "+me"
	}
	return name
}

func memGB(mb uint64) uint64 { return uint64(math.Ceil(float64(mb) / 1024)) }
