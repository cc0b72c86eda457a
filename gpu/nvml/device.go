package nvml

import (
	"fmt"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// devReader reads one GPU for one sample. ok() classifies each NVML return:
// absent readings stay nil (logged once per GPU, call and code); the first
// fatal error is kept and the GPU is then reported down.
type devReader struct {
	b     *Backend
	ds    *devState
	fatal error
	now   time.Time // of the sample
	// asked: whether the GPU answers was asked this sample (alive)
	asked bool
	// unknown are the calls that failed this sample with a code that does
	// not tell (UNKNOWN), the GPU's UUID answering (dead)
	unknown []string
	// migHandles are the MIG device handles, in MIG mode: one per compute
	// instance (a GPU instance may hold several).
	migHandles []migHandle
	// migUnlisted: a MIG device has no handle in migHandles (its handle
	// refused, or its GPU instance not given): its list is not read.
	migUnlisted bool
}

// migHandle is a MIG device handle with its GPU and compute instance IDs
// (ci -1 when the driver did not say it).
type migHandle struct {
	gi, ci int
	h      nvml.Device
}

// ok reports whether r is SUCCESS. A fatal error is recorded; an absent
// reading is logged once per GPU, call and code; after a code that does
// not say whether the GPU answers (UNKNOWN), alive asks it.
func (rd *devReader) ok(call string, r nvml.Return) bool {
	switch classify(r) {
	case outcomeOK:
		return true
	case outcomeFatal:
		if rd.fatal == nil {
			rd.fatal = retErr(call, r)
		}
		return false
	case outcomeCheck:
		if !rd.alive(call, r) {
			return false
		}
		rd.unknown = append(rd.unknown, call)
		rd.b.warnOnce(rd.ds.uuid+"/"+call+"/"+returnName(r), "msg", "reading failed on a GPU that answers; left out",
			"gpu", rd.ds.index, "uuid", rd.ds.uuid, "call", call, "reason", returnName(r))
		return false
	}
	if r != nvml.ERROR_NOT_FOUND { // NOT_FOUND: no data this time, not worth a log line
		rd.b.logOnce(rd.ds.uuid+"/"+call+"/"+returnName(r), "msg", "reading unavailable on this GPU; left out",
			"gpu", rd.ds.index, "uuid", rd.ds.uuid, "call", call, "reason", returnName(r))
	}
	return false
}

// alive says whether the GPU answers after call returned r, a code that
// does not tell (UNKNOWN): its UUID is asked, once a sample. If that fails
// too, the GPU is down (a fatal error naming both calls is recorded).
func (rd *devReader) alive(call string, r nvml.Return) bool {
	if rd.asked || rd.fatal != nil {
		return rd.fatal == nil
	}
	rd.asked = true
	if _, r2 := rd.ds.handle.GetUUID(); r2 != nvml.SUCCESS {
		rd.fatal = fmt.Errorf("%s: %s, and the GPU's UUID then: %w", call, returnName(r), retErr("nvmlDeviceGetUUID", r2))
		return false
	}
	return true
}

// maxNamed is how many failed calls an error names.
const maxNamed = 4

// dead marks d's GPU down where none of the figures a GPU answers with
// whenever it works (memory, SM clock, power, temperature, utilization,
// energy) was read, and a call failed with a code that does not tell
// (UNKNOWN): its UUID, and its modes, may answer from what the driver
// holds, and a GPU wedged so would stay up with every figure absent. The
// error names the calls.
func (rd *devReader) dead(d *gpu.Device) {
	if rd.fatal != nil || len(rd.unknown) == 0 || d.MemoryTotalBytes > 0 || d.SMClockHz != nil || d.PowerWatts != nil ||
		d.TemperatureC != nil || d.GPUUtil != nil || d.EnergyJoules != nil {
		return
	}
	named := strings.Join(rd.unknown[:min(len(rd.unknown), maxNamed)], ", ")
	if more := len(rd.unknown) - maxNamed; more > 0 {
		named += fmt.Sprintf(" and %d more", more)
	}
	rd.fatal = fmt.Errorf("none of memory, clocks, power, temperature, utilization or energy read: %s failed with a code that does not tell, the GPU's UUID answering", named)
}

// skip logs once that a call is skipped because the driver lacks it.
func (rd *devReader) skip(call string) {
	rd.b.logOnce(rd.ds.uuid+"/"+call+"/symbol", "msg", "driver lacks this NVML call; reading left out",
		"gpu", rd.ds.index, "uuid", rd.ds.uuid, "call", call)
}

// Peak figures of known GPUs, for the fields NVML does not report for a whole
// GPU. docs/calibration.md, hardware (vendor datasheets): H100 SXM5 80GB 132 SMs
// 3.35 TB/s, H200 SXM5 141GB 132 SMs 4.8 TB/s; A100 108 SMs (NVIDIA's A100
// architecture whitepaper), its bandwidth, which differs by board, not known.
var knownGPUs = []struct {
	prefix    string // start of the NVML name ("NVIDIA GH200 ..." is another GPU)
	sms       int
	bandwidth float64 // bytes per second; 0 not known
}{
	{"NVIDIA H100 80GB HBM3", 132, 3.35e12},
	{"NVIDIA H200", 132, 4.8e12},
	{"NVIDIA A100-SXM4-", 108, 0},
	{"NVIDIA A100-PCIE-", 108, 0},
}

// read reads a GPU's figures in turn while it answers: once a call returned
// a fatal error, the GPU is reported down and nothing more is asked of it
// this sample (every call of a GPU that stopped answering may wait out the
// driver's timeout, ERROR_TIMEOUT, and the sample waits for every GPU).
func (rd *devReader) read(d *gpu.Device, now time.Time) {
	rd.now = now
	rd.inTurn(
		func() { rd.readBasic(d) },
		func() { rd.readHealth(d) },
		func() { rd.readMIG(d) },
		func() { rd.readGPM(d, now) },
		func() { rd.readProcesses(d) },
		func() { rd.readVGPU(d, now) },
	)
	rd.dead(d)
	d.Mode = rd.mode(d)
}

// mode is d's sharing mode (sharingMode), kept for the next sample. A GPU
// last read in MPS mode stays so while NVML refuses its MPS clients' list:
// read from the compute list alone, which holds the MPS server and none
// of its clients, it would read exclusive (or time-sliced), and the MPS
// controls would go while its clients run on. Not once that list, read,
// shows no MPS server (its processes each named as the last sample
// named them, none nvidia-cuda-mps-server): the server gone, its clients
// went with it, and the GPU kept in MPS mode would stay so for as long
// as the list is refused.
func (rd *devReader) mode(d *gpu.Device) gpu.SharingMode {
	m := sharingMode(d)
	if d.MPSProcessesRefused && rd.ds.mode == gpu.SharingMPS && (m == gpu.SharingExclusive || m == gpu.SharingTimeSlice) &&
		!rd.noMPSServer(d) {
		m = gpu.SharingMPS
	}
	if rd.fatal == nil {
		rd.ds.mode = m
	}
	return m
}

// noMPSServer says whether d's compute list was read and shows no MPS
// server (procNames.noMPSServer).
func (rd *devReader) noMPSServer(d *gpu.Device) bool {
	if d.ProcessesUnread {
		return false
	}
	var pids []uint32
	for _, p := range d.Processes {
		if p.Type == gpu.ProcessCompute {
			pids = append(pids, p.PID)
		}
	}
	return rd.b.names.noMPSServer(pids)
}

// inTurn runs steps in order until one records a fatal error.
func (rd *devReader) inTurn(steps ...func()) {
	for _, step := range steps {
		if rd.fatal != nil {
			return
		}
		step()
	}
}

// readBasic reads memory, clocks, power, temperature, the clock-event
// reasons, energy, modes, ECC and utilization.
func (rd *devReader) readBasic(d *gpu.Device) {
	h := rd.ds.handle
	b := rd.b
	for _, k := range knownGPUs {
		if strings.HasPrefix(d.Name, k.prefix) {
			d.SMCount, d.MemoryBandwidthBytesPS = k.sms, k.bandwidth
		}
	}
	rd.inTurn(func() {
		d.MemoryTotalBytes, d.MemoryUsedBytes, _ = rd.memoryInfo(h, "")
	}, func() {
		if v, r := h.GetClockInfo(nvml.CLOCK_SM); rd.ok("nvmlDeviceGetClockInfo(SM)", r) {
			d.SMClockHz = gpu.Float(float64(v) * 1e6)
		}
	}, func() {
		if v, r := h.GetMaxClockInfo(nvml.CLOCK_SM); rd.ok("nvmlDeviceGetMaxClockInfo(SM)", r) {
			d.SMClockMaxHz = gpu.Float(float64(v) * 1e6)
		}
	}, func() {
		if v, r := h.GetClockInfo(nvml.CLOCK_MEM); rd.ok("nvmlDeviceGetClockInfo(MEM)", r) {
			d.MemClockHz = gpu.Float(float64(v) * 1e6)
		}
	}, func() {
		if v, r := h.GetPowerUsage(); rd.ok("nvmlDeviceGetPowerUsage", r) {
			d.PowerWatts = gpu.Float(float64(v) / 1000)
		}
	}, func() {
		if v, r := h.GetEnforcedPowerLimit(); rd.ok("nvmlDeviceGetEnforcedPowerLimit", r) {
			d.PowerLimitW = gpu.Float(float64(v) / 1000)
		}
	}, func() {
		if v, r := h.GetTemperature(nvml.TEMPERATURE_GPU); rd.ok("nvmlDeviceGetTemperature", r) {
			d.TemperatureC = gpu.Float(float64(v))
		}
	}, func() {
		rd.readReasons(d)
	}, func() {
		if !b.has(symEnergy) {
			rd.skip(symEnergy)
		} else if v, r := h.GetTotalEnergyConsumption(); rd.ok("nvmlDeviceGetTotalEnergyConsumption", r) {
			d.EnergyJoules = rd.readEnergy(d, v)
		} else {
			rd.noEnergy(d)
		}
	}, func() {
		if v, r := h.GetPersistenceMode(); rd.ok("nvmlDeviceGetPersistenceMode", r) {
			d.PersistenceMode = gpu.Bool(v == nvml.FEATURE_ENABLED)
		}
	}, func() {
		if v, r := h.GetComputeMode(); rd.ok("nvmlDeviceGetComputeMode", r) {
			d.ComputeMode = computeModeName(v)
		}
	}, func() {
		cur, _, r := h.GetEccMode()
		if !rd.ok("nvmlDeviceGetEccMode", r) {
			return
		}
		d.ECCEnabled = gpu.Bool(cur == nvml.FEATURE_ENABLED)
		if cur != nvml.FEATURE_ENABLED {
			return
		}
		rd.inTurn(func() {
			if v, r := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC); rd.ok("nvmlDeviceGetTotalEccErrors(corrected)", r) {
				d.ECCCorrectedTotal = gpu.Uint(v)
			}
		}, func() {
			if v, r := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); rd.ok("nvmlDeviceGetTotalEccErrors(uncorrected)", r) {
				d.ECCUncorrectedTotal = gpu.Uint(v)
			}
		})
	}, func() {
		if u, r := h.GetUtilizationRates(); rd.ok("nvmlDeviceGetUtilizationRates", r) {
			d.GPUUtil = rd.percent("nvmlDeviceGetUtilizationRates(GPU)", u.Gpu)
			d.MemUtil = rd.percent("nvmlDeviceGetUtilizationRates(memory)", u.Memory)
		}
	})
}

// readReasons reads the clock-event reasons, and from them and this
// backend's own record whether the clocks are locked.
func (rd *devReader) readReasons(d *gpu.Device) {
	h := rd.ds.handle
	b := rd.b
	var reasonsKnown bool
	switch {
	case b.has(symClocksEventReasons):
		if v, r := h.GetCurrentClocksEventReasons(); rd.ok("nvmlDeviceGetCurrentClocksEventReasons", r) {
			d.ThrottleReason, reasonsKnown = v, true
		}
	case b.has(symThrottleReasons):
		if v, r := h.GetCurrentClocksThrottleReasons(); rd.ok("nvmlDeviceGetCurrentClocksThrottleReasons", r) {
			d.ThrottleReason, reasonsKnown = v, true
		}
	default:
		rd.skip(symClocksEventReasons)
	}
	d.ThrottleReasonUnknown = !reasonsKnown
	// Clocks are locked when this backend locked them, or when the driver
	// reports the applications-clocks reason. From R535 (the clock-event
	// reasons call) that bit is documented as no longer used, so its
	// absence only says "not locked" on older drivers; otherwise the state
	// is unknown (nil) unless this backend reset the lock itself.
	const reasonAppClocks = 0x2 // nvmlClocksEventReasonApplicationsClocksSetting
	bitMeaningful := reasonsKnown && !b.has(symClocksEventReasons)
	switch {
	case rd.ds.locked != nil && *rd.ds.locked:
		d.ClocksLocked = gpu.Bool(true)
	case reasonsKnown && d.ThrottleReason&reasonAppClocks != 0:
		d.ClocksLocked = gpu.Bool(true)
	case rd.ds.locked != nil || bitMeaningful:
		d.ClocksLocked = gpu.Bool(false)
	}
}

// memoryInfo reads the memory size and use of a GPU or MIG device (what
// names it in call names: "" or "(MIG)"). The v2 call (R510+) reports use
// without the memory the driver and firmware reserve, as nvidia-smi does;
// v1's use includes it. v1 is the fallback. Use over the size is no
// reading: both are left out (0, as unread), logged once.
func (rd *devReader) memoryInfo(h nvml.Device, what string) (total, used uint64, ok bool) {
	if rd.b.has(symMemoryInfoV2) {
		mem, r := h.GetMemoryInfo_v2()
		if r == nvml.SUCCESS {
			return rd.memoryRead("nvmlDeviceGetMemoryInfo_v2"+what, mem.Total, mem.Used)
		}
		if classify(r) == outcomeFatal {
			rd.ok("nvmlDeviceGetMemoryInfo_v2"+what, r)
			return 0, 0, false
		}
		// Not supported in this form (e.g. a version mismatch): try v1.
	}
	mem, r := h.GetMemoryInfo()
	if !rd.ok("nvmlDeviceGetMemoryInfo"+what, r) {
		return 0, 0, false
	}
	return rd.memoryRead("nvmlDeviceGetMemoryInfo"+what, mem.Total, mem.Used)
}

// memoryRead takes a memory reading of call unless its use is over its
// size.
func (rd *devReader) memoryRead(call string, total, used uint64) (uint64, uint64, bool) {
	if used > total {
		rd.outOfRange(call, "used", used, "total", total)
		return 0, 0, false
	}
	return total, used, true
}

// percent is an NVML percentage as a ratio; nil (logged once) for one
// over 100: a whole number cannot overshoot by rounding, so it is no
// reading, and clamped to 1 it would be served as a busy GPU.
func (rd *devReader) percent(call string, v uint32) *float64 {
	if v > 100 {
		rd.outOfRange(call, "value", v)
		return nil
	}
	return gpu.Float(float64(v) / 100)
}

// outOfRange logs once per GPU and call that the call answered a figure
// that cannot be (keyvals say which), left out.
func (rd *devReader) outOfRange(call string, keyvals ...any) {
	rd.b.warnOnce(rd.ds.uuid+"/"+call+"/range", append([]any{"msg", "NVML answered a figure out of its range; left out",
		"gpu", rd.ds.index, "uuid", rd.ds.uuid, "call", call}, keyvals...)...)
}

// computeModeNames are NVML's compute modes as nvidia-smi names them.
var computeModeNames = map[nvml.ComputeMode]string{
	nvml.COMPUTEMODE_DEFAULT:           "Default",
	nvml.COMPUTEMODE_EXCLUSIVE_THREAD:  "Exclusive_Thread",
	nvml.COMPUTEMODE_PROHIBITED:        "Prohibited",
	nvml.COMPUTEMODE_EXCLUSIVE_PROCESS: "Exclusive_Process",
}

func computeModeName(m nvml.ComputeMode) string {
	if n, ok := computeModeNames[m]; ok {
		return n
	}
	return fmt.Sprintf("Unknown(%d)", int(m))
}

// sharingMode names the outermost sharing mechanism seen on the GPU.
func sharingMode(d *gpu.Device) gpu.SharingMode {
	switch {
	case d.MIGEnabled:
		return gpu.SharingMIG
	case d.Scheduler != nil || len(d.VGPUs) > 0:
		return gpu.SharingVGPU
	}
	compute := 0
	for _, p := range d.Processes {
		switch p.Type {
		case gpu.ProcessMPS:
			return gpu.SharingMPS
		case gpu.ProcessCompute:
			compute++
		}
	}
	if compute > 1 {
		return gpu.SharingTimeSlice
	}
	return gpu.SharingExclusive
}
