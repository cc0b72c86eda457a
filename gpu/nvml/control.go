package nvml

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// lockDevice takes the backend's lock for the control call named call on
// the GPU with this UUID, and returns the GPU; where the error is nil the
// caller holds b.mu, and unlocks it. The lock is waited for no longer than
// ctx: a sample holds it while it reads the GPUs, as long as a driver call
// takes, and a call past its deadline returns (backendLock.lockFor) rather
// than wait for good behind a driver call that does not return.
func (b *Backend) lockDevice(ctx context.Context, call, uuid string) (*devState, error) {
	if err := b.mu.lockFor(ctx, call+" on GPU "+uuid); err != nil {
		return nil, err
	}
	ds, err := b.lockedDevice(ctx, uuid)
	if err != nil {
		b.mu.Unlock()
		return nil, err
	}
	return ds, nil
}

// lockedDevice returns the GPU with this UUID for a control call; the
// caller holds b.mu.
func (b *Backend) lockedDevice(ctx context.Context, uuid string) (*devState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if b.closed {
		return nil, errClosed
	}
	return b.device(uuid)
}

// LockClocks locks the SM clock range; a zero ClockLock resets it.
func (b *Backend) LockClocks(ctx context.Context, uuid string, l gpu.ClockLock) error {
	ds, err := b.lockDevice(ctx, "LockClocks", uuid)
	if err != nil {
		return err
	}
	defer b.mu.Unlock()
	if !b.has(symSetGpuLocked, symResetGpuLocked) {
		return errNotSupportedf("driver lacks %s", symSetGpuLocked)
	}
	if l == (gpu.ClockLock{}) {
		if err := controlErr(uuid, "nvmlDeviceResetGpuLockedClocks", ds.handle.ResetGpuLockedClocks()); err != nil {
			return err
		}
		ds.locked = gpu.Bool(false)
		return nil
	}
	if l.MinMHz == 0 || l.MinMHz > l.MaxMHz {
		return fmt.Errorf("GPU %s: invalid SM clock range %d-%d MHz (min must be > 0 and <= max)", uuid, l.MinMHz, l.MaxMHz)
	}
	if maxMHz, r := ds.handle.GetMaxClockInfo(nvml.CLOCK_SM); r == nvml.SUCCESS && l.MaxMHz > maxMHz {
		return &gpu.RangeError{GPU: uuid, What: "SM clock", Unit: "MHz", Value: float64(l.MaxMHz), Max: float64(maxMHz)}
	}
	if err := controlErr(uuid, "nvmlDeviceSetGpuLockedClocks", ds.handle.SetGpuLockedClocks(l.MinMHz, l.MaxMHz)); err != nil {
		return err
	}
	ds.locked = gpu.Bool(true)
	level.Info(b.logger).Log("msg", "SM clocks locked", "uuid", uuid, "min_mhz", l.MinMHz, "max_mhz", l.MaxMHz)
	return nil
}

// SetPowerLimit sets the power limit in watts within the GPU's constraints;
// 0 restores the default limit.
func (b *Backend) SetPowerLimit(ctx context.Context, uuid string, watts float64) error {
	ds, err := b.lockDevice(ctx, "SetPowerLimit", uuid)
	if err != nil {
		return err
	}
	defer b.mu.Unlock()
	if math.IsNaN(watts) || math.IsInf(watts, 0) || watts < 0 {
		return fmt.Errorf("GPU %s: invalid power limit %v W", uuid, watts)
	}
	var mw uint32
	if watts == 0 {
		if !b.has(symPowerDefault) {
			return errNotSupportedf("driver lacks %s", symPowerDefault)
		}
		def, r := ds.handle.GetPowerManagementDefaultLimit()
		if err := controlErr(uuid, "nvmlDeviceGetPowerManagementDefaultLimit", r); err != nil {
			return err
		}
		mw = def
	} else {
		if watts*1000 > math.MaxUint32 {
			return fmt.Errorf("GPU %s: power limit %v W out of range", uuid, watts)
		}
		mw = uint32(math.Round(watts * 1000))
		if b.has(symPowerConstraints) {
			lo, hi, r := ds.handle.GetPowerManagementLimitConstraints()
			if err := controlErr(uuid, "nvmlDeviceGetPowerManagementLimitConstraints", r); err != nil {
				return err
			}
			if mw < lo || mw > hi {
				return &gpu.RangeError{GPU: uuid, What: "power limit", Unit: "W", Value: watts, Min: float64(lo) / 1000, Max: float64(hi) / 1000}
			}
		}
	}
	if err := controlErr(uuid, "nvmlDeviceSetPowerManagementLimit", ds.handle.SetPowerManagementLimit(mw)); err != nil {
		return err
	}
	level.Info(b.logger).Log("msg", "power limit set", "uuid", uuid, "watts", float64(mw)/1000)
	return nil
}

// PowerLimitInForce reads back the power limit the GPU enforces, every
// limiter counted (nvmlDeviceGetEnforcedPowerLimit; where that call fails,
// the limit set), the limit set (nvmlDeviceGetPowerManagementLimit, what
// SetPowerLimit changes; 0 where that call fails) and its default limit.
// All are whole milliwatts, as SetPowerLimit sets them.
func (b *Backend) PowerLimitInForce(ctx context.Context, uuid string) (gpu.PowerLimit, error) {
	ds, err := b.lockDevice(ctx, "PowerLimitInForce", uuid)
	if err != nil {
		return gpu.PowerLimit{}, err
	}
	defer b.mu.Unlock()
	var pl gpu.PowerLimit
	set, r2 := ds.handle.GetPowerManagementLimit()
	if r2 == nvml.SUCCESS {
		pl.SetW = float64(set) / 1000
	}
	mw, r := ds.handle.GetEnforcedPowerLimit()
	switch {
	case r == nvml.SUCCESS:
		pl.InForceW = float64(mw) / 1000
	case r2 == nvml.SUCCESS:
		pl.InForceW = pl.SetW
	default:
		return gpu.PowerLimit{}, fmt.Errorf("%w; %w", controlErr(uuid, "nvmlDeviceGetEnforcedPowerLimit", r),
			retErr("nvmlDeviceGetPowerManagementLimit", r2))
	}
	if b.has(symPowerDefault) {
		if def, r := ds.handle.GetPowerManagementDefaultLimit(); r == nvml.SUCCESS {
			pl.DefaultW = float64(def) / 1000
		}
	}
	return pl, nil
}

// SetVGPUScheduler changes the vGPU scheduler. It is refused (gpu.ErrBusy)
// while vGPU VMs run or MIG is on (docs/calibration.md, vGPU), and
// checked against the GPU's capabilities first.
func (b *Backend) SetVGPUScheduler(ctx context.Context, uuid string, s gpu.VGPUSchedulerSetting) error {
	ds, err := b.lockDevice(ctx, "SetVGPUScheduler", uuid)
	if err != nil {
		return err
	}
	defer b.mu.Unlock()
	h := ds.handle
	if !b.has(symSetSchedState) && !b.has(symSetSchedStateV2) {
		return errNotSupportedf("driver lacks %s", symSetSchedState)
	}
	policy, ok := policyID(s.Policy)
	if !ok {
		return fmt.Errorf("GPU %s: unknown vGPU scheduler policy %q (want best-effort, equal-share or fixed-share)", uuid, s.Policy)
	}
	if b.has(symVirtMode) {
		m, r := h.GetVirtualizationMode()
		if err := controlErr(uuid, "nvmlDeviceGetVirtualizationMode", r); err != nil {
			return err
		}
		if m != nvml.GPU_VIRTUALIZATION_MODE_HOST_VGPU {
			return errNotSupportedf("GPU %s is not a vGPU host (virtualization mode %d)", uuid, m)
		}
	}
	if b.has(symMigMode) {
		if cur, _, r := h.GetMigMode(); r == nvml.SUCCESS && cur == nvml.DEVICE_MIG_ENABLE {
			return errBusyf("GPU %s: the vGPU scheduler cannot be changed while MIG is enabled", uuid)
		}
	}
	if b.has(symActiveVgpus) {
		vms, r := h.GetActiveVgpus()
		if err := controlErr(uuid, "nvmlDeviceGetActiveVgpus", r); err != nil {
			return err
		}
		if len(vms) > 0 {
			return errBusyf("GPU %s: %d vGPU VMs are running; the scheduler can only be changed with none running", uuid, len(vms))
		}
	}
	if s.ARREnabled && policy != nvml.VGPU_SCHEDULER_POLICY_BEST_EFFORT {
		return fmt.Errorf("GPU %s: adaptive round robin applies to the best-effort policy only", uuid)
	}
	if b.has(symSchedCaps) {
		c, r := h.GetVgpuSchedulerCapabilities()
		if err := controlErr(uuid, "nvmlDeviceGetVgpuSchedulerCapabilities", r); err != nil {
			return err
		}
		supported := false
		for _, p := range c.SupportedSchedulers {
			if p == policy {
				supported = true
			}
		}
		if !supported {
			return errNotSupportedf("GPU %s does not support the %s vGPU scheduler", uuid, s.Policy)
		}
		if ts := uint64(s.TimeSlice); s.TimeSlice != 0 && (ts < uint64(c.MinTimeslice) || ts > uint64(c.MaxTimeslice)) {
			return fmt.Errorf("GPU %s: time slice %v outside the GPU's range %dns-%dns", uuid, s.TimeSlice, c.MinTimeslice, c.MaxTimeslice)
		}
		if s.ARREnabled {
			if c.IsArrModeSupported == 0 {
				return errNotSupportedf("GPU %s does not support adaptive round robin", uuid)
			}
			if s.Frequency != 0 && (s.Frequency < c.MinFrequencyForARR || s.Frequency > c.MaxFrequencyForARR) {
				return fmt.Errorf("GPU %s: ARR frequency %d outside %d-%d", uuid, s.Frequency, c.MinFrequencyForARR, c.MaxFrequencyForARR)
			}
			if s.AvgFactor != 0 && (s.AvgFactor < c.MinAvgFactorForARR || s.AvgFactor > c.MaxAvgFactorForARR) {
				return fmt.Errorf("GPU %s: ARR average factor %d outside %d-%d", uuid, s.AvgFactor, c.MinAvgFactorForARR, c.MaxAvgFactorForARR)
			}
		}
	}
	if s.TimeSlice < 0 || uint64(s.TimeSlice) > math.MaxUint32 {
		return fmt.Errorf("GPU %s: time slice %v out of range", uuid, s.TimeSlice)
	}
	// The v2 call carries ARR's average factor and frequency but neither a
	// time slice nor an ARR switch: a time slice, and best-effort with ARR
	// off, go through the v1 call (whose zero time slice is the default).
	needV1 := s.TimeSlice != 0 || (policy == nvml.VGPU_SCHEDULER_POLICY_BEST_EFFORT && !s.ARREnabled)
	if needV1 && !b.has(symSetSchedState) {
		return errNotSupportedf("GPU %s: driver lacks %s, needed to set a time slice or best-effort without adaptive round robin",
			uuid, symSetSchedState)
	}
	if b.has(symSetSchedStateV2) && !needV1 {
		st := &nvml.VgpuSchedulerState_v2{
			EngineId:        nvml.VGPU_SCHEDULER_ENGINE_TYPE_GRAPHICS,
			SchedulerPolicy: policy,
			AvgFactor:       s.AvgFactor,
			Frequency:       s.Frequency,
		}
		if err := controlErr(uuid, "nvmlDeviceSetVgpuSchedulerState_v2", h.SetVgpuSchedulerState_v2(st)); err != nil {
			return err
		}
	} else {
		st := &nvml.VgpuSchedulerSetState{SchedulerPolicy: policy, EnableARRMode: nvml.VGPU_SCHEDULER_ARR_DISABLE}
		if s.ARREnabled {
			st.EnableARRMode = nvml.VGPU_SCHEDULER_ARR_ENABLE
			binary.LittleEndian.PutUint32(st.SchedulerParams[0:4], s.AvgFactor)
			binary.LittleEndian.PutUint32(st.SchedulerParams[4:8], s.Frequency)
		} else {
			binary.LittleEndian.PutUint32(st.SchedulerParams[0:4], uint32(s.TimeSlice))
		}
		if err := controlErr(uuid, "nvmlDeviceSetVgpuSchedulerState", h.SetVgpuSchedulerState(st)); err != nil {
			return err
		}
	}
	level.Info(b.logger).Log("msg", "vGPU scheduler set", "uuid", uuid, "policy", s.Policy, "arr", s.ARREnabled,
		"timeslice", s.TimeSlice)
	return nil
}

// ConfigureMIG replaces the GPU's MIG instances with one GPU instance (and a
// full compute instance) per profile. It is refused (gpu.ErrBusy) while any
// process runs on the GPU or MIG mode is off (enabling it needs a GPU reset).
func (b *Backend) ConfigureMIG(ctx context.Context, uuid string, profiles []string) error {
	ds, err := b.lockDevice(ctx, "ConfigureMIG", uuid)
	if err != nil {
		return err
	}
	defer b.mu.Unlock()
	h := ds.handle
	if !b.has(symMigMode, symCreateGI, symGIProfileInfo) {
		return errNotSupportedf("driver lacks the MIG calls")
	}
	cur, _, r := h.GetMigMode()
	if err := controlErr(uuid, "nvmlDeviceGetMigMode", r); err != nil {
		return err
	}
	if cur != nvml.DEVICE_MIG_ENABLE {
		return errBusyf("GPU %s: %s", uuid, gpu.MIGModeOffHint(ds.index))
	}
	// Resolve every profile before touching anything.
	byName := map[string]nvml.GpuInstanceProfileInfo{}
	var known []string
	var all []nvml.GpuInstanceProfileInfo
	profs, r := b.giProfiles(h)
	if err := controlErr(uuid, "nvmlDeviceGetGpuInstanceProfileInfo", r); err != nil {
		return err
	}
	for _, p := range profs {
		all = append(all, p.info)
		key := strings.ToLower(p.name)
		if _, dup := byName[key]; !dup {
			byName[key] = p.info
			known = append(known, p.name)
		}
	}
	for _, p := range profs {
		// the built name, where the driver's differs: an alias, not
		// listed, for a layout named before the driver's name was read
		if _, has := byName[strings.ToLower(p.built)]; !has {
			byName[strings.ToLower(p.built)] = p.info
		}
	}
	want := make([]nvml.GpuInstanceProfileInfo, 0, len(profiles))
	for _, name := range profiles {
		p, ok := byName[strings.ToLower(strings.TrimSpace(name))]
		if !ok {
			return fmt.Errorf("GPU %s: unknown MIG profile %q (this GPU has %s)", uuid, name, strings.Join(known, ", "))
		}
		want = append(want, p)
	}
	procs, r := h.GetComputeRunningProcesses()
	if err := controlErr(uuid, "nvmlDeviceGetComputeRunningProcesses", r); err != nil {
		return err
	}
	if len(procs) > 0 {
		return errBusyf("GPU %s: %d processes are running; MIG instances can only be changed on a drained GPU", uuid, len(procs))
	}
	// Destroy the current instances (compute instances first).
	for _, p := range all {
		gis, r := h.GetGpuInstances(&p)
		if r != nvml.SUCCESS {
			continue
		}
		for _, gi := range gis {
			if err := destroyComputeInstances(uuid, gi); err != nil {
				return err
			}
			if err := controlErr(uuid, "nvmlGpuInstanceDestroy", gi.Destroy()); err != nil {
				return err
			}
		}
	}
	b.dropGPM(ds)
	for i, p := range want {
		gi, r := h.CreateGpuInstance(&p)
		if err := controlErr(uuid, "nvmlDeviceCreateGpuInstance", r); err != nil {
			return fmt.Errorf("creating MIG instance %d of %d (%s) failed; the instances before it exist: %w",
				i+1, len(want), profiles[i], err)
		}
		cp, err := fullComputeProfile(uuid, gi, p.SliceCount)
		if err != nil {
			return err
		}
		if _, r := gi.CreateComputeInstance(&cp); r != nvml.SUCCESS {
			return fmt.Errorf("creating the compute instance of MIG instance %s failed: %w", profiles[i], controlErr(uuid, "nvmlGpuInstanceCreateComputeInstance", r))
		}
	}
	level.Info(b.logger).Log("msg", "MIG layout configured", "uuid", uuid, "profiles", strings.Join(profiles, ","))
	return nil
}

func destroyComputeInstances(uuid string, gi nvml.GpuInstance) error {
	for id := 0; id < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; id++ {
		cp, r := gi.GetComputeInstanceProfileInfo(id, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if r != nvml.SUCCESS {
			continue
		}
		cis, r := gi.GetComputeInstances(&cp)
		if r != nvml.SUCCESS {
			continue
		}
		for _, ci := range cis {
			if err := controlErr(uuid, "nvmlComputeInstanceDestroy", ci.Destroy()); err != nil {
				return err
			}
		}
	}
	return nil
}

// fullComputeProfile returns the compute instance profile that spans the
// whole GPU instance.
func fullComputeProfile(uuid string, gi nvml.GpuInstance, slices uint32) (nvml.ComputeInstanceProfileInfo, error) {
	var best nvml.ComputeInstanceProfileInfo
	found := false
	for id := 0; id < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; id++ {
		cp, r := gi.GetComputeInstanceProfileInfo(id, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if r != nvml.SUCCESS {
			continue
		}
		if cp.SliceCount == slices {
			return cp, nil
		}
		if !found || cp.SliceCount > best.SliceCount {
			best, found = cp, true
		}
	}
	if !found {
		return best, fmt.Errorf("GPU %s: no compute instance profile for a %d-slice GPU instance", uuid, slices)
	}
	return best, nil
}
