package nvml

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
)

// ratioIs says whether p is absent (want < 0) or want.
func ratioIs(p *float64, want float64) bool {
	if want < 0 {
		return p == nil
	}
	return p != nil && *p == want
}

// A utilization over 100 % was clamped and served as 1 (a GPU at
// 4294967295 % busy): it is no reading, and left out.
func TestUtilizationOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		name          string
		gpu, mem      uint32
		wantG, wantM  float64 // -1: absent
		wantLogLines  int
		wantLogSubstr string
	}{
		{"in range", 75, 40, 0.75, 0.4, 0, ""},
		{"bounds", 100, 0, 1, 0, 0, ""},
		{"garbage", 4294967295, 82505, -1, -1, 2, "value=4294967295"},
		{"one over", 101, 40, -1, 0.4, 1, "value=101"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			f.devs[0].GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
				return nvml.Utilization{Gpu: tc.gpu, Memory: tc.mem}, nvml.SUCCESS
			}
			b := f.backend()
			for i := 0; i < 2; i++ {
				d := sample(t, b).Devices[0]
				if !ratioIs(d.GPUUtil, tc.wantG) || !ratioIs(d.MemUtil, tc.wantM) {
					t.Errorf("GPU %v memory %v; want %g and %g (-1: absent)", d.GPUUtil, d.MemUtil, tc.wantG, tc.wantM)
				}
				f.clock.Advance(time.Second)
			}
			if n := f.logs.count("out of its range", "nvmlDeviceGetUtilizationRates"); n != tc.wantLogLines {
				t.Errorf("%d log lines, want %d:\n%s", n, tc.wantLogLines, f.logs.String())
			}
			if tc.wantLogSubstr != "" && f.logs.count(tc.wantLogSubstr) == 0 {
				t.Errorf("no log line with %q:\n%s", tc.wantLogSubstr, f.logs.String())
			}
		})
	}
}

// One per-process sample over 100 % pulled the process's mean up to 1:
// it is skipped, the others averaged; a process with no other sample is
// listed without figures.
func TestProcessUtilizationOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		name    string
		odd     []nvml.ProcessUtilizationSample // added to the driver's answer
		pid     uint32
		wantSM  float64 // -1: absent
		wantMem float64
	}{
		// the fixture's own two samples of PID 1: 50 % and 70 % SM, 20 % and 30 % memory
		{"none", nil, 1, 0.6, 0.25},
		{"SM garbage", []nvml.ProcessUtilizationSample{{Pid: 1, SmUtil: 4294967295, MemUtil: 10}}, 1, 0.6, 0.25},
		{"memory one over", []nvml.ProcessUtilizationSample{{Pid: 1, SmUtil: 10, MemUtil: 101}}, 1, 0.6, 0.25},
		{"only sample", []nvml.ProcessUtilizationSample{{Pid: 2, SmUtil: 200, MemUtil: 10}}, 2, -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			procs := []nvml.ProcessInfo{{Pid: 1, UsedGpuMemory: 1, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}
			if tc.pid != 1 {
				procs = append(procs, nvml.ProcessInfo{Pid: tc.pid, UsedGpuMemory: 1, GpuInstanceId: noInstance, ComputeInstanceId: noInstance})
			}
			f.setProcs(0, procs, nil)
			b := f.backend()
			sample(t, b)
			good := f.devs[0].GetProcessUtilizationFunc
			f.devs[0].GetProcessUtilizationFunc = func(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
				all, r := good(lastSeen)
				var s []nvml.ProcessUtilizationSample
				for _, x := range all {
					if x.Pid == 1 { // any other PID's samples are the odd ones alone
						s = append(s, x)
					}
				}
				for _, o := range tc.odd {
					o.TimeStamp = uint64(f.clock.Now().UnixMicro()) - 100
					s = append(s, o)
				}
				return s, r
			}
			f.clock.Advance(time.Second)
			d := sample(t, b).Devices[0]
			var found bool
			for _, p := range d.Processes {
				if p.PID != tc.pid {
					continue
				}
				found = true
				if !ratioIs(p.SMUtil, tc.wantSM) || !ratioIs(p.MemUtil, tc.wantMem) {
					t.Errorf("PID %d: SM %v memory %v; want %g and %g (-1: absent)", p.PID, p.SMUtil, p.MemUtil, tc.wantSM, tc.wantMem)
				}
			}
			if !found {
				t.Fatalf("PID %d not listed: %+v", tc.pid, d.Processes)
			}
			if want := min(len(tc.odd), 1); f.logs.count("out of its range", "nvmlDeviceGetProcessUtilization") != want {
				t.Errorf("want %d log lines of the skipped samples:\n%s", want, f.logs.String())
			}
		})
	}
}

// twoVMHost is a backend whose GPU 0 is a vGPU host of two VMs' vGPU
// instances, 11 and 12, sampled once.
func twoVMHost(t *testing.T) (*fixture, *Backend) {
	f := newFixture(t, dgxh100.New())
	vms := []nvml.VgpuInstance{newTestVgpu(11, "vm-a", "H100-20C"), newTestVgpu(12, "vm-b", "H100-20C")}
	vgpuHost(f, 0, &vms)
	b := f.backend()
	sample(t, b)
	return f, b
}

// The same on a vGPU host: a vGPU instance's sample over 100 % is not
// averaged; an instance, or a process in a VM, with no other sample is
// served without figures.
func TestVGPUUtilizationOutOfRange(t *testing.T) {
	f, b := twoVMHost(t)
	vgpus, procs := f.devs[0].GetVgpuUtilizationFunc, f.devs[0].GetVgpuProcessUtilizationFunc
	f.devs[0].GetVgpuUtilizationFunc = func(lastSeen uint64) (nvml.ValueType, []nvml.VgpuInstanceUtilizationSample, nvml.Return) {
		vt, all, r := vgpus(lastSeen)
		var s []nvml.VgpuInstanceUtilizationSample
		for _, x := range all {
			if x.VgpuInstance == 11 { // 12's only sample is the odd one
				s = append(s, x)
			}
		}
		ts := uint64(f.clock.Now().UnixMicro()) - 100
		return vt, append(s, nvml.VgpuInstanceUtilizationSample{VgpuInstance: 11, TimeStamp: ts, SmUtil: u32(4294967295)},
			nvml.VgpuInstanceUtilizationSample{VgpuInstance: 12, TimeStamp: ts, SmUtil: u32(5), MemUtil: u32(101)}), r
	}
	f.devs[0].GetVgpuProcessUtilizationFunc = func(lastSeen uint64) ([]nvml.VgpuProcessUtilizationSample, nvml.Return) {
		s, r := procs(lastSeen)
		for i := range s {
			s[i].SmUtil = 200
		}
		return s, r
	}
	f.clock.Advance(time.Second)
	d := sample(t, b).Devices[0]
	byID := map[uint32]int{}
	for i, v := range d.VGPUs {
		byID[v.ID] = i
	}
	if v := d.VGPUs[byID[11]]; !ratioIs(v.SMUtil, 0.5) || !ratioIs(v.MemUtil, 0.2) {
		t.Errorf("vGPU 11: SM %v memory %v, want 0.5 and 0.2 (its two samples in range)", v.SMUtil, v.MemUtil)
	}
	if v := d.VGPUs[byID[12]]; v.SMUtil != nil || v.MemUtil != nil {
		t.Errorf("vGPU 12: SM %v memory %v, want neither", v.SMUtil, v.MemUtil)
	}
	if len(d.Processes) != 1 || d.Processes[0].PID != 4242 || d.Processes[0].SMUtil != nil {
		t.Errorf("processes %+v, want PID 4242 listed without figures", d.Processes)
	}
	for _, call := range []string{"nvmlDeviceGetVgpuUtilization", "nvmlDeviceGetVgpuProcessUtilization"} {
		if n := f.logs.count("out of its range", "call="+call+" "); n != 1 {
			t.Errorf("%d log lines of %s, want 1:\n%s", n, call, f.logs.String())
		}
	}
}

// Memory used over the size was served as read.
func TestMemoryUsedOverTotal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v1      bool // the driver lacks the v2 call
		total   uint64
		used    uint64
		present bool
	}{
		{"v2", false, 80 << 30, 1 << 40, false},
		{"v1", true, 80 << 30, 1 << 40, false},
		{"v2 full", false, 80 << 30, 80 << 30, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			if tc.v1 {
				f.setMissing(symMemoryInfoV2)
			}
			f.devs[0].GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
				return nvml.Memory_v2{Total: tc.total, Used: tc.used}, nvml.SUCCESS
			}
			f.devs[0].GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
				return nvml.Memory{Total: tc.total, Used: tc.used}, nvml.SUCCESS
			}
			b := f.backend()
			d := sample(t, b).Devices[0]
			switch {
			case !d.Up:
				t.Fatalf("GPU down: %s", d.Err)
			case tc.present && (d.MemoryTotalBytes != tc.total || d.MemoryUsedBytes != tc.used):
				t.Errorf("memory %d of %d, want %d of %d", d.MemoryUsedBytes, d.MemoryTotalBytes, tc.used, tc.total)
			case !tc.present && (d.MemoryTotalBytes != 0 || d.MemoryUsedBytes != 0):
				t.Errorf("memory %d of %d served; want neither (0: unread)", d.MemoryUsedBytes, d.MemoryTotalBytes)
			}
			if n := f.logs.count("out of its range", "nvmlDeviceGetMemoryInfo"); n != map[bool]int{true: 0, false: 1}[tc.present] {
				t.Errorf("%d log lines:\n%s", n, f.logs.String())
			}
		})
	}
}
