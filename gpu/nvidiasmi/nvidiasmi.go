// Package nvidiasmi sets the compute time-slice level of a GPU through
// `nvidia-smi compute-policy --set-timeslice` (NVML has no call for it).
// The level applies to the whole GPU, needs root, and is lost on reboot or
// driver reload.
//
// Every set is verified: nvidia-smi may exit 0 having failed, so the level
// is read back from `nvidia-smi compute-policy --list` (parsed strictly)
// and a different one is an error naming the program, the GPU and what it
// printed. Where the listing does not say the level, a set whose output
// reports no failure is accepted.
//
// SMI implements gpu.TimeSliceActuator and gpu.CapabilityLister.
package nvidiasmi

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command"
)

// Defaults.
const (
	DefaultPath    = "nvidia-smi"
	DefaultTimeout = 10 * time.Second
)

// nvidia-smi's documented exit statuses that mean something to a caller.
const (
	exitNotSupported = 3
	exitNoPermission = 4
	exitNotFound     = 6
	exitNoDriver     = 9
)

// levels maps the levels to --set-timeslice's values.
var levels = []gpu.TimeSliceLevel{gpu.TimeSliceDefault, gpu.TimeSliceShort, gpu.TimeSliceMedium, gpu.TimeSliceLong}

// Options configure an SMI.
type Options struct {
	Path    string        // nvidia-smi: a path or a name on PATH; default DefaultPath
	Timeout time.Duration // one nvidia-smi run; default DefaultTimeout
	// TimeoutName is what sets Timeout (the command line's flag), named in
	// the error of a run it kills; "" names none.
	TimeoutName string
	Logger      log.Logger
}

// SMI drives nvidia-smi. It is safe for concurrent use.
type SMI struct {
	opts   Options
	logger log.Logger
}

var (
	_ gpu.TimeSliceActuator = (*SMI)(nil)
	_ gpu.CapabilityLister  = (*SMI)(nil)
)

// New returns an SMI without checking that nvidia-smi has compute-policy
// (see Detect).
func New(opts Options) *SMI {
	if opts.Path == "" {
		opts.Path = DefaultPath
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	s := &SMI{opts: opts, logger: opts.Logger}
	if s.logger == nil {
		s.logger = log.NewNopLogger()
	}
	return s
}

// Detect returns an SMI when nvidia-smi is found and its compute-policy
// command offers --set-timeslice (drivers before R465 lack it).
func Detect(ctx context.Context, opts Options) (*SMI, error) {
	s := New(opts)
	if _, err := exec.LookPath(s.opts.Path); err != nil {
		return nil, fmt.Errorf("nvidia-smi %q not found (set --nvidia-smi.path): %w", s.opts.Path, err)
	}
	res, err := command.Run(ctx, command.Spec{Path: s.opts.Path, Args: []string{"compute-policy", "--help"}, Timeout: s.opts.Timeout, TimeoutName: s.opts.TimeoutName})
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi compute-policy not usable: %w", err)
	}
	if !strings.Contains(string(res.Stdout)+string(res.Stderr), "set-timeslice") {
		return nil, fmt.Errorf("%s compute-policy has no --set-timeslice (driver too old?): %w", s.opts.Path, gpu.ErrNotSupported)
	}
	return s, nil
}

// Capabilities lists the compute time-slice knob, on every GPU.
func (s *SMI) Capabilities(string) []gpu.Knob {
	return []gpu.Knob{gpu.KnobComputeTimeSlice}
}

// SetComputeTimeSlice runs `nvidia-smi compute-policy -i UUID
// --set-timeslice=N` (0 default, 1 short, 2 medium, 3 long) and verifies it:
// nvidia-smi may exit 0 having changed nothing, so the level is read back
// (`--list`) and must be the one asked for. Where the listing does not say
// the level, the set is accepted unless nvidia-smi printed a failure.
func (s *SMI) SetComputeTimeSlice(ctx context.Context, uuid string, l gpu.TimeSliceLevel) error {
	n := slices.Index(levels, l)
	if n < 0 {
		return fmt.Errorf("GPU %s: unknown compute time-slice level %q (want default, short, medium or long)", uuid, l)
	}
	if err := checkID(uuid); err != nil {
		return err
	}
	set, err := s.run(ctx, uuid, "compute-policy", "-i", uuid, fmt.Sprintf("--set-timeslice=%d", n))
	if err != nil {
		return err
	}
	list, err := s.run(ctx, uuid, "compute-policy", "-i", uuid, "--list")
	if err != nil {
		// Not gpu.ErrNotSupported even where the listing is (exit 3): a
		// refusal says nothing was changed, and the set may have been.
		return fmt.Errorf("GPU %s: %s exited 0 setting the compute time slice to %s, but reading it back failed: %v", uuid, s.opts.Path, l, err)
	}
	switch got, ok := parseTimeSlice(list); {
	case ok && got != l:
		return fmt.Errorf("GPU %s: %s exited 0 setting the compute time slice to %s, but compute-policy --list reads %s; it printed: %s",
			uuid, s.opts.Path, l, got, printed(set))
	case !ok && failed(set):
		return fmt.Errorf("GPU %s: %s exited 0 setting the compute time slice to %s, but printed a failure (and its listing does not say the level): %s",
			uuid, s.opts.Path, l, printed(set))
	}
	level.Info(s.logger).Log("msg", "compute time-slice level set", "uuid", uuid, "level", l)
	return nil
}

// run runs nvidia-smi and maps its documented exit statuses to errors a
// caller can test (gpu.ErrNotSupported) or act on (permissions).
// On success it returns stdout and stderr together, as printed.
func (s *SMI) run(ctx context.Context, uuid string, args ...string) ([]byte, error) {
	res, err := command.Run(ctx, command.Spec{Path: s.opts.Path, Args: args, Timeout: s.opts.Timeout, TimeoutName: s.opts.TimeoutName})
	if err == nil {
		return append(res.Stdout, res.Stderr...), nil
	}
	var e *command.Error
	if errors.As(err, &e) {
		switch e.ExitCode {
		case exitNotSupported:
			return nil, fmt.Errorf("GPU %s: %w: %w", uuid, gpu.ErrNotSupported, err)
		case exitNoPermission:
			return nil, fmt.Errorf("GPU %s: changing the compute policy needs root: %w", uuid, err)
		case exitNotFound:
			return nil, fmt.Errorf("GPU %s not found by nvidia-smi: %w", uuid, err)
		case exitNoDriver:
			return nil, fmt.Errorf("GPU %s: the NVIDIA driver is not loaded: %w", uuid, err)
		}
	}
	return nil, fmt.Errorf("GPU %s: %w", uuid, err)
}

// checkID refuses a GPU id nvidia-smi could take for an option.
func checkID(uuid string) error {
	if uuid == "" || strings.HasPrefix(uuid, "-") || strings.ContainsAny(uuid, " \t\n,") {
		return fmt.Errorf("invalid GPU id %q for nvidia-smi -i", uuid)
	}
	return nil
}

// failureWords are what nvidia-smi prints when it failed, whatever its
// exit status.
var failureWords = []string{"fail", "error", "unable", "not supported", "insufficient", "invalid", "not found", "unknown"}

// failed reports whether nvidia-smi's output says it failed.
func failed(out []byte) bool {
	low := strings.ToLower(string(out))
	return slices.ContainsFunc(failureWords, func(w string) bool { return strings.Contains(low, w) })
}

// printed is nvidia-smi's output fit for an error message.
func printed(out []byte) string {
	if len(strings.TrimSpace(string(out))) == 0 {
		return "(nothing)"
	}
	return command.Excerpt(out, 512)
}

// parseTimeSlice finds the time-slice level in compute-policy's listing,
// strictly: on each line that names the time slice ("Timeslice", "Time
// Slice"), exactly one level word (default, short, medium, long) after
// that name. It reports false when no line does, when a line names none or
// several, when lines disagree, or when the output reports a failure (an
// error message that mentions a level is not a reading).
func parseTimeSlice(out []byte) (gpu.TimeSliceLevel, bool) {
	if failed(out) {
		return "", false
	}
	var found gpu.TimeSliceLevel
	for line := range strings.SplitSeq(strings.ToLower(string(out)), "\n") {
		words := strings.FieldsFunc(line, func(r rune) bool { return !(r >= 'a' && r <= 'z') })
		at := -1
		for i, w := range words {
			if w == "timeslice" || (w == "slice" && i > 0 && words[i-1] == "time") {
				at = i
				break
			}
		}
		if at < 0 {
			if strings.Contains(strings.ReplaceAll(line, " ", ""), "timeslice") {
				return "", false // the name inside another word: not a field
			}
			continue
		}
		var l gpu.TimeSliceLevel
		for _, w := range words[at+1:] {
			if slices.Contains(levels, gpu.TimeSliceLevel(w)) {
				if l != "" {
					return "", false
				}
				l = gpu.TimeSliceLevel(w)
			}
		}
		if l == "" || (found != "" && found != l) {
			return "", false
		}
		found = l
	}
	return found, found != ""
}
