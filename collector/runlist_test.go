package collector

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// The runlist series of a GPU go once the GPU has no vGPU scheduler (MIG
// mode on, or no longer a vGPU host), while another GPU's keep counting;
// none falls while it is served.
func TestRunlistSeriesGoWithTheirScheduler(t *testing.T) {
	entry := func(ms int64, rl uint32, runUS, preemptUS int64) gpu.VGPUSchedulerLogEntry {
		return gpu.VGPUSchedulerLogEntry{Timestamp: time.UnixMilli(ms), Runlist: rl,
			RunTime: time.Duration(runUS) * time.Microsecond, CumulativePreemp: time.Duration(preemptUS) * time.Microsecond}
	}
	dev := func(i int, uuid string, log ...gpu.VGPUSchedulerLogEntry) gpu.Device {
		d := gpu.Device{Index: i, UUID: uuid, Up: true}
		if log != nil {
			d.Scheduler = &gpu.VGPUScheduler{Log: log}
		}
		return d
	}
	metrics := []string{"vgpu_vgpu_scheduler_run_seconds_total", "vgpu_vgpu_scheduler_slices_total"}
	head := `# HELP vgpu_vgpu_scheduler_run_seconds_total Time the software runlist ran on the GPU, from the vGPU scheduler log.
# TYPE vgpu_vgpu_scheduler_run_seconds_total counter
`
	slices := `# HELP vgpu_vgpu_scheduler_slices_total Time slices (scheduler log entries) of the software runlist.
# TYPE vgpu_vgpu_scheduler_slices_total counter
`
	var counts []tenant.RunlistCount
	for i, step := range []struct {
		devs []gpu.Device
		want string
	}{
		{[]gpu.Device{dev(0, "GPU-a", entry(10, 0, 100, 0), entry(11, 1, 100, 0)), dev(1, "GPU-b", entry(10, 5, 100, 0))}, head +
			`vgpu_vgpu_scheduler_run_seconds_total{gpu="0",runlist="0",uuid="GPU-a"} 0
vgpu_vgpu_scheduler_run_seconds_total{gpu="0",runlist="1",uuid="GPU-a"} 0
vgpu_vgpu_scheduler_run_seconds_total{gpu="1",runlist="5",uuid="GPU-b"} 0
` + slices + `vgpu_vgpu_scheduler_slices_total{gpu="0",runlist="0",uuid="GPU-a"} 0
vgpu_vgpu_scheduler_slices_total{gpu="0",runlist="1",uuid="GPU-a"} 0
vgpu_vgpu_scheduler_slices_total{gpu="1",runlist="5",uuid="GPU-b"} 0
`},
		{[]gpu.Device{dev(0, "GPU-a", entry(12, 0, 2000, 0)), dev(1, "GPU-b", entry(12, 5, 1000, 0))}, head +
			`vgpu_vgpu_scheduler_run_seconds_total{gpu="0",runlist="0",uuid="GPU-a"} 0.002
vgpu_vgpu_scheduler_run_seconds_total{gpu="0",runlist="1",uuid="GPU-a"} 0
vgpu_vgpu_scheduler_run_seconds_total{gpu="1",runlist="5",uuid="GPU-b"} 0.001
` + slices + `vgpu_vgpu_scheduler_slices_total{gpu="0",runlist="0",uuid="GPU-a"} 1
vgpu_vgpu_scheduler_slices_total{gpu="0",runlist="1",uuid="GPU-a"} 0
vgpu_vgpu_scheduler_slices_total{gpu="1",runlist="5",uuid="GPU-b"} 1
`},
		// GPU-a's vGPU scheduler is gone (MIG mode on): so are its series
		{[]gpu.Device{dev(0, "GPU-a"), dev(1, "GPU-b", entry(13, 5, 1000, 0))}, head +
			`vgpu_vgpu_scheduler_run_seconds_total{gpu="1",runlist="5",uuid="GPU-b"} 0.002
` + slices + `vgpu_vgpu_scheduler_slices_total{gpu="1",runlist="5",uuid="GPU-b"} 2
`},
	} {
		counts = tenant.AddSchedulerLog(counts, &gpu.Readings{Devices: step.devs})
		e := newExporter(t, &tenant.Snapshot{VGPURunlists: counts}, "vgpu")
		if err := testutil.CollectAndCompare(e, strings.NewReader(step.want), metrics...); err != nil {
			t.Errorf("sample %d: %v", i, err)
		}
	}
}
