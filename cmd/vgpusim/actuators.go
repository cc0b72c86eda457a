package main

import (
	"context"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The policy under test acts on the simulator through these forwarding
// types, each of which exposes one actuator interface and nothing else: a
// policy cannot type-assert its way from an actuator to the simulator (or
// to another mechanism) and read the ground truth it is judged by.

type mpsActuator struct{ a gpu.MPSActuator }

func (w mpsActuator) SetMPSActiveThreads(ctx context.Context, uuid string, pid uint32, f float64) error {
	return w.a.SetMPSActiveThreads(ctx, uuid, pid, f)
}

func (w mpsActuator) SetMPSDefaultActiveThreads(ctx context.Context, uuid string, f float64) error {
	return w.a.SetMPSDefaultActiveThreads(ctx, uuid, f)
}

func (w mpsActuator) SetMPSPinnedMemoryLimit(ctx context.Context, uuid string, pid uint32, b uint64) error {
	return w.a.SetMPSPinnedMemoryLimit(ctx, uuid, pid, b)
}

func (w mpsActuator) RestartClient(ctx context.Context, uuid string, pid uint32) error {
	return w.a.RestartClient(ctx, uuid, pid)
}

type vgpuActuator struct{ a gpu.VGPUSchedulerActuator }

func (w vgpuActuator) SetVGPUScheduler(ctx context.Context, uuid string, s gpu.VGPUSchedulerSetting) error {
	return w.a.SetVGPUScheduler(ctx, uuid, s)
}

type timeSliceActuator struct{ a gpu.TimeSliceActuator }

func (w timeSliceActuator) SetComputeTimeSlice(ctx context.Context, uuid string, l gpu.TimeSliceLevel) error {
	return w.a.SetComputeTimeSlice(ctx, uuid, l)
}

type clockActuator struct{ a gpu.ClockPowerActuator }

func (w clockActuator) LockClocks(ctx context.Context, uuid string, l gpu.ClockLock) error {
	return w.a.LockClocks(ctx, uuid, l)
}

func (w clockActuator) LockMemoryClocks(ctx context.Context, uuid string, l gpu.ClockLock) error {
	return w.a.LockMemoryClocks(ctx, uuid, l)
}

func (w clockActuator) SetPowerLimit(ctx context.Context, uuid string, watts float64) error {
	return w.a.SetPowerLimit(ctx, uuid, watts)
}

type migActuator struct{ a gpu.MIGActuator }

func (w migActuator) ConfigureMIG(ctx context.Context, uuid string, profiles []string) error {
	return w.a.ConfigureMIG(ctx, uuid, profiles)
}

type migDrainActuator struct{ a gpu.MIGDrainActuator }

func (w migDrainActuator) DrainMIGInstance(ctx context.Context, uuid, instUUID string) error {
	return w.a.DrainMIGInstance(ctx, uuid, instUUID)
}

type lifecycleActuator struct{ a gpu.TenantLifecycleActuator }

func (w lifecycleActuator) StopProcess(ctx context.Context, pid uint32) error {
	return w.a.StopProcess(ctx, pid)
}

func (w lifecycleActuator) StartProcess(ctx context.Context, pid uint32) error {
	return w.a.StartProcess(ctx, pid)
}

type placementActuator struct{ a gpu.PlacementActuator }

func (w placementActuator) MoveProcess(ctx context.Context, pid uint32, to string) error {
	return w.a.MoveProcess(ctx, pid, to)
}

type capabilityLister struct{ a gpu.CapabilityLister }

func (w capabilityLister) Capabilities(uuid string) []gpu.Knob { return w.a.Capabilities(uuid) }

// guarded returns forwarding wrappers for every actuator interface b
// implements, one wrapper per interface.
func guarded(b any) []any {
	var out []any
	out = wrapIf(out, b, func(a gpu.MPSActuator) any { return mpsActuator{a} })
	out = wrapIf(out, b, func(a gpu.VGPUSchedulerActuator) any { return vgpuActuator{a} })
	out = wrapIf(out, b, func(a gpu.TimeSliceActuator) any { return timeSliceActuator{a} })
	out = wrapIf(out, b, func(a gpu.ClockPowerActuator) any { return clockActuator{a} })
	out = wrapIf(out, b, func(a gpu.MIGActuator) any { return migActuator{a} })
	out = wrapIf(out, b, func(a gpu.MIGDrainActuator) any { return migDrainActuator{a} })
	out = wrapIf(out, b, func(a gpu.TenantLifecycleActuator) any { return lifecycleActuator{a} })
	out = wrapIf(out, b, func(a gpu.PlacementActuator) any { return placementActuator{a} })
	out = wrapIf(out, b, func(a gpu.CapabilityLister) any { return capabilityLister{a} })
	return out
}

// wrapIf appends wrap(b) to out when b implements I.
func wrapIf[I any](out []any, b any, wrap func(I) any) []any {
	if a, ok := b.(I); ok {
		out = append(out, wrap(a))
	}
	return out
}

// guardedActuators are the actuators a policy gets: b's, each behind its
// own forwarding wrapper.
func guardedActuators(b any) tuner.Actuators { return tuner.ActuatorsOf(guarded(b)...) }
