package nvml

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
)

// Without the privileges for the whole-GPU list in MIG mode, the processes
// are read from each MIG device, one per compute instance: every one of
// them is read, and its processes are placed in its GPU and compute
// instance (the MIG devices' lists leave both unset). A GPU instance split
// in two compute instances kept only the last one's MIG device, so the
// other's processes were not listed, and no process had its compute
// instance. The lists not read (refused; a MIG device of no known GPU
// instance, never asked) set the GPU's ProcessesUnread and their
// instance's: the tuner knows the others' processes gone where missing.
// Compute instances of unknown IDs (-1) are each read. A MIG device never
// asked is of no known instance: every instance's list reads as not read
// (GPU instance 2's, in the case of a device of unknown GPU instance, read
// as whole: the tuner took a process last listed there for gone). Each
// instance says which of its compute instances' lists were read
// (ComputeInstancesRead): a process listed in one is known gone from it
// where missing, whichever device was not read.
func TestMIGProcessesOfEveryComputeInstance(t *testing.T) {
	type migDev struct {
		gi, ci int // -1: NVML does not give it
		pid    uint32
		r      nvml.Return // of its process list
	}
	for _, tc := range []struct {
		name     string
		devs     []migDev
		up       bool
		want     map[uint32][2]int // PID -> GPU instance, compute instance
		unreadGI []int             // the instances whose lists were not read
		readCI   map[int][]int     // GPU instance -> the compute instances whose lists were read
		logs     []string          // in one log line
	}{
		{"two compute instances of one GPU instance",
			[]migDev{{1, 0, 77, nvml.SUCCESS}, {1, 1, 88, nvml.SUCCESS}},
			true, map[uint32][2]int{77: {1, 0}, 88: {1, 1}}, nil, map[int][]int{1: {0, 1}}, nil},
		{"one compute instance in each of two GPU instances",
			[]migDev{{1, 0, 77, nvml.SUCCESS}, {2, 0, 88, nvml.SUCCESS}},
			true, map[uint32][2]int{77: {1, 0}, 88: {2, 0}}, nil, map[int][]int{1: {0}, 2: {0}}, nil},
		{"two compute instances of unknown IDs",
			[]migDev{{1, -1, 77, nvml.SUCCESS}, {1, -1, 88, nvml.SUCCESS}},
			true, map[uint32][2]int{77: {1, -1}, 88: {1, -1}}, nil, map[int][]int{}, nil},
		{"a MIG device's list refused, the others read",
			[]migDev{{1, 0, 77, nvml.ERROR_NO_PERMISSION}, {1, 1, 88, nvml.SUCCESS}, {2, 0, 99, nvml.SUCCESS}},
			true, map[uint32][2]int{88: {1, 1}, 99: {2, 0}}, []int{1}, map[int][]int{1: {1}, 2: {0}},
			[]string{"call=nvmlDeviceGetComputeRunningProcesses(MIG)", "ERROR_NO_PERMISSION"}},
		{"a MIG device of unknown GPU instance",
			[]migDev{{-1, 0, 77, nvml.SUCCESS}, {2, 0, 99, nvml.SUCCESS}},
			true, map[uint32][2]int{99: {2, 0}}, []int{-1, 2}, map[int][]int{2: {0}}, nil},
		{"a MIG device lost: the GPU is down",
			[]migDev{{1, 0, 77, nvml.SUCCESS}, {1, 1, 88, nvml.ERROR_GPU_IS_LOST}},
			false, map[uint32][2]int{}, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			f.enableMIG(0, nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
			f.fail(0, "GetComputeRunningProcesses", nvml.ERROR_NO_PERMISSION)
			var devs []nvml.Device
			for _, m := range tc.devs {
				devs = append(devs, &mock.Device{
					GetUUIDFunc:              func() (string, nvml.Return) { return fmt.Sprintf("MIG-0-%d-%d", m.gi, m.pid), nvml.SUCCESS },
					GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return m.gi, given(m.gi) },
					GetComputeInstanceIdFunc: func() (int, nvml.Return) { return m.ci, given(m.ci) },
					GetMemoryInfoFunc:        func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 40 << 30}, nvml.SUCCESS },
					GetMemoryInfo_v2Func:     func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{Total: 40 << 30}, nvml.SUCCESS },
					GetAttributesFunc: func() (nvml.DeviceAttributes, nvml.Return) {
						return nvml.DeviceAttributes{MultiprocessorCount: 30, GpuInstanceSliceCount: 3, MemorySizeMB: 40192}, nvml.SUCCESS
					},
					GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
						if m.r != nvml.SUCCESS {
							return nil, m.r
						}
						return []nvml.ProcessInfo{{Pid: m.pid, UsedGpuMemory: 1 << 30, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nvml.SUCCESS
					},
				})
			}
			f.devs[0].GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
				if i >= len(devs) {
					return nil, nvml.ERROR_NOT_FOUND
				}
				return devs[i], nvml.SUCCESS
			}
			d := sample(t, f.backend()).Devices[0]
			if d.Up != tc.up {
				t.Fatalf("up %v, want %v", d.Up, tc.up)
			}
			gis := map[int]bool{} // one MIG instance per GPU instance
			for _, m := range tc.devs {
				gis[m.gi] = true
			}
			if tc.up && len(d.MIG) != len(gis) {
				t.Errorf("%d MIG instances, want %d", len(d.MIG), len(gis))
			}
			got := map[uint32][2]int{}
			for _, p := range d.Processes {
				got[p.PID] = [2]int{p.GPUInstanceID, p.ComputeInstanceID}
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("processes (PID: GPU instance, compute instance) %v, want %v", got, tc.want)
			}
			var unread []int
			readCI := map[int][]int{}
			for _, m := range d.MIG {
				if m.ProcessesUnread {
					unread = append(unread, m.GPUInstanceID)
				}
				if m.ComputeInstancesRead != nil {
					readCI[m.GPUInstanceID] = m.ComputeInstancesRead
				}
			}
			if tc.up && !maps.EqualFunc(readCI, tc.readCI, slices.Equal) {
				t.Errorf("compute instances whose lists were read, by GPU instance, %v, want %v", readCI, tc.readCI)
			}
			if tc.up && (!slices.Equal(unread, tc.unreadGI) || d.ProcessesUnread != (tc.unreadGI != nil)) {
				t.Errorf("lists unread of GPU instances %v (the GPU's ProcessesUnread %v), want %v", unread, d.ProcessesUnread, tc.unreadGI)
			}
			if tc.logs != nil && f.logs.count(tc.logs...) != 1 {
				t.Errorf("no log line with %q:\n%s", tc.logs, f.logs.String())
			}
		})
	}
}

// given is what NVML returns with an ID: NOT_SUPPORTED where the ID is -1
// (not given).
func given(id int) nvml.Return {
	if id < 0 {
		return nvml.ERROR_NOT_SUPPORTED
	}
	return nvml.SUCCESS
}

// A MIG device whose list is not asked leaves the GPU's lists and every
// instance's not read, the instance it serves being unknown: one whose
// handle NVML refuses (no instance of it was marked, and a process last
// listed in its instance was taken for gone), and a second compute
// instance of neither UUID nor ID, dropped as the same device in two
// slots (the GPU's lists read as whole: its process was lost). The
// device read is said read (ComputeInstancesRead), where its compute
// instance is known: a process listed in it and missing is known gone.
func TestMIGDeviceNotAskedLeavesEveryInstanceUnread(t *testing.T) {
	migDevice := func(uuid string, gi, ci int, pid uint32) nvml.Device {
		return &mock.Device{
			GetUUIDFunc: func() (string, nvml.Return) {
				if uuid == "" {
					return "", nvml.ERROR_NOT_SUPPORTED
				}
				return uuid, nvml.SUCCESS
			},
			GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return gi, given(gi) },
			GetComputeInstanceIdFunc: func() (int, nvml.Return) { return ci, given(ci) },
			GetMemoryInfoFunc:        func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 40 << 30}, nvml.SUCCESS },
			GetMemoryInfo_v2Func:     func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{Total: 40 << 30}, nvml.SUCCESS },
			GetAttributesFunc: func() (nvml.DeviceAttributes, nvml.Return) {
				return nvml.DeviceAttributes{MultiprocessorCount: 30, GpuInstanceSliceCount: 3, MemorySizeMB: 40192}, nvml.SUCCESS
			},
			GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
				return []nvml.ProcessInfo{{Pid: pid, UsedGpuMemory: 1 << 30, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nvml.SUCCESS
			},
		}
	}
	for _, tc := range []struct {
		name   string
		devs   []nvml.Device // by slot; nil: its handle refused
		readCI []int         // GPU instance 1's compute instances whose lists were read
	}{
		{"a MIG device's handle refused", []nvml.Device{migDevice("MIG-0-1", 1, 0, 77), nil}, []int{0}},
		{"two compute instances of neither UUID nor ID", []nvml.Device{migDevice("", 1, -1, 77), migDevice("", 1, -1, 88)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			f.enableMIG(0, nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
			f.fail(0, "GetComputeRunningProcesses", nvml.ERROR_NO_PERMISSION)
			f.devs[0].GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
				switch {
				case i >= len(tc.devs):
					return nil, nvml.ERROR_NOT_FOUND
				case tc.devs[i] == nil:
					return nil, nvml.ERROR_NO_PERMISSION
				}
				return tc.devs[i], nvml.SUCCESS
			}
			d := sample(t, f.backend()).Devices[0]
			if !d.ProcessesUnread {
				t.Errorf("the GPU's lists read as whole (ProcessesUnread false), processes %v", d.Processes)
			}
			if len(d.MIG) == 0 {
				t.Fatal("no MIG instance read")
			}
			for _, m := range d.MIG {
				if !m.ProcessesUnread {
					t.Errorf("GPU instance %d's lists read as whole, though the instance of the device not asked is unknown", m.GPUInstanceID)
				}
			}
			if got := d.MIG[0].ComputeInstancesRead; !slices.Equal(got, tc.readCI) {
				t.Errorf("GPU instance 1's compute instances whose lists were read %v, want %v", got, tc.readCI)
			}
		})
	}
}

// TestMIGDevicesNotCountedLeaveTheListsUnread: in MIG mode with the
// whole-GPU list refused, a GPU whose MIG device count NVML refuses (or
// whose library lacks the MIG device calls) has no MIG device's list
// read: its lists are not whole (before, read as whole with no process).
func TestMIGDevicesNotCountedLeaveTheListsUnread(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.enableMIG(0, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	f.fail(0, "GetComputeRunningProcesses", nvml.ERROR_NO_PERMISSION)
	f.fail(0, "GetMaxMigDeviceCount", nvml.ERROR_NO_PERMISSION)
	d := sample(t, f.backend()).Devices[0]
	if !d.Up || !d.MIGEnabled {
		t.Fatalf("GPU up %v, MIG %v (%s)", d.Up, d.MIGEnabled, d.Err)
	}
	if !d.ProcessesUnread {
		t.Errorf("the GPU's lists read as whole (ProcessesUnread false), though no MIG device was asked; processes %v", d.Processes)
	}
}
