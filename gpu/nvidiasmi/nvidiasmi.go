// Package nvidiasmi sets the compute time-slice level of a GPU through
// `nvidia-smi compute-policy --set-timeslice` (NVML has no call for it).
// The level applies to the whole GPU, needs root, and is lost on reboot or
// driver reload.
//
// Every set is verified: nvidia-smi may exit 0 having failed, so the level
// is read back from `nvidia-smi compute-policy --list` (parsed strictly,
// listing.go) and a different one is an error naming the program, the GPU
// and what it printed. Only the level listed for the GPU set counts: a
// listing of other GPUs only, or of levels that cannot be told apart by
// GPU, is an error too. Where the listing does not say the level, a set
// whose output reports no failure is accepted. The listing and the answer
// which GPU was set are read from stdout alone: stderr (warnings) is shown
// in errors, never read as a listing.
//
// SMI implements gpu.TimeSliceActuator and gpu.CapabilityLister.
package nvidiasmi

import (
	"bytes"
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
	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
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
	listArgs := []string{"compute-policy", "-i", uuid, "--list"}
	list, err := s.run(ctx, uuid, listArgs...)
	if err != nil {
		// Not gpu.ErrNotSupported even where the listing is (exit 3): a
		// refusal says nothing was changed, and the set may have been.
		return fmt.Errorf("GPU %s: %s exited 0 setting the compute time slice to %s, but reading it back failed: %v", uuid, s.opts.Path, l, err)
	}
	entries, ok := parseListing(list.Stdout)
	if !ok {
		if failed(set.Stdout) || failed(set.Stderr) {
			return fmt.Errorf("GPU %s: %s exited 0 setting the compute time slice to %s, but printed a failure (and its listing does not say the level): %s",
				uuid, s.opts.Path, l, printed(set))
		}
		level.Info(s.logger).Log("msg", "compute time-slice level set; the listing does not say it", "uuid", uuid, "level", l)
		return nil
	}
	got, err := s.levelOf(ctx, uuid, entries)
	if err != nil {
		return fmt.Errorf("GPU %s: %s exited 0 setting the compute time slice to %s, but its read-back (%s) %v; it printed: %s",
			uuid, s.opts.Path, l, command.Describe(s.opts.Path, listArgs), err, printed(list))
	}
	if got != l {
		return fmt.Errorf("GPU %s: %s exited 0 setting the compute time slice to %s, but its read-back (%s) reads %s; the set printed: %s; it printed: %s",
			uuid, s.opts.Path, l, command.Describe(s.opts.Path, listArgs), got, printed(set), printed(list))
	}
	level.Info(s.logger).Log("msg", "compute time-slice level set", "uuid", uuid, "level", l)
	return nil
}

// levelOf returns the level the listing's entries give the GPU uuid.
// Where they name no GPU (the listing of -i UUID alone), they must agree.
// Where they name GPUs (nvidia-smi may list every GPU, or -i another), the
// entries of uuid count, and must agree: named by UUID, or by bus ID or
// index, which nvidia-smi is asked for (identityArgs); a line that names
// its GPU several ways is uuid's where every name is. A listing that
// gives uuid no level, gives levels both for GPUs it names and for none,
// or names uuid and another GPU on one line is an error saying what it
// lists.
func (s *SMI) levelOf(ctx context.Context, uuid string, entries []entry) (gpu.TimeSliceLevel, error) {
	var id *identity
	var mine []gpu.TimeSliceLevel
	others := map[string]bool{} // the other GPUs listed
	var shown []string          // the first maxOthers of them, for the error
	unnamed := 0
	for _, e := range entries {
		if len(e.gpu) == 0 {
			unnamed++
			mine = append(mine, e.level)
			continue
		}
		if id == nil && slices.ContainsFunc(e.gpu, func(r gpuRef) bool { return r.kind != refUUID }) {
			out, err := s.run(ctx, uuid, identityArgs(uuid)...)
			if err != nil {
				return "", fmt.Errorf("names GPUs by bus ID or index, and asking which is %s failed: %v", uuid, err)
			}
			got, err := parseIdentity(out.Stdout, uuid)
			if err != nil {
				return "", fmt.Errorf("names GPUs by bus ID or index, and asking which is %s (%s) failed: %v; it answered: %s",
					uuid, command.Describe(s.opts.Path, identityArgs(uuid)), err, printed(out))
			}
			id = &got
		}
		n := 0 // the line's names of uuid
		for _, r := range e.gpu {
			if r.kind == refUUID && r.id == strings.ToLower(uuid) || r.kind != refUUID && id.is(r) {
				n++
			}
		}
		switch g := e.gpu.String(); {
		case n == len(e.gpu):
			mine = append(mine, e.level)
		case n > 0:
			return "", fmt.Errorf("names %s on one line, GPU %s and another: which one its level is for cannot be told", clip.Text(g, maxOtherName), uuid)
		case !others[g]:
			others[g] = true
			if len(shown) < maxOthers {
				shown = append(shown, clip.Text(g, maxOtherName))
			}
		}
	}
	switch {
	case unnamed > 0 && unnamed < len(entries):
		return "", fmt.Errorf("gives levels both for GPUs it names and for none named: which is %s's cannot be told", uuid)
	case len(mine) == 0:
		list := strings.Join(shown, ", ")
		if n := len(others) - len(shown); n > 0 {
			list += fmt.Sprintf(" and %d more", n)
		}
		return "", fmt.Errorf("lists %s, not GPU %s", list, uuid)
	}
	for _, m := range mine[1:] {
		if m != mine[0] {
			if unnamed > 0 {
				return "", fmt.Errorf("gives different levels (%s, %s) without naming the GPUs: which is %s's cannot be told", mine[0], m, uuid)
			}
			return "", fmt.Errorf("gives GPU %s different levels (%s, %s)", uuid, mine[0], m)
		}
	}
	return mine[0], nil
}

// maxOthers is how many of the other GPUs a listing gives levels for the
// error names, each cut to maxOtherName bytes; the rest are counted.
const (
	maxOthers    = 8
	maxOtherName = 64
)

// run runs nvidia-smi and maps its documented exit statuses to errors a
// caller can test (gpu.ErrNotSupported) or act on (permissions).
// On success it returns stdout and stderr apart: only stdout is a listing
// or an answer (nvidia-smi prints warnings on stderr).
func (s *SMI) run(ctx context.Context, uuid string, args ...string) (command.Result, error) {
	res, err := command.Run(ctx, command.Spec{Path: s.opts.Path, Args: args, Timeout: s.opts.Timeout, TimeoutName: s.opts.TimeoutName})
	if err == nil {
		return res, nil
	}
	var e *command.Error
	if errors.As(err, &e) {
		switch e.ExitCode {
		case exitNotSupported:
			return command.Result{}, fmt.Errorf("GPU %s: %w: %w", uuid, gpu.ErrNotSupported, err)
		case exitNoPermission:
			return command.Result{}, fmt.Errorf("GPU %s: changing the compute policy needs root: %w", uuid, err)
		case exitNotFound:
			return command.Result{}, fmt.Errorf("GPU %s not found by nvidia-smi: %w", uuid, err)
		case exitNoDriver:
			return command.Result{}, fmt.Errorf("GPU %s: the NVIDIA driver is not loaded: %w", uuid, err)
		}
	}
	return command.Result{}, fmt.Errorf("GPU %s: %w", uuid, err)
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

// printed is nvidia-smi's output fit for an error message: stdout, then
// stderr (named), each shortened.
func printed(res command.Result) string {
	out, errOut := len(bytes.TrimSpace(res.Stdout)) > 0, len(bytes.TrimSpace(res.Stderr)) > 0
	switch {
	case out && errOut:
		return command.Excerpt(res.Stdout, 512) + "; on stderr: " + command.Excerpt(res.Stderr, 512)
	case out:
		return command.Excerpt(res.Stdout, 512)
	case errOut:
		return "on stderr: " + command.Excerpt(res.Stderr, 512)
	}
	return "(nothing)"
}
