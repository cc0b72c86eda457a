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

// returnName names a return code without calling into the library (which
// may not be loaded when Init failed).
func returnName(r nvml.Return) string {
	switch r {
	case nvml.SUCCESS:
		return "SUCCESS"
	case nvml.ERROR_UNINITIALIZED:
		return "ERROR_UNINITIALIZED (NVML not initialized)"
	case nvml.ERROR_INVALID_ARGUMENT:
		return "ERROR_INVALID_ARGUMENT"
	case nvml.ERROR_NOT_SUPPORTED:
		return "ERROR_NOT_SUPPORTED"
	case nvml.ERROR_NO_PERMISSION:
		return "ERROR_NO_PERMISSION (needs root or the matching capability)"
	case nvml.ERROR_NOT_FOUND:
		return "ERROR_NOT_FOUND"
	case nvml.ERROR_INSUFFICIENT_SIZE:
		return "ERROR_INSUFFICIENT_SIZE"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "ERROR_DRIVER_NOT_LOADED"
	case nvml.ERROR_TIMEOUT:
		return "ERROR_TIMEOUT"
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "ERROR_LIBRARY_NOT_FOUND"
	case nvml.ERROR_FUNCTION_NOT_FOUND:
		return "ERROR_FUNCTION_NOT_FOUND (driver too old for this call)"
	case nvml.ERROR_GPU_IS_LOST:
		return "ERROR_GPU_IS_LOST"
	case nvml.ERROR_RESET_REQUIRED:
		return "ERROR_RESET_REQUIRED"
	case nvml.ERROR_IN_USE:
		return "ERROR_IN_USE"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "ERROR_LIB_RM_VERSION_MISMATCH (libnvidia-ml and kernel module versions differ)"
	case nvml.ERROR_DEPRECATED:
		return "ERROR_DEPRECATED (a call this driver no longer serves)"
	case nvml.ERROR_UNKNOWN:
		return "ERROR_UNKNOWN"
	}
	return fmt.Sprintf("NVML error %d", int32(r))
}

// outcome classifies a return code for the sampling path.
type outcome int

const (
	outcomeOK     outcome = iota
	outcomeAbsent         // the reading is unavailable: leave the field nil
	outcomeFatal          // the GPU is not answering: mark it down
)

func classify(r nvml.Return) outcome {
	switch r {
	case nvml.SUCCESS:
		return outcomeOK
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_NO_PERMISSION,
		nvml.ERROR_NOT_FOUND, nvml.ERROR_INSUFFICIENT_SIZE, nvml.ERROR_INVALID_ARGUMENT,
		nvml.ERROR_ARGUMENT_VERSION_MISMATCH, nvml.ERROR_DEPRECATED:
		// INVALID_ARGUMENT and VERSION_MISMATCH come from calls a GPU or
		// driver does not implement in the form asked; DEPRECATED from
		// calls a newer driver retired; NOT_FOUND from calls with no data
		// yet (no utilization sample). None of them means the GPU stopped
		// answering.
		return outcomeAbsent
	}
	return outcomeFatal
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
	b.onceMu.Lock()
	_, seen := b.logged[key]
	if !seen {
		b.logged[key] = struct{}{}
	}
	b.onceMu.Unlock()
	if !seen {
		_ = level.Info(b.logger).Log(keyvals...)
	}
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
