// Package rebalance hands rebalancing plans (tenant moves across GPUs, MIG
// layout changes) to a hook command: the plan as JSON on the hook's stdin,
// the hook's exit status and stderr in the error. The hook is where a site
// says how a workload moves: deploy/hooks/kubernetes-evict.sh evicts pods
// through the Eviction API (so PodDisruptionBudgets hold) and lets the
// scheduler place them again; deploy/hooks/systemd-move.sh restarts a
// systemd unit on another GPU.
//
// Hook implements gpu.Rebalancer and gpu.PlacementActuator. Recommend
// returns the JSON a hook would get without running anything. Modelled
// (modelled.go) is a hook whose applied moves the simulator then makes.
package rebalance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command"
	"github.com/vgpu-exporter/vgpu_exporter/internal/poduid"
)

// DefaultTimeout bounds one run of the hook. It is sized for a hook
// program's slowest steps (systemd-move.sh's restart of a unit waits for
// the unit to stop and start again); an eviction returns as soon as the
// API server accepts or refuses it, the pod then terminating on its own,
// so a plan of evictions ends well within it.
const DefaultTimeout = 5 * time.Minute

// Options configure a Hook.
type Options struct {
	Command string        // the hook program: a path or a name on PATH
	Timeout time.Duration // one run; default DefaultTimeout
	// TimeoutName is what sets Timeout (the command line's flag), named in
	// the error of a run it kills; "" names none.
	TimeoutName string
	Logger      log.Logger
}

// Hook runs the rebalancing hook. It is safe for concurrent use; each plan
// is one run of the hook.
type Hook struct {
	opts   Options
	logger log.Logger
}

var (
	_ gpu.Rebalancer        = (*Hook)(nil)
	_ gpu.PlacementActuator = (*Hook)(nil)
	_ gpu.CapabilityLister  = (*Hook)(nil)
)

// New returns a Hook for opts.Command, which must exist.
func New(opts Options) (*Hook, error) {
	if opts.Command == "" {
		return nil, errors.New("no rebalancing hook command given")
	}
	if _, err := exec.LookPath(opts.Command); err != nil {
		return nil, fmt.Errorf("rebalancing hook %q: %w", opts.Command, err)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	h := &Hook{opts: opts, logger: opts.Logger}
	if h.logger == nil {
		h.logger = log.NewNopLogger()
	}
	return h, nil
}

// RunsHooks implements gpu.Hooked: every plan and move runs the hook.
func (h *Hook) RunsHooks() bool { return true }

// Capabilities lists the placement and MIG layout knobs on every GPU: the
// hook is handed every plan, its moves and its MIG layouts, to apply or
// refuse.
func (h *Hook) Capabilities(string) []gpu.Knob {
	return []gpu.Knob{gpu.KnobPlacement, gpu.KnobMIGLayout}
}

// The exit statuses of a hook that say more than a failure: ExitRefused,
// nothing changed, every move refused (a PodDisruptionBudget's refusal, a
// pod an eviction would not move); ExitPartial, some moves made and the
// others not, each move made named by a line "applied N" on stdout (N its
// place in the plan's moves, from 1).
const (
	ExitRefused = 3
	ExitPartial = 4
)

// Rebalance checks the plan and runs the hook with it on stdin. The hook
// applies it (or, with DryRun, only checks it) and exits 0; any other exit,
// or a run past the timeout, is an error carrying its stderr: for
// ExitRefused also gpu.ErrBusy (the plan refused), for ExitPartial a
// *gpu.PartialError naming the moves its stdout says were made.
func (h *Hook) Rebalance(ctx context.Context, p gpu.Plan) error {
	data, err := Recommend(p)
	if err != nil {
		return err
	}
	res, err := command.Run(ctx, command.Spec{Path: h.opts.Command, Stdin: data, Timeout: h.opts.Timeout, TimeoutName: h.opts.TimeoutName})
	if err != nil {
		err = fmt.Errorf("rebalancing hook (%d moves, %d MIG layouts, dry run %v): %w", len(p.Moves), len(p.MIG), p.DryRun, err)
		var run *command.Error
		if !errors.As(err, &run) || run.TimedOut {
			return err
		}
		switch run.ExitCode {
		case ExitRefused:
			return Refused(err)
		case ExitPartial:
			return &gpu.PartialError{Applied: applied(res.Stdout, len(p.Moves)), Err: err}
		}
		return err
	}
	kv := []any{"msg", "rebalancing hook applied the plan", "moves", len(p.Moves), "mig_layouts", len(p.MIG),
		"dry_run", p.DryRun, "reason", p.Reason}
	level.Info(h.logger).Log(append(kv, command.OutputKV(res, 512)...)...)
	return nil
}

// Refused returns err as the error of a plan refused whole, nothing
// changed (a hook's ExitRefused, every eviction refused): also
// gpu.ErrBusy, which the tuner counts refused, its message err's.
func Refused(err error) error { return refused{err} }

type refused struct{ error }

func (r refused) Unwrap() error      { return r.error }
func (refused) Is(target error) bool { return target == gpu.ErrBusy }

// applied returns the moves (indexes into a plan of n) that a hook's
// stdout names made, each once, in order: its lines "applied N", N from 1;
// other lines, and N out of the plan, are not read as moves. Where stdout
// filled what command.Run keeps of it, its last line without a newline
// was cut there ("applied 12" kept as "applied 1") and is not read.
func applied(stdout []byte, n int) []int {
	if len(stdout) >= command.DefaultMaxOutput && !bytes.HasSuffix(stdout, []byte("\n")) {
		stdout = stdout[:bytes.LastIndexByte(stdout, '\n')+1]
	}
	var out []int
	for line := range strings.Lines(string(stdout)) {
		num, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "applied ")
		i, err := strconv.Atoi(num)
		if !ok || err != nil || i < 1 || i > n || slices.Contains(out, i-1) {
			continue
		}
		out = append(out, i-1)
	}
	return out
}

// MoveProcess hands the hook a plan of one move: the workload with this
// PID to the GPU toUUID. Hooks that find workloads by pod or unit cannot
// act on a PID alone; Rebalance with a full Move is the richer call.
func (h *Hook) MoveProcess(ctx context.Context, pid uint32, toUUID string) error {
	return h.Rebalance(ctx, gpu.Plan{
		Reason: fmt.Sprintf("move PID %d to %s", pid, toUUID),
		Moves:  []gpu.Move{{PID: pid, ToUUID: toUUID}},
	})
}

// Recommend checks the plan and returns its JSON, as a hook would read it,
// without running anything: the recommend-only path.
func Recommend(p gpu.Plan) ([]byte, error) {
	if err := Validate(p); err != nil {
		return nil, err
	}
	data, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("rebalancing plan: %w", err)
	}
	return append(data, '\n'), nil
}

// Validate reports every problem of a plan, joined; each names the move or
// layout by its position.
func Validate(p gpu.Plan) error {
	var errs []error
	if len(p.Moves) == 0 && len(p.MIG) == 0 {
		errs = append(errs, errors.New("rebalancing plan has neither moves nor MIG layouts"))
	}
	for i, m := range p.Moves {
		where := fmt.Sprintf("rebalancing plan move %d (tenant %q)", i+1, m.Tenant)
		if m.Pod == nil && m.Unit == "" && m.PID == 0 {
			errs = append(errs, fmt.Errorf("%s names no workload: give a pod, a unit or a PID", where))
		}
		if m.Pod != nil && (!kubeName(m.Pod.Namespace) || !kubeName(m.Pod.Name)) {
			errs = append(errs, fmt.Errorf("%s: pod %q/%q is not a valid Kubernetes name", where, m.Pod.Namespace, m.Pod.Name))
		}
		if m.Pod != nil && m.Pod.UID != "" && !poduid.Valid(m.Pod.UID) {
			errs = append(errs, fmt.Errorf("%s: pod %s/%s's UID %q is not a Kubernetes UID", where, m.Pod.Namespace, m.Pod.Name, m.Pod.UID))
		}
		if m.Unit != "" && (strings.ContainsAny(m.Unit, "/ \t\n") || strings.HasPrefix(m.Unit, "-") || strings.HasPrefix(m.Unit, ".")) {
			errs = append(errs, fmt.Errorf("%s: %q is not a systemd unit name", where, m.Unit))
		}
		if m.ToUUID != "" && m.ToUUID == m.FromUUID {
			errs = append(errs, fmt.Errorf("%s moves from %s to itself", where, m.ToUUID))
		}
	}
	for i, l := range p.MIG {
		if l.UUID == "" || len(l.Profiles) == 0 {
			errs = append(errs, fmt.Errorf("rebalancing plan MIG layout %d: needs a GPU UUID and at least one profile", i+1))
		}
	}
	return errors.Join(errs...)
}

// kubeName reports whether s is a DNS subdomain name (RFC 1123): what
// namespaces and pod names are.
func kubeName(s string) bool {
	if s == "" || len(s) > 253 || s[0] == '-' || s[0] == '.' || s[len(s)-1] == '-' || s[len(s)-1] == '.' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}
