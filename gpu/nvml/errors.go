package nvml

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Error is a failed NVML call. nvml.Return implements error and its SUCCESS
// value is not nil, so every Return is converted through retErr before it is
// treated as an error.
type Error struct {
	Call   string      // NVML call, e.g. "nvmlDeviceGetPowerUsage"
	Return nvml.Return // what it returned
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s", e.Call, returnName(e.Return))
}

// unsupported says whether r is a call the driver does not serve:
// NOT_SUPPORTED, FUNCTION_NOT_FOUND, DEPRECATED (retired).
func unsupported(r nvml.Return) bool {
	return r == nvml.ERROR_NOT_SUPPORTED || r == nvml.ERROR_FUNCTION_NOT_FOUND || r == nvml.ERROR_DEPRECATED
}

// Is lets errors.Is(err, gpu.ErrNotSupported) and errors.Is(err, gpu.ErrBusy)
// work on NVML errors: a call the driver does not serve (NOT_SUPPORTED,
// FUNCTION_NOT_FOUND, DEPRECATED: retired) is not supported.
func (e *Error) Is(target error) bool {
	switch target {
	case gpu.ErrNotSupported:
		return unsupported(e.Return)
	case gpu.ErrBusy:
		return e.Return == nvml.ERROR_IN_USE
	}
	return false
}

// retErr converts an NVML return code into a Go error: nil for SUCCESS.
func retErr(call string, r nvml.Return) error {
	if r == nvml.SUCCESS {
		return nil
	}
	return &Error{Call: call, Return: r}
}

// returnNames name every return code NVML has (nvml.h's nvmlReturn_t),
// some with what to check. nvml.Return's own Error calls into the library
// once it is loaded and has no hints; this table needs neither.
var returnNames = map[nvml.Return]string{
	nvml.SUCCESS:                         "SUCCESS",
	nvml.ERROR_UNINITIALIZED:             "ERROR_UNINITIALIZED (NVML not initialized)",
	nvml.ERROR_INVALID_ARGUMENT:          "ERROR_INVALID_ARGUMENT",
	nvml.ERROR_NOT_SUPPORTED:             "ERROR_NOT_SUPPORTED",
	nvml.ERROR_NO_PERMISSION:             "ERROR_NO_PERMISSION (needs root or the matching capability)",
	nvml.ERROR_ALREADY_INITIALIZED:       "ERROR_ALREADY_INITIALIZED",
	nvml.ERROR_NOT_FOUND:                 "ERROR_NOT_FOUND",
	nvml.ERROR_INSUFFICIENT_SIZE:         "ERROR_INSUFFICIENT_SIZE",
	nvml.ERROR_INSUFFICIENT_POWER:        "ERROR_INSUFFICIENT_POWER (a power cable not attached)",
	nvml.ERROR_DRIVER_NOT_LOADED:         "ERROR_DRIVER_NOT_LOADED",
	nvml.ERROR_TIMEOUT:                   "ERROR_TIMEOUT",
	nvml.ERROR_IRQ_ISSUE:                 "ERROR_IRQ_ISSUE (the kernel module saw an interrupt problem with the GPU)",
	nvml.ERROR_LIBRARY_NOT_FOUND:         "ERROR_LIBRARY_NOT_FOUND",
	nvml.ERROR_FUNCTION_NOT_FOUND:        "ERROR_FUNCTION_NOT_FOUND (driver too old for this call)",
	nvml.ERROR_CORRUPTED_INFOROM:         "ERROR_CORRUPTED_INFOROM",
	nvml.ERROR_GPU_IS_LOST:               "ERROR_GPU_IS_LOST",
	nvml.ERROR_RESET_REQUIRED:            "ERROR_RESET_REQUIRED",
	nvml.ERROR_OPERATING_SYSTEM:          "ERROR_OPERATING_SYSTEM (the operating system denied the call)",
	nvml.ERROR_LIB_RM_VERSION_MISMATCH:   "ERROR_LIB_RM_VERSION_MISMATCH (libnvidia-ml and kernel module versions differ)",
	nvml.ERROR_IN_USE:                    "ERROR_IN_USE",
	nvml.ERROR_MEMORY:                    "ERROR_MEMORY (host memory short)",
	nvml.ERROR_NO_DATA:                   "ERROR_NO_DATA",
	nvml.ERROR_VGPU_ECC_NOT_SUPPORTED:    "ERROR_VGPU_ECC_NOT_SUPPORTED",
	nvml.ERROR_INSUFFICIENT_RESOURCES:    "ERROR_INSUFFICIENT_RESOURCES",
	nvml.ERROR_FREQ_NOT_SUPPORTED:        "ERROR_FREQ_NOT_SUPPORTED",
	nvml.ERROR_ARGUMENT_VERSION_MISMATCH: "ERROR_ARGUMENT_VERSION_MISMATCH",
	nvml.ERROR_DEPRECATED:                "ERROR_DEPRECATED (a call this driver no longer serves)",
	nvml.ERROR_NOT_READY:                 "ERROR_NOT_READY",
	nvml.ERROR_GPU_NOT_FOUND:             "ERROR_GPU_NOT_FOUND",
	nvml.ERROR_INVALID_STATE:             "ERROR_INVALID_STATE",
	nvml.ERROR_RESET_TYPE_NOT_SUPPORTED:  "ERROR_RESET_TYPE_NOT_SUPPORTED",
	nvml.ERROR_UNKNOWN:                   "ERROR_UNKNOWN",
}

// returnName names a return code without calling into the library (which
// may not be loaded when Init failed); a code newer than this table is
// named by its number.
func returnName(r nvml.Return) string {
	if n, ok := returnNames[r]; ok {
		return n
	}
	return fmt.Sprintf("NVML error %d", int32(r))
}

// outcome classifies a return code for the sampling path.
type outcome int

const (
	outcomeOK     outcome = iota
	outcomeAbsent         // the reading is unavailable: leave the field nil
	outcomeCheck          // the reading is unavailable, and whether the GPU answers is to be asked
	outcomeFatal          // the GPU is not answering: mark it down
)

// classify says what a reading's return code means for the GPU. Only
// GPU_IS_LOST, RESET_REQUIRED and TIMEOUT take it down: the first two say
// so, and after a TIMEOUT every further call may wait out the driver's
// timeout again, so nothing more is asked of it that sample. UNKNOWN
// ("any unexpected error", nvml.h: nvidia-smi prints [Unknown Error] for
// that field and carries on) and the codes of a library or driver that
// stopped answering as a whole, or of a code newer than this backend,
// leave the reading absent and have whether the GPU answers asked
// (devReader.alive). Every other code is about the reading alone (not
// supported, no permission, no data yet, the OS denying the feature,
// host memory short, ...): it is left absent, the GPU up.
func classify(r nvml.Return) outcome {
	switch r {
	case nvml.SUCCESS:
		return outcomeOK
	case nvml.ERROR_GPU_IS_LOST, nvml.ERROR_RESET_REQUIRED, nvml.ERROR_TIMEOUT:
		return outcomeFatal
	case nvml.ERROR_UNKNOWN, nvml.ERROR_UNINITIALIZED, nvml.ERROR_DRIVER_NOT_LOADED,
		nvml.ERROR_LIB_RM_VERSION_MISMATCH, nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_IRQ_ISSUE,
		nvml.ERROR_GPU_NOT_FOUND:
		return outcomeCheck
	}
	if _, named := returnNames[r]; !named {
		return outcomeCheck
	}
	return outcomeAbsent
}

// Back-off for a GPU that stopped answering: it is skipped for base,
// 2*base, 4*base ... up to max between attempts.
const (
	backoffBase = 5 * time.Second
	backoffMax  = 5 * time.Minute
)

func backoff(failures int) time.Duration {
	d := backoffBase
	for i := 1; i < failures && d < backoffMax; i++ {
		d *= 2
	}
	if d > backoffMax {
		d = backoffMax
	}
	return d
}

// logOnce logs msg at most once per key (GPU and call), for readings that
// are permanently absent on a GPU.
func (b *Backend) logOnce(key string, keyvals ...any) {
	if b.first(key) {
		_ = level.Info(b.logger).Log(keyvals...)
	}
}

// warnOnce is logOnce at the warning level, for readings a GPU should give.
func (b *Backend) warnOnce(key string, keyvals ...any) {
	if b.first(key) {
		_ = level.Warn(b.logger).Log(keyvals...)
	}
}

// first reports whether key is seen for the first time.
func (b *Backend) first(key string) bool {
	b.onceMu.Lock()
	defer b.onceMu.Unlock()
	if _, seen := b.logged[key]; seen {
		return false
	}
	b.logged[key] = struct{}{}
	return true
}

// initError turns a failed Init into an error that says what to check.
func initError(r nvml.Return) error {
	var hint string
	switch r {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		hint = "libnvidia-ml.so.1 was not found: is the NVIDIA driver installed on this host, " +
			"and in a container, was it started with the NVIDIA container runtime (docker --gpus all, " +
			"runtimeClassName nvidia) so that the driver libraries are mounted?"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		hint = "the NVIDIA kernel module is not loaded: check `lsmod | grep nvidia`, `dmesg | grep -i nvrm` " +
			"and that nvidia-smi works on the host"
	case nvml.ERROR_NO_PERMISSION:
		hint = "no permission to open /dev/nvidia*: run as a user that may access the GPU devices, " +
			"or in a container set NVIDIA_VISIBLE_DEVICES (or --gpus) so the device nodes are present"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		hint = "the user-space driver library and the kernel module have different versions: " +
			"reboot or reload the nvidia module after a driver upgrade"
	default:
		hint = "check that nvidia-smi works on this host, that /dev/nvidia* exist (NVIDIA_VISIBLE_DEVICES " +
			"in containers) and that the driver is healthy (dmesg)"
	}
	return fmt.Errorf("NVML initialization failed (%s): %s; to run without a GPU use --backend=sim",
		returnName(r), hint)
}

// errNotSupportedf returns an error wrapping gpu.ErrNotSupported.
func errNotSupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", gpu.ErrNotSupported, fmt.Sprintf(format, args...))
}

// errBusyf returns an error wrapping gpu.ErrBusy.
func errBusyf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", gpu.ErrBusy, fmt.Sprintf(format, args...))
}

// controlErr converts the result of a setting call: NOT_SUPPORTED (and
// FUNCTION_NOT_FOUND, DEPRECATED) wraps gpu.ErrNotSupported, IN_USE
// gpu.ErrBusy, NO_PERMISSION says what is needed.
func controlErr(uuid, call string, r nvml.Return) error {
	switch {
	case r == nvml.SUCCESS:
		return nil
	case unsupported(r):
		return fmt.Errorf("GPU %s: %w: %w", uuid, gpu.ErrNotSupported, retErr(call, r))
	case r == nvml.ERROR_IN_USE:
		return fmt.Errorf("GPU %s: %w: %w", uuid, gpu.ErrBusy, retErr(call, r))
	case r == nvml.ERROR_NO_PERMISSION:
		return fmt.Errorf("GPU %s: %w (run the exporter as root or with CAP_SYS_ADMIN to change settings)",
			uuid, retErr(call, r))
	}
	return fmt.Errorf("GPU %s: %w", uuid, retErr(call, r))
}

var errClosed = errors.New("nvml backend is closed")

// nvmlPackage is the import path prefix of the library wrapper (go-nvml).
const nvmlPackage = "github.com/NVIDIA/go-nvml/"

// panicCall names the library call a panic being recovered came from
// ("nvml.nvmlDevice.GetProcessUtilization"), or "" when none is on the
// stack. Called from the deferred function that recovers.
func panicCall() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		fr, more := frames.Next()
		if strings.HasPrefix(fr.Function, nvmlPackage) {
			return fr.Function[strings.LastIndex(fr.Function, "/")+1:]
		}
		if !more {
			return ""
		}
	}
}

// panicErr is the error of a recovered panic p, naming the library call it
// came from.
func panicErr(what string, p any) error {
	if call := panicCall(); call != "" {
		return fmt.Errorf("%s panicked in %s: %v", what, call, p)
	}
	return fmt.Errorf("%s panicked: %v", what, p)
}
