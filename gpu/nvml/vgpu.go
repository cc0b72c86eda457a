package nvml

import (
	"encoding/binary"
	"math"
	"reflect"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// vgpuIDer is implemented by vGPU instance handles that can say their ID
// (test doubles); real handles are the ID itself.
type vgpuIDer interface{ VgpuInstanceID() uint32 }

// vgpuID returns the NVML vGPU instance ID of a handle.
func vgpuID(v nvml.VgpuInstance) (uint32, bool) {
	if v == nil {
		return 0, false
	}
	if i, ok := v.(vgpuIDer); ok {
		return i.VgpuInstanceID(), true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Uint32, reflect.Uint, reflect.Uint64:
		return uint32(rv.Uint()), true
	}
	return 0, false
}

// isVGPUHost says whether the GPU runs the vGPU host driver.
func (rd *devReader) isVGPUHost() bool {
	if !rd.b.has(symVirtMode) {
		rd.skip(symVirtMode)
		rd.ds.hostVGPU = false
		return false
	}
	m, r := rd.ds.handle.GetVirtualizationMode()
	rd.ds.hostVGPU = rd.ok("nvmlDeviceGetVirtualizationMode", r) && m == nvml.GPU_VIRTUALIZATION_MODE_HOST_VGPU
	return rd.ds.hostVGPU
}

// readVGPU fills the vGPU scheduler, the vGPU instances with their
// utilization, and the processes inside the VMs with theirs.
func (rd *devReader) readVGPU(d *gpu.Device, now time.Time) {
	if !rd.isVGPUHost() || rd.fatal != nil {
		return
	}
	if !d.MIGEnabled { // the scheduler is per GPU and not supported in MIG mode
		d.Scheduler = rd.readScheduler()
	}
	if rd.fatal != nil {
		return
	}
	b, ds, h := rd.b, rd.ds, rd.ds.handle
	byID := map[uint32]int{}
	if b.has(symActiveVgpus) {
		list, r := h.GetActiveVgpus()
		if rd.ok("nvmlDeviceGetActiveVgpus", r) {
			for _, v := range list {
				id, ok := vgpuID(v)
				if _, dup := byID[id]; !ok || dup {
					continue // listed twice: one instance
				}
				inst := gpu.VGPUInstance{ID: id}
				u, r := v.GetUUID()
				if r == nvml.ERROR_NOT_FOUND {
					continue // its VM stopped since the list: no longer an active instance
				}
				if rd.ok("nvmlVgpuInstanceGetUUID", r) {
					inst.UUID = u
				}
				vm, typ, r := v.GetVmID()
				if r == nvml.ERROR_NOT_FOUND {
					continue
				}
				if rd.ok("nvmlVgpuInstanceGetVmID", r) {
					inst.VMID = vm
					if typ == nvml.VGPU_VM_ID_UUID && b.vms != nil {
						// KVM: the VM's QEMU process, by the UUID, told
						// from others that claim it by the vGPU's
						// mediated device where the driver names one
						mdev := ""
						if b.has(symVgpuMdevUUID) {
							// a hint: no error of it is taken for a GPU
							// that stopped answering
							if m, r := v.GetMdevUUID(); r == nvml.SUCCESS {
								mdev = m
							} else {
								b.logOnce(rd.ds.uuid+"/nvmlVgpuInstanceGetMdevUUID", "msg", "vGPU's mediated device unknown; its VM's process is told from others without it",
									"gpu", rd.ds.index, "uuid", rd.ds.uuid, "call", "nvmlVgpuInstanceGetMdevUUID", "reason", returnName(r))
							}
						}
						if pid, name, ok := b.vms.Find(vm, mdev); ok {
							inst.HostPID, inst.VMName = pid, name
						}
					}
				}
				if t, r := v.GetType(); rd.ok("nvmlVgpuInstanceGetType", r) && t != nil {
					if name, r := t.GetName(); rd.ok("nvmlVgpuTypeGetName", r) {
						inst.Type = name
					}
					if fb, r := t.GetFramebufferSize(); rd.ok("nvmlVgpuTypeGetFramebufferSize", r) {
						inst.FramebufferBytes = fb
					}
				}
				if used, r := v.GetFbUsage(); rd.ok("nvmlVgpuInstanceGetFbUsage", r) {
					inst.FramebufferUsed = gpu.Uint(used)
				}
				if rd.fatal != nil {
					return
				}
				byID[id] = len(d.VGPUs)
				d.VGPUs = append(d.VGPUs, inst)
			}
		}
	} else {
		rd.skip(symActiveVgpus)
	}
	if rd.fatal != nil || len(d.VGPUs) == 0 {
		return
	}
	if b.has(symVgpuUtil) {
		vt, samples, r := h.GetVgpuUtilization(ds.vgpuLastSeen.since(usNow(now)))
		if r == nvml.ERROR_NOT_FOUND {
			ds.vgpuLastSeen.noSample()
		}
		if rd.ok("nvmlDeviceGetVgpuUtilization", r) {
			means := newUtilMeans[uint32](&ds.vgpuLastSeen, usNow(now))
			for _, s := range samples {
				means.add(s.VgpuInstance, s.TimeStamp, decodeValue(vt, s.SmUtil), decodeValue(vt, s.MemUtil),
					decodeValue(vt, s.EncUtil), decodeValue(vt, s.DecUtil))
			}
			rd.oddSamples("nvmlDeviceGetVgpuUtilization", means.odd)
			for _, id := range means.keys {
				if i, ok := byID[id]; ok {
					v, a := &d.VGPUs[i], means.acc[id]
					v.SMUtil, v.MemUtil, v.EncUtil, v.DecUtil = a.ratio(0), a.ratio(1), a.ratio(2), a.ratio(3)
				}
			}
		}
	} else {
		rd.skip(symVgpuUtil)
	}
	if rd.fatal != nil {
		return
	}
	if b.has(symVgpuProcUtil) {
		samples, r := h.GetVgpuProcessUtilization(ds.vgpuProcLastSeen.since(usNow(now)))
		if r == nvml.ERROR_NOT_FOUND {
			ds.vgpuProcLastSeen.noSample()
		}
		if rd.ok("nvmlDeviceGetVgpuProcessUtilization", r) {
			type key struct{ vgpu, pid uint32 }
			means := newUtilMeans[key](&ds.vgpuProcLastSeen, usNow(now))
			for _, s := range samples {
				if a, isNew := means.add(key{s.VgpuInstance, s.Pid}, s.TimeStamp, float64(s.SmUtil), float64(s.MemUtil)); isNew {
					a.name = cString(s.ProcessName[:])
				}
			}
			rd.oddSamples("nvmlDeviceGetVgpuProcessUtilization", means.odd)
			for _, k := range means.keys {
				a := means.acc[k]
				d.Processes = append(d.Processes, gpu.Process{
					PID: k.pid, Name: a.name, Type: gpu.ProcessCompute,
					GPUInstanceID: -1, ComputeInstanceID: -1, VGPUInstance: k.vgpu, UID: -1,
					SMUtil: a.ratio(0), MemUtil: a.ratio(1),
				})
			}
			sortProcesses(d.Processes)
		}
	} else {
		rd.skip(symVgpuProcUtil)
	}
}

// readScheduler reads the vGPU scheduler capabilities, state and the log
// entries since the previous sample (v2, with weights, where the driver has
// it).
func (rd *devReader) readScheduler() *gpu.VGPUScheduler {
	b, ds, h := rd.b, rd.ds, rd.ds.handle
	if !b.has(symSchedState) && !b.has(symSchedStateV2) {
		rd.skip(symSchedState)
		return nil
	}
	s := &gpu.VGPUScheduler{}
	got := false
	if b.has(symSchedCaps) {
		if c, r := h.GetVgpuSchedulerCapabilities(); rd.ok("nvmlDeviceGetVgpuSchedulerCapabilities", r) {
			s.MinTimeSlice = time.Duration(c.MinTimeslice)
			s.MaxTimeSlice = time.Duration(c.MaxTimeslice)
		}
	}
	if b.has(symSchedState) {
		if st, r := h.GetVgpuSchedulerState(); rd.ok("nvmlDeviceGetVgpuSchedulerState", r) {
			got = true
			s.Policy = policyName(st.SchedulerPolicy)
			s.ARREnabled = st.ArrMode == nvml.VGPU_SCHEDULER_ARR_ENABLE
			p := st.SchedulerParams[:]
			if s.ARREnabled {
				s.AvgFactor = binary.LittleEndian.Uint32(p[0:4])
				s.TimeSlice = time.Duration(binary.LittleEndian.Uint32(p[4:8]))
			} else {
				s.TimeSlice = time.Duration(binary.LittleEndian.Uint32(p[0:4]))
			}
		}
	}
	if b.has(symSchedStateV2) {
		in := nvml.VgpuSchedulerStateInfo_v2{EngineId: nvml.VGPU_SCHEDULER_ENGINE_TYPE_GRAPHICS}
		if st, r := h.GetVgpuSchedulerState_v2(in); rd.ok("nvmlDeviceGetVgpuSchedulerState_v2", r) {
			got = true
			s.Policy = policyName(st.SchedulerPolicy)
			s.AvgFactor = st.AvgFactor
			s.TimeSlice = time.Duration(st.Timeslice)
		}
	}
	if !got {
		return nil
	}
	s.Frequency = arrFrequency(s.ARREnabled, s.TimeSlice)
	switch {
	case b.has(symSchedLogV2):
		in := nvml.VgpuSchedulerLogInfo_v2{EngineId: nvml.VGPU_SCHEDULER_ENGINE_TYPE_GRAPHICS}
		if lg, r := h.GetVgpuSchedulerLog_v2(in); rd.ok("nvmlDeviceGetVgpuSchedulerLog_v2", r) {
			n := min(int(lg.EntriesCount), len(lg.LogEntries))
			entries := make([]schedEntry, 0, n)
			for _, e := range lg.LogEntries[:n] {
				entries = append(entries, schedEntry{e.Timestamp, e.TimeRun, e.TimeRunTotal, e.TargetTimeSlice, e.CumulativePreemptionTime, e.SwRunlistId, e.Weight})
			}
			s.Log = ds.newSchedLog(entries)
		}
	case b.has(symSchedLog):
		if lg, r := h.GetVgpuSchedulerLog(); rd.ok("nvmlDeviceGetVgpuSchedulerLog", r) {
			n := min(int(lg.EntriesCount), len(lg.LogEntries))
			entries := make([]schedEntry, 0, n)
			for _, e := range lg.LogEntries[:n] {
				// The v1 log has no weights.
				entries = append(entries, schedEntry{e.Timestamp, e.TimeRun, e.TimeRunTotal, e.TargetTimeSlice, e.CumulativePreemptionTime, e.SwRunlistId, 0})
			}
			s.Log = ds.newSchedLog(entries)
		}
	}
	return s
}

// arrFrequency is the adaptive round robin frequency in Hz. NVML's state
// has no frequency field: a frequency set (nvmlVgpuSchedulerSetParams_t's
// vgpuSchedDataWithARR.frequency) is read back as the time slice of each
// software runlist in the same place of the union, one period of it. 0
// with ARR off or no time slice.
func arrFrequency(arr bool, slice time.Duration) uint32 {
	if !arr || slice <= 0 {
		return 0
	}
	return uint32(math.Round(float64(time.Second) / float64(slice)))
}

// schedEntry is one vGPU scheduler log entry of either log version (ns).
type schedEntry struct {
	ts, run, runTotal, target, preempt uint64
	runlist, weight                    uint32
}

// newSchedLog returns the entries newer than the newest one of the
// previous sample and remembers the newest. A log whose newest entry is
// older than that (the timestamps restarted, or the one remembered was
// stamped out of line) is taken as the new start: none of it is returned,
// and the entries after it are.
func (ds *devState) newSchedLog(entries []schedEntry) []gpu.VGPUSchedulerLogEntry {
	if len(entries) > 0 {
		newest := entries[0].ts
		for _, e := range entries[1:] {
			newest = max(newest, e.ts)
		}
		if newest < ds.schedLastTS {
			ds.schedLastTS = newest
			return nil
		}
	}
	var out []gpu.VGPUSchedulerLogEntry
	last := ds.schedLastTS
	for _, e := range entries {
		if e.ts <= ds.schedLastTS {
			continue
		}
		last = max(last, e.ts)
		out = append(out, gpu.VGPUSchedulerLogEntry{
			Timestamp:        time.Unix(0, clampInt64(e.ts)),
			Runlist:          e.runlist,
			RunTime:          time.Duration(clampInt64(e.run)),
			RunTimeTotal:     time.Duration(clampInt64(e.runTotal)),
			TargetTimeSlice:  time.Duration(clampInt64(e.target)),
			CumulativePreemp: time.Duration(clampInt64(e.preempt)),
			Weight:           e.weight,
		})
	}
	ds.schedLastTS = last
	return out
}

func clampInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

func policyName(p uint32) gpu.VGPUPolicy {
	switch p {
	case nvml.VGPU_SCHEDULER_POLICY_BEST_EFFORT:
		return gpu.VGPUPolicyBestEffort
	case nvml.VGPU_SCHEDULER_POLICY_EQUAL_SHARE:
		return gpu.VGPUPolicyEqualShare
	case nvml.VGPU_SCHEDULER_POLICY_FIXED_SHARE:
		return gpu.VGPUPolicyFixedShare
	}
	return "unknown"
}

func policyID(name gpu.VGPUPolicy) (uint32, bool) {
	switch name {
	case gpu.VGPUPolicyBestEffort:
		return nvml.VGPU_SCHEDULER_POLICY_BEST_EFFORT, true
	case gpu.VGPUPolicyEqualShare:
		return nvml.VGPU_SCHEDULER_POLICY_EQUAL_SHARE, true
	case gpu.VGPUPolicyFixedShare:
		return nvml.VGPU_SCHEDULER_POLICY_FIXED_SHARE, true
	}
	return 0, false
}

// decodeValue reads an NVML value union of the given type (little-endian).
func decodeValue(t nvml.ValueType, v [8]byte) float64 {
	switch t {
	case nvml.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(binary.LittleEndian.Uint64(v[:]))
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(binary.LittleEndian.Uint32(v[:4]))
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(binary.LittleEndian.Uint64(v[:]))
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.LittleEndian.Uint64(v[:])))
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.LittleEndian.Uint32(v[:4])))
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(binary.LittleEndian.Uint16(v[:2]))
	}
	return 0
}
