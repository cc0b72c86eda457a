package autotune

import (
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

const uuid0 = "GPU-0"

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mpsProc(pid uint32, frac *float64) gpu.Process {
	p := testutil.Proc(pid, "")
	p.Type, p.MPSActiveThreads = gpu.ProcessMPS, frac
	return p
}

func snapshot(at time.Time, devs []gpu.Device, usage []tenant.Usage) *tenant.Snapshot {
	return &tenant.Snapshot{Time: at, Readings: &gpu.Readings{Time: at, Backend: "test", Devices: devs}, Usage: usage}
}
