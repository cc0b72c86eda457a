package baseline

import (
	"context"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/tunertest"
)

// The fakes and builders shared with the other tuner packages' tests.
var (
	t0       = tunertest.T0
	mpsProc  = tunertest.MPSProc
	snapshot = tunertest.Snapshot
)

type fakeControl = tunertest.FakeControl

// vgpuOnly has the vGPU scheduler and nothing else, as the NVML backend
// has no MPS or time-slice actuator.
type vgpuOnly struct{ f fakeControl }

func (v *vgpuOnly) SetVGPUScheduler(ctx context.Context, uuid string, s gpu.VGPUSchedulerSetting) error {
	return v.f.SetVGPUScheduler(ctx, uuid, s)
}
