package nvml

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
)

// A vGPU instance NVML lists twice is one instance: reported once, with
// its utilization (a second copy double-counted its framebuffer in the
// tenant's memory and took the utilization away from the copy served).
func TestVGPUListedTwice(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	a, b2 := newTestVgpu(11, "vm-a", "H100-20C"), newTestVgpu(12, "vm-b", "H100-20C")
	vms := []nvml.VgpuInstance{a, b2, a}
	vgpuHost(f, 0, &vms)
	b := f.backend()
	sample(t, b)
	f.clock.Advance(time.Second)
	d := sample(t, b).Devices[0]
	if len(d.VGPUs) != 2 {
		t.Fatalf("%d vGPU instances, want 2: %+v", len(d.VGPUs), d.VGPUs)
	}
	if v := d.VGPUs[0]; v.ID != 11 || v.SMUtil == nil || *v.SMUtil != 0.5 {
		t.Errorf("vGPU %+v, want ID 11 with SM utilization 0.5", v)
	}
}

// A MIG device NVML returns at two indices is one instance.
func TestMIGDeviceListedTwice(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.enableMIG(0, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	d0 := f.devs[0]
	d0.GetMigDeviceHandleByIndexFunc = func(idx int) (nvml.Device, nvml.Return) {
		return f.migDevice(0, d0, sortedGIs(d0)[0]), nvml.SUCCESS // every slot
	}
	b := f.backend()
	d := sample(t, b).Devices[0]
	if len(d.MIG) != 1 {
		t.Errorf("%d MIG instances, want 1: %+v", len(d.MIG), d.MIG)
	}
}

// An absurd maximum MIG device count is not walked slot by slot: the
// sample stays bounded (it was 2^31 calls, a hang).
func TestMIGDeviceCountAbsurd(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.enableMIG(0, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	f.devs[0].GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 1 << 20, nvml.SUCCESS }
	b := f.backend()
	d := sample(t, b).Devices[0]
	if n := len(f.devs[0].GetMigDeviceHandleByIndexCalls()); n > maxMIGDevices {
		t.Errorf("%d nvmlDeviceGetMigDeviceHandleByIndex calls for one sample, want at most %d", n, maxMIGDevices)
	}
	if len(d.MIG) != 1 {
		t.Errorf("MIG %+v", d.MIG)
	}
}

// An absurd GPU count is refused with an error at start, not walked (it
// was 2^32-1 handles asked for and as many GPUs kept).
func TestGPUCountAbsurd(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.srv.DeviceGetCountFunc = func() (int, nvml.Return) { return math.MaxUint32, nvml.SUCCESS }
	done := make(chan error, 1)
	go func() {
		b, err := New(Options{Lib: f.srv, Clock: f.clock})
		if err == nil {
			_ = b.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("New accepted 4294967295 GPUs")
		}
		t.Log(err)
	case <-time.After(20 * time.Second):
		t.Fatal("New still enumerating 4294967295 GPUs after 20s")
	}
}

// A utilization sample stamped in the future (a driver glitch, or the
// host clock stepped back) must not stop the later intervals' figures:
// lastSeen was set to one far ahead and the driver then had nothing newer
// for ever; one 30 s ahead, within the minute of slack there was, was
// averaged in and hid the figures for 30 of the next 40 samples. The
// driver and the exporter read the same clock: a few seconds of slack.
func TestProcessUtilizationFutureTimestamp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stamp   func(now time.Time) uint64
		counted bool // the sample is in the mean
	}{
		{"far ahead", func(time.Time) uint64 { return math.MaxUint64 - 1 }, false},
		{"30 s ahead", func(now time.Time) uint64 { return uint64(now.Add(30 * time.Second).UnixMicro()) }, false},
		{"a second ahead", func(now time.Time) uint64 { return uint64(now.Add(time.Second).UnixMicro()) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			f.setProcs(0, []nvml.ProcessInfo{{Pid: 1, UsedGpuMemory: 1, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nil)
			b := f.backend()
			sample(t, b)
			good := f.devs[0].GetProcessUtilizationFunc
			f.devs[0].GetProcessUtilizationFunc = func(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
				s, r := good(lastSeen)
				return append(s, nvml.ProcessUtilizationSample{Pid: 1, TimeStamp: tc.stamp(f.clock.Now()), SmUtil: 100}), r
			}
			f.clock.Advance(time.Second)
			want := 0.6 // the fixture's 50 % and 70 %
			if tc.counted {
				want = (50 + 70 + 100) / 300.0
			}
			if p := sample(t, b).Devices[0].Processes[0]; p.SMUtil == nil || *p.SMUtil != want {
				t.Errorf("SM %v, want %g", p.SMUtil, want)
			}
			f.devs[0].GetProcessUtilizationFunc = good
			missing := 0
			for i := 0; i < 40; i++ {
				f.clock.Advance(time.Second)
				p := sample(t, b).Devices[0].Processes
				switch {
				case len(p) != 1:
					t.Fatalf("sample %d after: %+v", i, p)
				case p[0].SMUtil == nil:
					missing++
				case *p[0].SMUtil != 0.6:
					t.Errorf("sample %d after: SM %g, want 0.6", i, *p[0].SMUtil)
				}
			}
			if missing > 1 {
				t.Errorf("SM utilization absent in %d of the next 40 one-second samples, want at most 1", missing)
			}
		})
	}
}

// The same for vGPU instance utilization.
func TestVGPUUtilizationFutureTimestamp(t *testing.T) {
	f, b := twoVMHost(t)
	good := f.devs[0].GetVgpuUtilizationFunc
	f.devs[0].GetVgpuUtilizationFunc = func(lastSeen uint64) (nvml.ValueType, []nvml.VgpuInstanceUtilizationSample, nvml.Return) {
		vt, s, r := good(lastSeen)
		return vt, append(s, nvml.VgpuInstanceUtilizationSample{VgpuInstance: 11, TimeStamp: 1 << 62, SmUtil: u32(99)}), r
	}
	f.clock.Advance(time.Second)
	sample(t, b)
	f.devs[0].GetVgpuUtilizationFunc = good
	for i := 0; i < 3; i++ {
		f.clock.Advance(time.Second)
		v := sample(t, b).Devices[0].VGPUs[0]
		if v.SMUtil == nil || *v.SMUtil != 0.5 {
			t.Fatalf("sample %d after the future timestamp: %v, want SM 0.5", i, v.SMUtil)
		}
	}
}

// A context-switch figure no GPU can reach over the interval (1e300
// requests in a second) is left out: it was added, and the counter stuck
// at 2^63 for good (uint64 of a float beyond range).
func TestGPMContextSwitchesImplausible(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	b := f.backend()
	sample(t, b)
	f.clock.Advance(time.Second)
	before := *sample(t, b).Devices[0].ContextSwitchesTotal
	f.mu.Lock()
	f.gpmOverride = map[nvml.GpmMetricId]float64{nvml.GPM_METRIC_GR0_CTXSW_REQUESTS: 1e300, nvml.GPM_METRIC_GR1_CTXSW_CYCLES_ACTIVE: 1e300}
	f.mu.Unlock()
	f.clock.Advance(time.Second)
	sample(t, b)
	f.mu.Lock()
	f.gpmOverride = nil
	f.mu.Unlock()
	f.clock.Advance(time.Second)
	d := sample(t, b).Devices[0]
	// 7 plausible engines x 3, then 8 x 3
	if got := *d.ContextSwitchesTotal; got != before+21+24 {
		t.Errorf("context switches %d -> %d, want +45", before, got)
	}
	if got := *d.ContextSwitchCyclesTotal; got > 1e12 {
		t.Errorf("context-switch cycles %d after an implausible figure", got)
	}
}

// An event set whose wait returns at once (ERROR_TIMEOUT without waiting,
// or events of no GPU of this host) must not spin a core: the watcher
// waits at least eventMinTurn per turn that brought nothing.
func TestEventWaitReturningAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		data nvml.EventData
		r    nvml.Return
	}{
		{"timeout", nvml.EventData{}, nvml.ERROR_TIMEOUT},
		{"no device", nvml.EventData{EventType: nvml.EventTypeXidCriticalError, EventData: 79}, nvml.SUCCESS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			var waits atomic.Int64
			f.srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
				return &mock.EventSet{
					WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
						waits.Add(1)
						return tc.data, tc.r
					},
					FreeFunc: func() nvml.Return { return nvml.SUCCESS },
				}, nvml.SUCCESS
			}
			b := f.backend()
			const span = 500 * time.Millisecond
			time.Sleep(span)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if n, most := waits.Load(), int64(span/eventMinTurn)+2; n > most {
				t.Errorf("%d waits in %v, want at most %d", n, span, most)
			}
		})
	}
}

// A vGPU scheduler log whose timestamps go back (a GPU reset restarts
// them, or one entry was stamped far ahead) is followed again once the
// entry out of line has left the log: every later entry was dropped as
// not newer than it.
func TestVGPUSchedulerLogTimestampsGoBack(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	vms := []nvml.VgpuInstance{newTestVgpu(11, "vm-a", "H100-20C")}
	vgpuHost(f, 0, &vms)
	good := f.devs[0].GetVgpuSchedulerLog_v2Func
	b := f.backend()
	sample(t, b)
	f.devs[0].GetVgpuSchedulerLog_v2Func = func(in nvml.VgpuSchedulerLogInfo_v2) (nvml.VgpuSchedulerLogInfo_v2, nvml.Return) {
		in.EntriesCount = 1
		in.LogEntries[0] = nvml.VgpuSchedulerLogEntry_v2{Timestamp: 1 << 62, SwRunlistId: 5}
		return in, nvml.SUCCESS
	}
	sample(t, b)
	f.devs[0].GetVgpuSchedulerLog_v2Func = good
	var n int
	for i := 0; i < 3; i++ {
		n += len(sample(t, b).Devices[0].Scheduler.Log)
	}
	if n == 0 {
		t.Errorf("no scheduler log entry in 3 samples after one stamped 2^62 ns")
	}
}

// A GPU whose MIG mode is turned off (instances destroyed, the GPU reset
// while the exporter runs) frees the GPM samples it kept per GPU instance
// at the next sample: they were held until the GPU was lost or the
// exporter stopped.
func TestMIGOffFreesInstanceSamples(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.enableMIG(0, nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_2_SLICE)
	b := f.backend()
	sample(t, b)
	f.clock.Advance(time.Second)
	sample(t, b)
	held := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.alloced - f.freed
	}
	before := held()
	d := f.devs[0]
	for _, gi := range sortedGIs(d) {
		for ci := range gi.ComputeInstances {
			ci.Destroy()
		}
		gi.Destroy()
	}
	d.SetMigMode(nvml.DEVICE_MIG_DISABLE)
	f.clock.Advance(time.Second)
	if rd := sample(t, b); rd.Devices[0].MIGEnabled {
		t.Fatal("MIG still on")
	}
	if after := held(); after != before-2 {
		t.Errorf("%d GPM samples held after MIG was turned off, want %d (the two instances' freed)", after, before-2)
	}
	f.closeWithoutLeaks(b)
}

// A VM that stops between NVML's list of active vGPUs and the reads of its
// instance (NOT_FOUND: no longer an active instance) is not reported: it
// was, for that sample, a vGPU with no UUID, type or VM, a VM of no tenant.
func TestVGPUGoneBetweenListAndRead(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	a, gone := newTestVgpu(11, "vm-a", "H100-20C"), newTestVgpu(12, "vm-b", "H100-20C")
	vms := []nvml.VgpuInstance{a, gone}
	vgpuHost(f, 0, &vms)
	b := f.backend()
	sample(t, b)
	gone.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_NOT_FOUND }
	gone.GetVmIDFunc = func() (string, nvml.VgpuVmIdType, nvml.Return) { return "", 0, nvml.ERROR_NOT_FOUND }
	gone.GetTypeFunc = func() (nvml.VgpuTypeId, nvml.Return) { return nil, nvml.ERROR_NOT_FOUND }
	gone.GetFbUsageFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_FOUND }
	f.clock.Advance(time.Second)
	d := sample(t, b).Devices[0]
	if !d.Up || len(d.VGPUs) != 1 || d.VGPUs[0].ID != 11 || d.VGPUs[0].VMID != "vm-a" {
		t.Errorf("vGPUs %+v (up %v), want only instance 11 of vm-a", d.VGPUs, d.Up)
	}
}

// A vGPU whose framebuffer use NVML does not give was read as using none:
// it is unknown now (nil), as a process's used memory NVML does not give
// is; the rest of the instance is read.
func TestVGPUFramebufferUsedUnread(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	a := newTestVgpu(11, "vm-a", "H100-20C")
	a.GetFbUsageFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	vms := []nvml.VgpuInstance{a}
	vgpuHost(f, 0, &vms)
	d := sample(t, f.backend()).Devices[0]
	if !d.Up || len(d.VGPUs) != 1 {
		t.Fatalf("vGPUs %+v (up %v), want instance 11", d.VGPUs, d.Up)
	}
	if v := d.VGPUs[0]; v.FramebufferUsed != nil || v.FramebufferBytes != 20<<30 || v.VMID != "vm-a" {
		t.Errorf("vGPU %+v, framebuffer used %v: want it unknown (nil), the rest read", v, v.FramebufferUsed)
	}
}

// A MIG device destroyed between the read of its slot and the reads of the
// device (its handle void: neither its UUID nor its GPU instance answers)
// is left out: it was served for that sample as an instance with no UUID,
// GPU instance (-1) or profile.
func TestMIGDeviceGoneBetweenSlotAndRead(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.enableMIG(5, nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_2_SLICE)
	d := f.devs[5]
	byIndex := d.GetMigDeviceHandleByIndexFunc
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		h, r := byIndex(i)
		if m, ok := h.(*mock.Device); ok && i == 1 {
			void := nvml.ERROR_INVALID_ARGUMENT
			m.GetUUIDFunc = func() (string, nvml.Return) { return "", void }
			m.GetGpuInstanceIdFunc = func() (int, nvml.Return) { return 0, void }
			m.GetComputeInstanceIdFunc = func() (int, nvml.Return) { return 0, void }
			m.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, void }
			m.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, void }
			m.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) { return nvml.DeviceAttributes{}, void }
		}
		return h, r
	}
	b := f.backend()
	got := sample(t, b).Devices[5]
	if !got.Up || len(got.MIG) != 1 || got.MIG[0].UUID != "MIG-5-0" || got.MIG[0].Profile != "3g.40gb" {
		t.Errorf("MIG instances %+v (up %v), want only the 3g.40gb one", got.MIG, got.Up)
	}
}
