// Package nvml is the gpu.Source and the NVML actuators of a real host, over NVIDIA's
// management library through github.com/NVIDIA/go-nvml (cgo; libnvidia-ml.so.1
// is opened at run time, so the package builds without a driver).
//
// It never takes the process down: every NVML symbol newer than the oldest
// supported driver (R450, the first with MIG) is looked up before it is
// called, nothing is called after a failed Init, a reading a GPU does not
// support is left nil (and logged once per GPU and call), and a GPU that
// stops answering is reported down (Device.Up=false) and retried with a
// growing back-off while the others keep reporting.
package nvml

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/energyguard"
	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
)

// Options configure New.
type Options struct {
	// Lib is the NVML implementation; nil means the real library
	// (libnvidia-ml.so.1). Tests pass go-nvml's mock servers.
	Lib nvml.Interface
	// Clock times samples, intervals and back-off; nil means gpu.RealClock.
	Clock gpu.Clock
	// Logger receives warnings and once-per-GPU notes; nil discards.
	Logger log.Logger
	// VMs finds the host process and the name of the VM a vGPU serves,
	// from the VM's UUID and the vGPU's mediated device (gpu/vmproc on a
	// KVM host); nil: neither is known.
	VMs VMFinder
	// Proc is the procfs root the names of the GPUs' processes are read
	// under (procname.go); "/proc" when empty.
	Proc string
}

// VMFinder finds a VM's host process and name from its UUID and the UUID
// of the mediated device of one of its vGPUs ("" when the driver gives
// none).
type VMFinder interface {
	Find(vmUUID, mdevUUID string) (pid uint32, name string, ok bool)
}

// maxGPUs is the most GPUs New accepts from nvmlDeviceGetCount.
const maxGPUs = 1024

// Backend reads and controls the GPUs of this host through NVML. It
// implements gpu.Source (Name "nvml"), gpu.CapabilityLister and the NVML
// actuators: gpu.VGPUSchedulerActuator, gpu.ClockPowerActuator and
// gpu.MIGActuator.
type Backend struct {
	lib    nvml.Interface
	clock  gpu.Clock
	logger log.Logger
	syms   map[string]bool
	vms    VMFinder // nil: none

	// giProfileInfoV3 reads the v3 info of a GPU instance profile (its
	// name), where the driver has the call (symGIProfileInfoV); a field,
	// so that a test can stand in for the driver.
	giProfileInfoV3 func(h nvml.Device, index int) (nvml.GpuInstanceProfileInfo_v3, nvml.Return)

	driverVersion string
	cudaVersion   string

	mu       backendLock // serializes sampling and control
	devs     []*devState
	prevTime time.Time
	closed   bool

	onceMu sync.Mutex
	logged map[string]struct{}
	// energyLog bounds the lines about refused energy readings
	energyLog *ratelog.Keyed

	events *eventWatcher
	names  *procNames // the processes' names, read outside mu
	knobs  knobLists  // the GPUs' knobs as the last sample found them, read outside mu
}

var (
	_ gpu.Source                = (*Backend)(nil)
	_ gpu.CapabilityLister      = (*Backend)(nil)
	_ gpu.VGPUSchedulerActuator = (*Backend)(nil)
	_ gpu.ClockPowerActuator    = (*Backend)(nil)
	_ gpu.MIGActuator           = (*Backend)(nil)
)

// devState is what the backend keeps between samples for one GPU.
type devState struct {
	index  int
	handle nvml.Device // nil until (re)acquired
	uuid   string
	name   string
	pciBus string

	// health
	down     bool
	failures int
	retryAt  time.Time
	lastErr  string

	// per-process and vGPU utilization: last sample timestamp seen (µs)
	procLastSeen     lastSeen
	vgpuLastSeen     lastSeen
	vgpuProcLastSeen lastSeen
	schedLastTS      uint64

	gpmSupported *bool   // nil until asked
	gpm          gpmPrev // of the whole GPU (uuid unused)
	migGPMPrev   map[int]gpmPrev
	giProfiles   map[uint32]string // GPU instance profile names by profile ID; nil until read
	giFullSMs    int               // SMs of the profile of the most slices, read with giProfiles
	ctxSwitches  float64
	ctxCycles    float64
	ctxKnown     bool
	nvlinkErrs   nvlinkErrors
	energy       energyguard.Guard

	// clocks locked through this backend (nil when never changed here)
	locked *bool
	// mode: the sharing mode of the last sample that read the GPU
	mode gpu.SharingMode
	// for its knobs (knobs.go): whether the last sample read it as a vGPU
	// host, and whether NVML gives its power limit's range (nil until it
	// answered that it does or does not)
	hostVGPU    bool
	powerLimits *bool
}

type gpmPrev struct {
	sample nvml.GpmSample
	at     time.Time
	uuid   string // of the MIG device: a GPU instance ID is reused when instances are recreated
	fails  int    // steps in a row that gave no ratio through a failed call
	// stopped: the sample was dropped for a lasting failure (failed), and
	// no step has given a ratio since: the source stays "" meanwhile, or a
	// GPM that samples but computes nothing would name it again with every
	// new sample (vgpu_gpu_info's labels flapping)
	stopped bool
}

// New initializes NVML and enumerates the GPUs. On failure the error says
// what to check (driver, library, permissions, container runtime); nothing
// else is called after a failed Init.
func New(opts Options) (b *Backend, err error) {
	lib := opts.Lib
	if lib == nil {
		lib = nvml.New()
	}
	clock := opts.Clock
	if clock == nil {
		clock = gpu.RealClock{}
	}
	logger := opts.Logger
	if logger == nil {
		logger = log.NewNopLogger()
	}
	initialized := false
	defer func() {
		// A broken library wrapper must not take the exporter down.
		if r := recover(); r != nil {
			if initialized {
				shutdownQuietly(lib)
			}
			b, err = nil, fmt.Errorf("NVML initialization failed: %w", panicErr("the library", r))
		}
	}()
	if r := lib.Init(); r != nvml.SUCCESS {
		return nil, initError(r)
	}
	initialized = true
	b = &Backend{lib: lib, clock: clock, logger: logger, vms: opts.VMs, logged: map[string]struct{}{},
		energyLog: ratelog.NewKeyed(energyLogEvery, 64), giProfileInfoV3: giProfileInfoV3,
		names: newProcNames(opts.Proc, clock, logger)}
	b.lookupSymbols()

	if v, r := lib.SystemGetDriverVersion(); r == nvml.SUCCESS {
		b.driverVersion = v
	}
	if b.has(symCudaDriverVersion) {
		if v, r := lib.SystemGetCudaDriverVersion(); r == nvml.SUCCESS && v > 0 {
			b.cudaVersion = fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
		}
	}
	n, r := lib.DeviceGetCount()
	if r != nvml.SUCCESS {
		_ = lib.Shutdown()
		return nil, fmt.Errorf("NVML initialized but counting GPUs failed (%s): check nvidia-smi and dmesg", returnName(r))
	}
	if n < 0 || n > maxGPUs {
		// Walking it would ask for billions of handles and keep as many
		// GPUs: a broken driver or library, not a host.
		_ = lib.Shutdown()
		return nil, fmt.Errorf("NVML reports %d GPUs, more than the %d any host has: check nvidia-smi and the driver", n, maxGPUs)
	}
	for i := 0; i < n; i++ {
		ds := &devState{index: i, migGPMPrev: map[int]gpmPrev{}}
		b.acquire(ds)
		b.devs = append(b.devs, ds)
	}
	level.Info(logger).Log("msg", "NVML initialized", "driver", b.driverVersion, "cuda", b.cudaVersion, "gpus", n)
	b.startEvents()
	return b, nil
}

// shutdownQuietly releases the library after New failed half-way; a panic
// of the wrapper there is swallowed.
func shutdownQuietly(lib nvml.Interface) {
	defer func() { _ = recover() }()
	_ = lib.Shutdown()
}

// acquire gets (or re-gets) a GPU's handle and identity. On failure the GPU
// is marked down.
func (b *Backend) acquire(ds *devState) bool {
	var (
		h    nvml.Device
		r    nvml.Return
		call string
	)
	if ds.uuid != "" {
		// By UUID, so that a renumbering after a GPU fell off the bus
		// does not swap identities.
		h, r = b.lib.DeviceGetHandleByUUID(ds.uuid)
		call = "nvmlDeviceGetHandleByUUID"
	} else {
		h, r = b.lib.DeviceGetHandleByIndex(ds.index)
		call = fmt.Sprintf("nvmlDeviceGetHandleByIndex(%d)", ds.index)
	}
	if r != nvml.SUCCESS {
		b.markDown(ds, retErr(call, r))
		return false
	}
	uuid, r := h.GetUUID()
	if r != nvml.SUCCESS {
		b.markDown(ds, retErr("nvmlDeviceGetUUID", r))
		return false
	}
	ds.handle = h
	ds.uuid = uuid
	if name, r := h.GetName(); r == nvml.SUCCESS {
		ds.name = name
	}
	if pci, r := h.GetPciInfo(); r == nvml.SUCCESS {
		ds.pciBus = cString(pci.BusId[:])
	}
	if b.events != nil {
		// Missing at start, or lost and back (a reset drops the
		// registration): register the new handle for XID events.
		b.events.register(b, ds)
	}
	return true
}

// markDown records a failure of a GPU and schedules the next attempt.
func (b *Backend) markDown(ds *devState, err error) {
	ds.failures++
	wait := backoff(ds.failures)
	ds.retryAt = b.clock.Now().Add(wait)
	msg := err.Error()
	if !ds.down || ds.lastErr != msg {
		level.Warn(b.logger).Log("msg", "GPU not answering; skipping it", "gpu", ds.index, "uuid", ds.uuid,
			"err", msg, "retry_in", wait)
	}
	ds.down = true
	ds.lastErr = msg
	// Handles of a lost GPU are not reused: re-acquire on recovery. The
	// reset that brings it back drops a clock lock: this backend's record
	// of one no longer says whether the clocks are locked; it ends every
	// process, an MPS server's too: the mode last read no longer says how
	// the GPU is shared; and it starts the driver's counters again at 0:
	// the per-link NVLink error counts and the energy reading kept are of
	// before it (the sums and the energy counter served go down once, a
	// counter reset, rather than mixing counts of before and after).
	var e *Error
	if errors.As(err, &e) && (e.Return == nvml.ERROR_GPU_IS_LOST || e.Return == nvml.ERROR_RESET_REQUIRED) {
		ds.handle = nil
		ds.giProfiles, ds.giFullSMs = nil, 0
		ds.locked = nil
		ds.mode = ""
		ds.powerLimits = nil
		ds.nvlinkErrs = nil
		ds.energy = energyguard.Guard{}
		b.dropGPM(ds)
	}
}

func (b *Backend) markUp(ds *devState) {
	if ds.down {
		level.Info(b.logger).Log("msg", "GPU answering again", "gpu", ds.index, "uuid", ds.uuid)
	}
	ds.down = false
	ds.failures = 0
	ds.lastErr = ""
}

// Name is "nvml".
func (b *Backend) Name() string { return "nvml" }

// Sample reads every GPU. A GPU that fails is reported with Up=false and
// Err; the error return is only for a closed backend or a cancelled context.
// The processes are named, and the MPS servers told, once the GPUs are
// read, without the lock: each is a read of the process's procfs, which
// may not end (procname.go, mpsserver.go).
func (b *Backend) Sample(ctx context.Context) (*gpu.Readings, error) {
	rd, err := b.sampleGPUs(ctx)
	if err != nil {
		return nil, err
	}
	b.names.fill(rd)
	b.names.markMPSServers(rd)
	return rd, nil
}

// sampleGPUs reads every GPU, holding the backend's lock.
func (b *Backend) sampleGPUs(ctx context.Context) (*gpu.Readings, error) {
	if err := b.mu.lockFor(ctx, "a sample"); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed
	}
	now := b.clock.Now()
	rd := &gpu.Readings{
		Time:          now,
		Backend:       b.Name(),
		DriverVersion: b.driverVersion,
		CUDAVersion:   b.cudaVersion,
	}
	if !b.prevTime.IsZero() {
		rd.Interval = now.Sub(b.prevTime)
	}
	b.prevTime = now
	for _, ds := range b.devs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d := b.sampleDevice(ds, now)
		b.knobs.set(ds.uuid, b.knobsOf(ds, &d))
		rd.Devices = append(rd.Devices, d)
	}
	return rd, nil
}

func (b *Backend) sampleDevice(ds *devState, now time.Time) (d gpu.Device) {
	d = gpu.Device{Index: ds.index, UUID: ds.uuid, Name: ds.name, PCIBusID: ds.pciBus}
	defer func() {
		// A wrapper or driver fault on one GPU must not take down the others.
		if r := recover(); r != nil {
			b.markDown(ds, panicErr("reading GPU", r))
			d = gpu.Device{Index: ds.index, UUID: ds.uuid, Name: ds.name, PCIBusID: ds.pciBus,
				Err: ds.lastErr}
		}
	}()
	if ds.down && now.Before(ds.retryAt) {
		d.Err = ds.lastErr
		d.Events = b.takeEvents(ds)
		return d
	}
	if ds.handle == nil && !b.acquire(ds) {
		d.Err = ds.lastErr
		return d
	}
	d.UUID, d.Name, d.PCIBusID = ds.uuid, ds.name, ds.pciBus
	rd := &devReader{b: b, ds: ds}
	rd.read(&d, now)
	if rd.fatal != nil {
		b.markDown(ds, rd.fatal)
		d = gpu.Device{Index: ds.index, UUID: ds.uuid, Name: ds.name, PCIBusID: ds.pciBus, Err: ds.lastErr}
		d.Events = b.takeEvents(ds)
		return d
	}
	b.markUp(ds)
	d.Up = true
	d.Events = b.takeEvents(ds)
	return d
}

// Close stops the event goroutine and shuts NVML down. It is safe to call
// more than once.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.knobs.clear()
	if b.events != nil {
		b.events.stop()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ds := range b.devs {
		b.dropGPM(ds)
	}
	if r := b.lib.Shutdown(); r != nvml.SUCCESS {
		return retErr("nvmlShutdown", r)
	}
	return nil
}

func (b *Backend) dropGPM(ds *devState) {
	ds.gpm.drop()
	ds.dropMIGSamples(nil)
}

// device returns the state of the GPU with this UUID.
func (b *Backend) device(uuid string) (*devState, error) {
	for _, ds := range b.devs {
		if ds.uuid == uuid {
			if ds.handle == nil {
				return nil, fmt.Errorf("GPU %s is not answering: %s", uuid, ds.lastErr)
			}
			return ds, nil
		}
	}
	return nil, fmt.Errorf("no GPU with UUID %q on this host", uuid)
}

// cString converts a NUL-terminated C char array.
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
