package nvml

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// NVML has no call for MPS, the compute time-slice level or placement: the
// Backend does not offer those actuators at all (they belong to the MPS
// control daemon, nvidia-smi and the orchestrator), and its capability lists
// never name their knobs.
func TestNoNonNVMLActuators(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	nb := f.backend()
	sample(t, nb)
	var b any = nb
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"gpu.MPSActuator", is[gpu.MPSActuator](b)},
		{"gpu.TimeSliceActuator", is[gpu.TimeSliceActuator](b)},
		{"gpu.PlacementActuator", is[gpu.PlacementActuator](b)},
	} {
		if tc.ok {
			t.Errorf("the NVML backend implements %s", tc.name)
		}
	}
	for _, d := range f.devs {
		for _, k := range b.(gpu.CapabilityLister).Capabilities(d.UUID) {
			switch k {
			case gpu.KnobMPSActiveThreads, gpu.KnobMPSPinnedMemory, gpu.KnobComputeTimeSlice, gpu.KnobPlacement:
				t.Errorf("GPU %s lists %s", d.UUID, k)
			}
		}
	}
}

func is[T any](v any) bool {
	_, ok := v.(T)
	return ok
}

func TestLockClocks(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	b := f.backend()
	ctx := context.Background()
	d := f.devs[1]
	uuid := d.UUID
	for _, tc := range []struct {
		name    string
		lock    gpu.ClockLock
		inject  nvml.Return
		wantErr string
		is      error
		set     int // SetGpuLockedClocks calls expected after this case (cumulative)
		reset   int
	}{
		{"lock", gpu.ClockLock{MinMHz: 1500, MaxMHz: 1980}, nvml.SUCCESS, "", nil, 1, 0},
		{"min above max", gpu.ClockLock{MinMHz: 1900, MaxMHz: 1500}, nvml.SUCCESS, "invalid SM clock range", nil, 1, 0},
		{"above GPU max", gpu.ClockLock{MinMHz: 1500, MaxMHz: 2500}, nvml.SUCCESS, "above the GPU's maximum", nil, 1, 0},
		{"no permission", gpu.ClockLock{MinMHz: 1500, MaxMHz: 1600}, nvml.ERROR_NO_PERMISSION, "root", nil, 2, 0},
		{"not supported", gpu.ClockLock{MinMHz: 1500, MaxMHz: 1600}, nvml.ERROR_NOT_SUPPORTED, "NOT_SUPPORTED", gpu.ErrNotSupported, 3, 0},
		// a retired call is not supported: not retried as a failure
		{"deprecated", gpu.ClockLock{MinMHz: 1500, MaxMHz: 1600}, nvml.ERROR_DEPRECATED, "DEPRECATED", gpu.ErrNotSupported, 4, 0},
		{"reset", gpu.ClockLock{}, nvml.SUCCESS, "", nil, 4, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.fail(1, "SetGpuLockedClocks", tc.inject)
			defer f.fail(1, "SetGpuLockedClocks", nvml.SUCCESS)
			err := b.LockClocks(ctx, uuid, tc.lock)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err %v is not %v", err, tc.is)
			}
			if got := len(d.SetGpuLockedClocksCalls()); got != tc.set {
				t.Errorf("SetGpuLockedClocks calls = %d, want %d", got, tc.set)
			}
			if got := len(d.ResetGpuLockedClocksCalls()); got != tc.reset {
				t.Errorf("ResetGpuLockedClocks calls = %d, want %d", got, tc.reset)
			}
		})
	}
	// The lock state shows in the readings.
	if err := b.LockClocks(ctx, uuid, gpu.ClockLock{MinMHz: 1000, MaxMHz: 1000}); err != nil {
		t.Fatal(err)
	}
	rd := sample(t, b)
	if !*rd.Devices[1].ClocksLocked || rd.Devices[0].ClocksLocked != nil {
		t.Errorf("ClocksLocked = %v / %v", *rd.Devices[1].ClocksLocked, rd.Devices[0].ClocksLocked)
	}
	if err := b.LockClocks(ctx, "GPU-nope", gpu.ClockLock{}); err == nil || !strings.Contains(err.Error(), "no GPU") {
		t.Errorf("unknown UUID: %v", err)
	}
}

// A driver without the SM clock lock calls refuses the lock as not
// supported without calling them (the mock panics if called), and does not
// list the knob.
func TestLockClocksMissingSymbol(t *testing.T) {
	for _, sym := range []string{symSetGpuLocked, symResetGpuLocked} {
		t.Run(sym, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			f.setMissing(sym)
			for _, d := range f.devs {
				d.SetGpuLockedClocksFunc = nil
				d.ResetGpuLockedClocksFunc = nil
			}
			b := f.backend()
			uuid := f.devs[0].UUID
			for _, l := range []gpu.ClockLock{{MinMHz: 1, MaxMHz: 2}, {}} {
				if err := b.LockClocks(context.Background(), uuid, l); !errors.Is(err, gpu.ErrNotSupported) {
					t.Errorf("LockClocks(%v): err = %v, want gpu.ErrNotSupported", l, err)
				}
			}
			sample(t, b)
			if caps := b.Capabilities(uuid); len(caps) == 0 || slices.Contains(caps, gpu.KnobLockedClocks) {
				t.Errorf("GPU %s lists %v, want knobs without %s", uuid, caps, gpu.KnobLockedClocks)
			}
		})
	}
}

func TestSetPowerLimit(t *testing.T) {
	f := newFixture(t, dgxh200.New())
	b := f.backend()
	d := f.devs[2]
	var set []uint32
	d.SetPowerManagementLimitFunc = func(mw uint32) nvml.Return { set = append(set, mw); return nvml.SUCCESS }
	for _, tc := range []struct {
		watts   float64
		wantErr string
		wantMW  uint32
	}{
		{450, "", 450000},
		{0, "", 700000}, // default
		{100, "outside the GPU's range 200-700 W", 0},
		{900, "outside", 0},
		{-1, "invalid", 0},
	} {
		set = nil
		err := b.SetPowerLimit(context.Background(), d.UUID, tc.watts)
		if tc.wantErr == "" {
			if err != nil || len(set) != 1 || set[0] != tc.wantMW {
				t.Errorf("SetPowerLimit(%v) = %v, set %v", tc.watts, err, set)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) || len(set) != 0 {
			t.Errorf("SetPowerLimit(%v) = %v (set %v), want %q", tc.watts, err, set, tc.wantErr)
		}
	}
}

// A power limit or SM clock outside what the GPU accepts now is refused
// before any driver call with the range it accepts (*gpu.RangeError), so
// that a restore of an original read under a wider range (before a driver
// or firmware update) can set the nearest value instead of failing for good.
func TestRangeRefusalNamesRange(t *testing.T) {
	f := newFixture(t, dgxh200.New())
	b := f.backend()
	d := f.devs[2]
	maxMHz, _ := d.GetMaxClockInfo(nvml.CLOCK_SM)
	for _, tc := range []struct {
		name string
		call func() error
		want gpu.RangeError
	}{
		{"power above", func() error { return b.SetPowerLimit(context.Background(), d.UUID, 900) },
			gpu.RangeError{GPU: d.UUID, What: "power limit", Unit: "W", Value: 900, Min: 200, Max: 700}},
		{"power below", func() error { return b.SetPowerLimit(context.Background(), d.UUID, 100) },
			gpu.RangeError{GPU: d.UUID, What: "power limit", Unit: "W", Value: 100, Min: 200, Max: 700}},
		{"clock above", func() error {
			return b.LockClocks(context.Background(), d.UUID, gpu.ClockLock{MinMHz: 1500, MaxMHz: maxMHz + 100})
		}, gpu.RangeError{GPU: d.UUID, What: "SM clock", Unit: "MHz", Value: float64(maxMHz + 100), Max: float64(maxMHz)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var re *gpu.RangeError
			if err := tc.call(); !errors.As(err, &re) || *re != tc.want {
				t.Fatalf("err %v (%+v), want %+v", err, re, tc.want)
			}
		})
	}
	if n := len(d.SetPowerManagementLimitCalls()) + len(d.SetGpuLockedClocksCalls()); n != 0 {
		t.Errorf("%d driver calls, want none", n)
	}
}

// testVgpu is a mock vGPU instance that says its ID.
type testVgpu struct {
	*mock.VgpuInstance
	id uint32
}

func (v testVgpu) VgpuInstanceID() uint32 { return v.id }

func newTestVgpu(id uint32, vm, typ string) testVgpu {
	tid := &mock.VgpuTypeId{
		GetNameFunc:            func() (string, nvml.Return) { return typ, nvml.SUCCESS },
		GetFramebufferSizeFunc: func() (uint64, nvml.Return) { return 20 << 30, nvml.SUCCESS },
	}
	return testVgpu{id: id, VgpuInstance: &mock.VgpuInstance{
		GetUUIDFunc:     func() (string, nvml.Return) { return "vgpu-" + vm, nvml.SUCCESS },
		GetVmIDFunc:     func() (string, nvml.VgpuVmIdType, nvml.Return) { return vm, nvml.VGPU_VM_ID_UUID, nvml.SUCCESS },
		GetMdevUUIDFunc: func() (string, nvml.Return) { return "mdev-of-" + vm, nvml.SUCCESS },
		GetTypeFunc:     func() (nvml.VgpuTypeId, nvml.Return) { return tid, nvml.SUCCESS },
		GetFbUsageFunc:  func() (uint64, nvml.Return) { return 3 << 30, nvml.SUCCESS },
	}}
}

func u32(v uint32) [8]byte {
	var b [8]byte
	binary.LittleEndian.PutUint32(b[:], v)
	return b
}

// vgpuHost turns GPU dev of the fixture into a vGPU host with the given VMs.
func vgpuHost(f *fixture, dev int, vms *[]nvml.VgpuInstance) {
	d := f.devs[dev]
	d.GetVirtualizationModeFunc = func() (nvml.GpuVirtualizationMode, nvml.Return) {
		return nvml.GPU_VIRTUALIZATION_MODE_HOST_VGPU, nvml.SUCCESS
	}
	d.GetActiveVgpusFunc = func() ([]nvml.VgpuInstance, nvml.Return) { return *vms, nvml.SUCCESS }
	d.GetVgpuSchedulerCapabilitiesFunc = func() (nvml.VgpuSchedulerCapabilities, nvml.Return) {
		return nvml.VgpuSchedulerCapabilities{
			SupportedSchedulers: [3]uint32{1, 2, 3}, MinTimeslice: 1_000_000, MaxTimeslice: 30_000_000,
			IsArrModeSupported: 1, MinFrequencyForARR: 64, MaxFrequencyForARR: 960, MinAvgFactorForARR: 1, MaxAvgFactorForARR: 60,
		}, nvml.SUCCESS
	}
	d.GetVgpuSchedulerStateFunc = func() (nvml.VgpuSchedulerGetState, nvml.Return) {
		st := nvml.VgpuSchedulerGetState{SchedulerPolicy: nvml.VGPU_SCHEDULER_POLICY_BEST_EFFORT, ArrMode: nvml.VGPU_SCHEDULER_ARR_ENABLE}
		binary.LittleEndian.PutUint32(st.SchedulerParams[0:4], 33)
		binary.LittleEndian.PutUint32(st.SchedulerParams[4:8], 2_000_000)
		return st, nvml.SUCCESS
	}
	d.GetVgpuSchedulerState_v2Func = func(in nvml.VgpuSchedulerStateInfo_v2) (nvml.VgpuSchedulerStateInfo_v2, nvml.Return) {
		in.SchedulerPolicy, in.AvgFactor, in.Timeslice = nvml.VGPU_SCHEDULER_POLICY_BEST_EFFORT, 33, 2_000_000
		return in, nvml.SUCCESS
	}
	var logTS uint64 = 1_000
	d.GetVgpuSchedulerLog_v2Func = func(in nvml.VgpuSchedulerLogInfo_v2) (nvml.VgpuSchedulerLogInfo_v2, nvml.Return) {
		// a rolling log: the last 3 entries, one new per call
		logTS++
		in.EntriesCount = 3
		for k := 0; k < 3; k++ {
			ts := logTS - uint64(2-k)
			in.LogEntries[k] = nvml.VgpuSchedulerLogEntry_v2{Timestamp: ts, TimeRun: 1_500_000, TimeRunTotal: 3_000 * ts, SwRunlistId: uint32(ts % 2),
				TargetTimeSlice: 2_000_000, CumulativePreemptionTime: 10_000 * ts, Weight: 2}
		}
		return in, nvml.SUCCESS
	}
	// Utilization samples at the fake clock's time, newer than lastSeen
	// only, as the driver answers.
	d.GetVgpuUtilizationFunc = func(lastSeen uint64) (nvml.ValueType, []nvml.VgpuInstanceUtilizationSample, nvml.Return) {
		ts := uint64(f.clock.Now().UnixMicro())
		var out []nvml.VgpuInstanceUtilizationSample
		for _, s := range []nvml.VgpuInstanceUtilizationSample{
			{VgpuInstance: 11, TimeStamp: ts - 500, SmUtil: u32(40), MemUtil: u32(10)},
			{VgpuInstance: 11, TimeStamp: ts, SmUtil: u32(60), MemUtil: u32(30)},
			{VgpuInstance: 12, TimeStamp: ts, SmUtil: u32(5), MemUtil: u32(1)},
		} {
			if s.TimeStamp > lastSeen {
				out = append(out, s)
			}
		}
		if len(out) == 0 {
			return nvml.VALUE_TYPE_UNSIGNED_INT, nil, nvml.ERROR_NOT_FOUND
		}
		return nvml.VALUE_TYPE_UNSIGNED_INT, out, nvml.SUCCESS
	}
	d.GetVgpuProcessUtilizationFunc = func(lastSeen uint64) ([]nvml.VgpuProcessUtilizationSample, nvml.Return) {
		s := nvml.VgpuProcessUtilizationSample{VgpuInstance: 11, Pid: 4242, TimeStamp: uint64(f.clock.Now().UnixMicro()), SmUtil: 50, MemUtil: 20}
		copy(s.ProcessName[:], []int8{'p', 'y'})
		if s.TimeStamp <= lastSeen {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return []nvml.VgpuProcessUtilizationSample{s}, nvml.SUCCESS
	}
	d.SetVgpuSchedulerState_v2Func = func(*nvml.VgpuSchedulerState_v2) nvml.Return { return nvml.SUCCESS }
	d.SetVgpuSchedulerStateFunc = func(*nvml.VgpuSchedulerSetState) nvml.Return { return nvml.SUCCESS }
}

func TestVGPUReadings(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	vms := []nvml.VgpuInstance{newTestVgpu(11, "vm-a", "H100-20C"), newTestVgpu(12, "vm-b", "H100-20C")}
	vgpuHost(f, 0, &vms)
	b := f.backend()
	rd := sample(t, b)
	d := rd.Devices[0]
	if d.Mode != gpu.SharingVGPU || d.Scheduler == nil {
		t.Fatalf("mode %q scheduler %v", d.Mode, d.Scheduler)
	}
	s := d.Scheduler
	if s.Policy != "best-effort" || !s.ARREnabled || s.AvgFactor != 33 || s.TimeSlice != 2*time.Millisecond || s.Frequency != 500 ||
		s.MinTimeSlice != time.Millisecond || s.MaxTimeSlice != 30*time.Millisecond {
		t.Errorf("scheduler %+v", s)
	}
	// Entries 999-1001 ns: runlists 1, 0, 1.
	if len(s.Log) != 3 || s.Log[0].Weight != 2 || s.Log[0].RunTime != 1500*time.Microsecond ||
		s.Log[0].Runlist != 1 || s.Log[1].Runlist != 0 || s.Log[2].CumulativePreemp != 10_010*time.Microsecond || s.Log[2].RunTimeTotal != 3_003*time.Microsecond ||
		!s.Log[2].Timestamp.Equal(time.Unix(0, 1001)) || s.Log[2].TargetTimeSlice != 2*time.Millisecond {
		t.Errorf("log %+v", s.Log)
	}
	if len(d.VGPUs) != 2 {
		t.Fatalf("vGPUs %+v", d.VGPUs)
	}
	// The first utilization answers only set lastSeen.
	if d.VGPUs[0].SMUtil != nil || len(d.Processes) != 0 {
		t.Errorf("utilization on the first sample: %v, processes %+v", d.VGPUs[0].SMUtil, d.Processes)
	}
	f.clock.Advance(time.Second)
	rd = sample(t, b)
	d = rd.Devices[0]
	v := d.VGPUs[0]
	if v.ID != 11 || v.VMID != "vm-a" || v.Type != "H100-20C" || v.FramebufferBytes != 20<<30 || v.FramebufferUsed == nil || *v.FramebufferUsed != 3<<30 ||
		*v.SMUtil != 0.5 || *v.MemUtil != 0.2 {
		t.Errorf("vGPU %+v", v)
	}
	if len(d.Processes) != 1 || d.Processes[0].VGPUInstance != 11 || d.Processes[0].Name != "py" || *d.Processes[0].SMUtil != 0.5 {
		t.Errorf("vGPU processes %+v", d.Processes)
	}
	// The next sample carries only the new log entry.
	if l := d.Scheduler.Log; len(l) != 1 || l[0].Runlist != 0 || !l[0].Timestamp.Equal(time.Unix(0, 1002)) {
		t.Errorf("second log = %+v, want the one entry of 1002 ns, runlist 0", l)
	}
	// No sample newer than lastSeen (the clock did not move): no
	// utilization for this interval, no process figures.
	rd = sample(t, b)
	if v := rd.Devices[0].VGPUs[0]; v.SMUtil != nil || v.MemUtil != nil {
		t.Errorf("vGPU utilization without new samples: %v %v", v.SMUtil, v.MemUtil)
	}
	if p := rd.Devices[0].Processes; len(p) != 0 {
		t.Errorf("vGPU processes without new samples: %+v", p)
	}
	if rd.Devices[1].Scheduler != nil {
		t.Errorf("scheduler on a non-vGPU GPU")
	}
}

func TestSetVGPUScheduler(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	var vms []nvml.VgpuInstance
	vgpuHost(f, 0, &vms)
	f.enableMIG(3, nvml.GPU_INSTANCE_PROFILE_7_SLICE)
	vgpuHost(f, 3, &vms)
	b := f.backend()
	ctx := context.Background()
	u0 := f.devs[0].UUID
	for _, tc := range []struct {
		name    string
		uuid    string
		vms     []nvml.VgpuInstance
		s       gpu.VGPUSchedulerSetting
		is      error
		wantErr string
		v1, v2  int // calls expected (cumulative)
	}{
		{"equal share with slice", u0, nil, gpu.VGPUSchedulerSetting{Policy: "equal-share", TimeSlice: 2 * time.Millisecond}, nil, "", 1, 0},
		{"best effort ARR", u0, nil, gpu.VGPUSchedulerSetting{Policy: "best-effort", ARREnabled: true, AvgFactor: 30, Frequency: 480}, nil, "", 1, 1},
		{"fixed share default slice", u0, nil, gpu.VGPUSchedulerSetting{Policy: "fixed-share"}, nil, "", 1, 2},
		// v2 has no ARR switch: ARR off goes through v1.
		{"best effort without ARR", u0, nil, gpu.VGPUSchedulerSetting{Policy: "best-effort"}, nil, "", 2, 2},
		{"VMs running", u0, []nvml.VgpuInstance{newTestVgpu(1, "vm", "t")}, gpu.VGPUSchedulerSetting{Policy: "fixed-share"}, gpu.ErrBusy, "VMs are running", 2, 2},
		{"MIG on", f.devs[3].UUID, nil, gpu.VGPUSchedulerSetting{Policy: "fixed-share"}, gpu.ErrBusy, "MIG", 2, 2},
		{"slice out of range", u0, nil, gpu.VGPUSchedulerSetting{Policy: "fixed-share", TimeSlice: time.Second}, nil, "outside", 2, 2},
		{"ARR frequency out of range", u0, nil, gpu.VGPUSchedulerSetting{Policy: "best-effort", ARREnabled: true, Frequency: 5000}, nil, "frequency", 2, 2},
		{"ARR on fixed share", u0, nil, gpu.VGPUSchedulerSetting{Policy: "fixed-share", ARREnabled: true}, nil, "best-effort policy only", 2, 2},
		{"unknown policy", u0, nil, gpu.VGPUSchedulerSetting{Policy: "fair"}, nil, "unknown vGPU scheduler policy", 2, 2},
		{"not a vGPU host", f.devs[1].UUID, nil, gpu.VGPUSchedulerSetting{Policy: "fixed-share"}, gpu.ErrNotSupported, "not a vGPU host", 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vms = tc.vms
			err := b.SetVGPUScheduler(ctx, tc.uuid, tc.s)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err %v is not %v", err, tc.is)
			}
			d := f.devs[0]
			if got := len(d.SetVgpuSchedulerStateCalls()); got != tc.v1 {
				t.Errorf("v1 set calls %d, want %d", got, tc.v1)
			}
			if got := len(d.SetVgpuSchedulerState_v2Calls()); got != tc.v2 {
				t.Errorf("v2 set calls %d, want %d", got, tc.v2)
			}
		})
	}
	// The v1 call carried the time slice.
	c := f.devs[0].SetVgpuSchedulerStateCalls()[0].VgpuSchedulerSetState
	if c.SchedulerPolicy != nvml.VGPU_SCHEDULER_POLICY_EQUAL_SHARE || binary.LittleEndian.Uint32(c.SchedulerParams[:4]) != 2_000_000 {
		t.Errorf("v1 call %+v", c)
	}
	sample(t, b)
	if !slices.Contains(b.Capabilities(u0), gpu.KnobVGPUScheduler) || slices.Contains(b.Capabilities(f.devs[3].UUID), gpu.KnobVGPUScheduler) {
		t.Errorf("capabilities %v / %v", b.Capabilities(u0), b.Capabilities(f.devs[3].UUID))
	}
}

func TestConfigureMIG(t *testing.T) {
	f := newFixture(t, dgxh200.New())
	f.enableMIG(1, nvml.GPU_INSTANCE_PROFILE_7_SLICE)
	b := f.backend()
	ctx := context.Background()
	uuid := f.devs[1].UUID

	// MIG off on GPU 0.
	if err := b.ConfigureMIG(ctx, f.devs[0].UUID, []string{"3g.71gb"}); !errors.Is(err, gpu.ErrBusy) || !strings.Contains(err.Error(), "-mig 1") {
		t.Errorf("MIG off: %v", err)
	}
	// Unknown profile: nothing touched.
	if err := b.ConfigureMIG(ctx, uuid, []string{"3g.71gb", "5g.99gb"}); err == nil || !strings.Contains(err.Error(), `unknown MIG profile "5g.99gb"`) ||
		!strings.Contains(err.Error(), "4g.71gb") {
		t.Errorf("unknown profile: %v", err)
	}
	// Processes running: refused.
	f.setProcs(1, []nvml.ProcessInfo{{Pid: 5, GpuInstanceId: 0, ComputeInstanceId: 0}}, nil)
	if err := b.ConfigureMIG(ctx, uuid, []string{"3g.71gb", "4g.71gb"}); !errors.Is(err, gpu.ErrBusy) || !strings.Contains(err.Error(), "1 processes") {
		t.Errorf("busy: %v", err)
	}
	if rd := sample(t, b); len(rd.Devices[1].MIG) != 1 || rd.Devices[1].MIG[0].Profile != "7g.141gb" {
		t.Fatalf("layout changed by a refused call: %+v", rd.Devices[1].MIG)
	}
	// Drained: replaced.
	f.setProcs(1, nil, nil)
	if err := b.ConfigureMIG(ctx, uuid, []string{"3g.71gb", "4g.71gb"}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Second)
	rd := sample(t, b)
	var got []string
	for _, m := range rd.Devices[1].MIG {
		got = append(got, m.Profile)
	}
	if !slices.Equal(got, []string{"3g.71gb", "4g.71gb"}) {
		t.Errorf("layout after ConfigureMIG = %v", got)
	}
	if rd.Devices[1].MIG[1].SMCount != 64 {
		t.Errorf("4g SMs = %d", rd.Devices[1].MIG[1].SMCount)
	}
	if !slices.Contains(b.Capabilities(uuid), gpu.KnobMIGLayout) || slices.Contains(b.Capabilities(f.devs[0].UUID), gpu.KnobMIGLayout) {
		t.Errorf("capabilities %v", b.Capabilities(uuid))
	}
	caps := b.Capabilities(f.devs[0].UUID)
	if !slices.Equal(caps, []gpu.Knob{gpu.KnobLockedClocks, gpu.KnobPowerLimit}) {
		t.Errorf("capabilities of a plain GPU = %v", caps)
	}
	f.closeWithoutLeaks(b)
}

func TestControlConcurrentWithSample(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	b := f.backend()
	sample(t, b) // (the knobs listed are the last sample's)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k := 0; k < 50; k++ {
			// A failing call would leave nothing running beside Sample.
			if err := b.LockClocks(context.Background(), f.devs[k%8].UUID, gpu.ClockLock{MinMHz: 1000, MaxMHz: 1500}); err != nil {
				t.Errorf("LockClocks: %v", err)
				return
			}
			if len(b.Capabilities(f.devs[k%8].UUID)) == 0 {
				t.Errorf("no capabilities for GPU %d", k%8)
				return
			}
		}
	}()
	for k := 0; k < 50; k++ {
		sample(t, b)
	}
	<-done
}

func TestControlInUseIsBusy(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	var vms []nvml.VgpuInstance
	vgpuHost(f, 0, &vms)
	f.devs[0].SetVgpuSchedulerState_v2Func = func(*nvml.VgpuSchedulerState_v2) nvml.Return { return nvml.ERROR_IN_USE }
	b := f.backend()
	err := b.SetVGPUScheduler(context.Background(), f.devs[0].UUID, gpu.VGPUSchedulerSetting{Policy: "equal-share"})
	if !errors.Is(err, gpu.ErrBusy) {
		t.Fatalf("err = %v, want ErrBusy", err)
	}
}

func TestConfigureMIGCreateFails(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.enableMIG(0, nvml.GPU_INSTANCE_PROFILE_7_SLICE)
	d := f.devs[0]
	create := d.CreateGpuInstanceFunc
	n := 0
	d.CreateGpuInstanceFunc = func(p *nvml.GpuInstanceProfileInfo) (nvml.GpuInstance, nvml.Return) {
		n++
		if n == 2 {
			return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
		return create(p)
	}
	b := f.backend()
	err := b.ConfigureMIG(context.Background(), d.UUID, []string{"3g.40gb", "4g.40gb"})
	if err == nil || !strings.Contains(err.Error(), "creating MIG instance 2 of 2 (4g.40gb)") {
		t.Fatalf("err = %v", err)
	}
	rd := sample(t, b)
	if len(rd.Devices[0].MIG) != 1 || rd.Devices[0].MIG[0].Profile != "3g.40gb" {
		t.Errorf("layout after a failed create: %+v", rd.Devices[0].MIG)
	}
}

// An older vGPU driver without the v2 scheduler calls: state and log come
// from the v1 calls and settings go through the v1 call.
func TestVGPUSchedulerV1Only(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	vms := []nvml.VgpuInstance{}
	vgpuHost(f, 0, &vms)
	f.setMissing(symSchedStateV2, symSchedLogV2, symSetSchedStateV2)
	d := f.devs[0]
	d.GetVgpuSchedulerState_v2Func = nil
	d.GetVgpuSchedulerLog_v2Func = nil
	d.SetVgpuSchedulerState_v2Func = nil
	d.GetVgpuSchedulerLogFunc = func() (nvml.VgpuSchedulerLog, nvml.Return) {
		lg := nvml.VgpuSchedulerLog{EntriesCount: 2}
		lg.LogEntries[0] = nvml.VgpuSchedulerLogEntry{Timestamp: 5, TimeRun: 1000}
		lg.LogEntries[1] = nvml.VgpuSchedulerLogEntry{Timestamp: 6, TimeRun: 2000, SwRunlistId: 3, CumulativePreemptionTime: 700}
		return lg, nvml.SUCCESS
	}
	b := f.backend()
	rd := sample(t, b)
	s := rd.Devices[0].Scheduler
	if s == nil || s.Policy != "best-effort" || !s.ARREnabled || s.AvgFactor != 33 || s.TimeSlice != 2*time.Millisecond || len(s.Log) != 2 || s.Log[1].RunTime != 2*time.Microsecond ||
		s.Log[1].Runlist != 3 || s.Log[1].CumulativePreemp != 700 || s.Log[1].Weight != 0 {
		t.Fatalf("scheduler %+v", s)
	}
	// ARR through the v1 call: average factor and frequency in the params.
	err := b.SetVGPUScheduler(context.Background(), d.UUID, gpu.VGPUSchedulerSetting{Policy: "best-effort", ARREnabled: true, AvgFactor: 20, Frequency: 100})
	if err != nil {
		t.Fatal(err)
	}
	c := d.SetVgpuSchedulerStateCalls()
	if len(c) != 1 || c[0].VgpuSchedulerSetState.EnableARRMode != nvml.VGPU_SCHEDULER_ARR_ENABLE ||
		binary.LittleEndian.Uint32(c[0].VgpuSchedulerSetState.SchedulerParams[0:4]) != 20 ||
		binary.LittleEndian.Uint32(c[0].VgpuSchedulerSetState.SchedulerParams[4:8]) != 100 {
		t.Errorf("v1 set calls %+v", c)
	}
}

// A driver with only the v2 set call cannot set a time slice or turn ARR off.
func TestVGPUSchedulerV2Only(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	vms := []nvml.VgpuInstance{}
	vgpuHost(f, 0, &vms)
	f.setMissing(symSetSchedState)
	d := f.devs[0]
	d.SetVgpuSchedulerStateFunc = nil
	b := f.backend()
	ctx := context.Background()
	for _, s := range []gpu.VGPUSchedulerSetting{
		{Policy: "best-effort"},
		{Policy: "equal-share", TimeSlice: 2 * time.Millisecond},
	} {
		if err := b.SetVGPUScheduler(ctx, d.UUID, s); !errors.Is(err, gpu.ErrNotSupported) {
			t.Errorf("%+v: err = %v, want ErrNotSupported", s, err)
		}
	}
	if err := b.SetVGPUScheduler(ctx, d.UUID, gpu.VGPUSchedulerSetting{Policy: "equal-share"}); err != nil {
		t.Errorf("equal share through v2: %v", err)
	}
	if n := len(d.SetVgpuSchedulerState_v2Calls()); n != 1 {
		t.Errorf("v2 set calls %d, want 1", n)
	}
}

// fakeVMs is a VM finder with fixed answers, recording its lookups (VM
// and mediated device).
type fakeVMs struct {
	vms   map[string]uint32
	asked []string
}

func (f *fakeVMs) Find(id, mdev string) (uint32, string, bool) {
	f.asked = append(f.asked, id+" "+mdev)
	pid, ok := f.vms[id]
	return pid, "name-of-" + id, ok
}

// A KVM host's VM (ID type UUID) gets its QEMU process and name from the
// finder, asked with the vGPU's mediated device (none where the driver
// does not say it); a domain ID (Xen) is not looked up; a VM the finder
// does not know has neither.
func TestVGPUHostProcess(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	dom := newTestVgpu(13, "7", "H100-20C")
	dom.GetVmIDFunc = func() (string, nvml.VgpuVmIdType, nvml.Return) { return "7", nvml.VGPU_VM_ID_DOMAIN_ID, nvml.SUCCESS }
	noMdev := newTestVgpu(12, "vm-b", "H100-20C")
	// (an error of this hint, of any class, is no sign the GPU stopped
	// answering)
	noMdev.GetMdevUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
	vms := []nvml.VgpuInstance{newTestVgpu(11, "vm-a", "H100-20C"), noMdev, dom}
	vgpuHost(f, 0, &vms)
	finder := &fakeVMs{vms: map[string]uint32{"vm-a": 4242}}
	b, err := New(Options{Lib: f.srv, Clock: f.clock, VMs: finder})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	dev := sample(t, b).Devices[0]
	if !dev.Up {
		t.Fatalf("GPU read down after a vGPU's mediated device could not be read: %+v", dev)
	}
	got := dev.VGPUs
	want := []struct {
		pid  uint32
		name string
	}{{4242, "name-of-vm-a"}, {0, ""}, {0, ""}}
	if len(got) != len(want) {
		t.Fatalf("vGPUs %+v", got)
	}
	for i, w := range want {
		if got[i].HostPID != w.pid || got[i].VMName != w.name {
			t.Errorf("vGPU %d: host PID %d, VM name %q; want %d, %q", got[i].ID, got[i].HostPID, got[i].VMName, w.pid, w.name)
		}
	}
	if !slices.Equal(finder.asked, []string{"vm-a mdev-of-vm-a", "vm-b "}) {
		t.Errorf("finder asked for %q, want the two UUID-type VM IDs, vm-a's with its mediated device", finder.asked)
	}
	// a driver without nvmlVgpuInstanceGetMdevUUID: asked without it
	f.setMissing(symVgpuMdevUUID)
	finder.asked = nil
	old, err := New(Options{Lib: f.srv, Clock: f.clock, VMs: finder})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Close() })
	sample(t, old)
	if !slices.Equal(finder.asked, []string{"vm-a ", "vm-b "}) {
		t.Errorf("without the symbol, finder asked for %q", finder.asked)
	}
}
