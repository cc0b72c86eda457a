package nvml

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
)

// A GPU instance split in several compute instances (nvidia-smi mig -cci)
// is one MIG device per compute instance, and was read as one MIG instance
// each under the same GPU instance: served, the mig collector took the
// second for a duplicate (failed every scrape, its identity dropped) and
// the tenant builder gave every process of the GPU instance to each entry
// (the tenant collector failed, and the memory integral grew twice). It is
// one instance, served and billed once: an identity series per compute
// instance, the first the lowest ID whatever the slots' order, and the SMs
// of its compute instances together, unknown where one's are. Two whose
// compute instance IDs NVML does not give (two UUIDs) are two compute
// instances of ID -1: the second was dropped as a duplicate, its process
// never read, its SMs not added.
func TestMIGComputeInstancesServedOnce(t *testing.T) {
	type migDev struct {
		ci    int
		pid   uint32
		attrs nvml.Return // of its attributes
		ciR   nvml.Return // of its compute instance ID
	}
	for _, tc := range []struct {
		name string
		devs []migDev // in slot order, all of GPU instance 1
		sms  float64  // vgpu_mig_streaming_multiprocessors; 0: not served
	}{
		{"two compute instances", []migDev{{0, 77, nvml.SUCCESS, nvml.SUCCESS}, {1, 88, nvml.SUCCESS, nvml.SUCCESS}}, 60},
		{"three compute instances, the slots out of order", []migDev{{2, 66, nvml.SUCCESS, nvml.SUCCESS}, {1, 88, nvml.SUCCESS, nvml.SUCCESS}, {0, 77, nvml.SUCCESS, nvml.SUCCESS}}, 90},
		{"one compute instance's attributes refused", []migDev{{0, 77, nvml.SUCCESS, nvml.SUCCESS}, {1, 88, nvml.ERROR_NO_PERMISSION, nvml.SUCCESS}}, 0},
		{"two compute instances of unknown IDs", []migDev{{0, 77, nvml.SUCCESS, nvml.ERROR_NOT_SUPPORTED}, {1, 88, nvml.SUCCESS, nvml.ERROR_NOT_SUPPORTED}}, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			f.enableMIG(0, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
			f.fail(0, "GetComputeRunningProcesses", nvml.ERROR_NO_PERMISSION)
			var devs []nvml.Device
			for _, m := range tc.devs {
				devs = append(devs, &mock.Device{
					GetUUIDFunc:              func() (string, nvml.Return) { return fmt.Sprintf("MIG-0-1-%d", m.ci), nvml.SUCCESS },
					GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return 1, nvml.SUCCESS },
					GetComputeInstanceIdFunc: func() (int, nvml.Return) { return m.ci, m.ciR },
					GetMemoryInfoFunc:        func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 40 << 30, Used: 4 << 30}, nvml.SUCCESS },
					GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
						return nvml.Memory_v2{Total: 40 << 30, Used: 4 << 30}, nvml.SUCCESS
					},
					GetAttributesFunc: func() (nvml.DeviceAttributes, nvml.Return) {
						return nvml.DeviceAttributes{MultiprocessorCount: 30, GpuInstanceSliceCount: 3, MemorySizeMB: 40192}, m.attrs
					},
					GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
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
			s := newServed(t, f)
			s.scrape(time.Second)
			prev := s.scrape(time.Second)
			got := s.scrape(time.Second)
			for _, c := range []string{"mig", "tenant"} {
				if v := got[`vgpu_scrape_collector_success{collector="`+c+`"}`]; v != 1 {
					t.Errorf(`vgpu_scrape_collector_success{collector=%q} = %g, want 1`, c, v)
				}
			}
			u := f.devs[0].UUID
			byteSec := `vgpu_tenant_memory_byte_seconds_total{gpu="0",tenant="unassigned",uuid="` + u + `"}`
			if d, want := got[byteSec]-prev[byteSec], float64(len(tc.devs))*(1<<30); d != want {
				t.Errorf("%s grew by %g over 1 s, want %g (a process of 1 GiB in each compute instance)", byteSec, d, want)
			}
			var infos, wantInfos []string
			for k := range ofGPU(got, u) {
				if strings.HasPrefix(k, "vgpu_mig_instance_info{") {
					infos = append(infos, k)
				}
			}
			for _, m := range tc.devs {
				id := m.ci
				if m.ciR != nvml.SUCCESS {
					id = -1
				}
				wantInfos = append(wantInfos, fmt.Sprintf(`vgpu_mig_instance_info{compute_instance="%d",gpu="0",gpu_instance="1",mig_uuid="MIG-0-1-%d",profile="3g.40gb",uuid="%s"}`, id, m.ci, u))
			}
			slices.Sort(infos)
			slices.Sort(wantInfos)
			if !slices.Equal(infos, wantInfos) {
				t.Errorf("identity series\n%s\nwant\n%s", strings.Join(infos, "\n"), strings.Join(wantInfos, "\n"))
			}
			sms, ok := got[`vgpu_mig_streaming_multiprocessors{gpu="0",gpu_instance="1",uuid="`+u+`"}`]
			if sms != tc.sms || ok != (tc.sms > 0) {
				t.Errorf("vgpu_mig_streaming_multiprocessors %g (served %v), want %g", sms, ok, tc.sms)
			}
			if k := `vgpu_gpu_processes{gpu="0",uuid="` + u + `"}`; got[k] != float64(len(tc.devs)) {
				t.Errorf("%s = %g, want %d (a process in each compute instance)", k, got[k], len(tc.devs))
			}
			if k := `vgpu_mig_memory_used_bytes{gpu="0",gpu_instance="1",uuid="` + u + `"}`; got[k] != 4<<30 {
				t.Errorf("%s = %g, want the GPU instance's 4 GiB", k, got[k])
			}
		})
	}
}
