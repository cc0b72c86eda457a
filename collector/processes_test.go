package collector

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// TestGPUProcessesAbsentWhereAListUnread: vgpu_gpu_processes is served only
// where every list that may hold a process was read. On an MPS GPU whose
// MPS clients' list NVML refused, the compute list holds the MPS server
// alone: served, it was 1 for a GPU running many clients; and refused
// (not unsupported), the list may hold clients whatever the mode reads.
func TestGPUProcessesAbsentWhereAListUnread(t *testing.T) {
	const head = "# HELP vgpu_gpu_processes Processes with a context on the GPU.\n# TYPE vgpu_gpu_processes gauge\n"
	const two = head + `vgpu_gpu_processes{gpu="4",uuid="GPU-4444"} 2` + "\n"
	for _, tc := range []struct {
		name                       string
		mode                       gpu.SharingMode
		unread, mpsUnread, refused bool
		want                       string
	}{
		{"MPS, both lists read", gpu.SharingMPS, false, false, false, two},
		{"MPS, its clients' list refused", gpu.SharingMPS, false, true, true, ""},
		{"MPS, its clients' list not supported", gpu.SharingMPS, false, true, false, ""},
		{"MPS, the compute list refused", gpu.SharingMPS, true, false, false, ""},
		{"exclusive, an MPS list not supported", gpu.SharingExclusive, false, true, false, two},
		{"exclusive, an MPS list refused", gpu.SharingExclusive, false, true, true, ""},
		{"exclusive, the compute list refused", gpu.SharingExclusive, true, false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := bareDevice()
			d.Mode, d.ProcessesUnread, d.MPSProcessesUnread, d.MPSProcessesRefused = tc.mode, tc.unread, tc.mpsUnread, tc.refused
			d.Processes = []gpu.Process{{PID: 1, Name: "nvidia-cuda-mps-server", UID: -1}, {PID: 2, Name: "vllm", UID: -1}}
			e := newExporter(t, &tenant.Snapshot{Readings: readings(d)}, "gpu")
			if err := testutil.CollectAndCompare(e, strings.NewReader(tc.want), "vgpu_gpu_processes"); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestMPSServersUnverified: vgpu_gpu_mps_servers_unverified counts the
// processes of an MPS GPU taken for its server by their name alone, 0
// where none is; absent on a GPU in another mode.
func TestMPSServersUnverified(t *testing.T) {
	const head = "# HELP vgpu_gpu_mps_servers_unverified Processes of a GPU in MPS mode taken for its MPS server by their name alone, their executable or their parent's not readable to the exporter (it lacks CAP_SYS_PTRACE): their pauses are refused, as the server's.\n# TYPE vgpu_gpu_mps_servers_unverified gauge\n"
	series := func(n string) string {
		return head + `vgpu_gpu_mps_servers_unverified{gpu="4",uuid="GPU-4444"} ` + n + "\n"
	}
	for _, tc := range []struct {
		name       string
		mode       gpu.SharingMode
		unverified bool
		want       string
	}{
		{"MPS, the server verified", gpu.SharingMPS, false, series("0")},
		{"MPS, the server unverified", gpu.SharingMPS, true, series("1")},
		{"time-sliced", gpu.SharingTimeSlice, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := bareDevice()
			d.Mode = tc.mode
			d.Processes = []gpu.Process{
				{PID: 1, Name: "nvidia-cuda-mps-server", UID: -1, MPSServer: true, MPSServerUnverified: tc.unverified},
				{PID: 2, Name: "vllm", UID: -1},
			}
			e := newExporter(t, &tenant.Snapshot{Readings: readings(d)}, "gpu")
			if err := testutil.CollectAndCompare(e, strings.NewReader(tc.want), "vgpu_gpu_mps_servers_unverified"); err != nil {
				t.Error(err)
			}
		})
	}
}
