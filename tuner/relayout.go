package tuner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Layout is a MIG layout: the instances' profiles in the order of the
// GPU's instances, comma-separated.
type Layout string

// LayoutOf returns the layout of these profiles.
func LayoutOf(profiles []string) Layout { return Layout(strings.Join(profiles, ",")) }

// Profiles returns the layout's profiles.
func (l Layout) Profiles() []string {
	if l == "" {
		return nil
	}
	return strings.Split(string(l), ",")
}

// Kind returns "mig_layout".
func (Layout) Kind() string { return "mig_layout" }

func (l Layout) String() string { return "[" + strings.ReplaceAll(string(l), ",", ", ") + "]" }

// Distance is 0 for the same layout, else 1.
func (l Layout) Distance(o Value) float64 {
	if m, ok := o.(Layout); ok && m == l {
		return 0
	}
	return 1
}

// relayoutJob is a MIG relayout the tuner carries out itself, on a host
// without a rebalancing hook whose backends drain instances and restart
// processes (the simulator): every instance was drained; once they are
// empty the layout is set and the processes are started again.
type relayoutJob struct {
	a     Action
	uuid  string
	want  []string
	pids  []uint32
	since time.Time
}

// relayoutTimeout: a drain not done by then is given up, and the
// processes are started again in the old layout.
const relayoutTimeout = 3 * time.Minute

// startRelayout drains every MIG instance of the plan's GPU and leaves
// the rest to progressRelayout; when a drain fails, the processes are
// started again at once.
func (t *Tuner) startRelayout(ctx context.Context, st *State, a Action, l gpu.MIGLayoutPlan, now time.Time) error {
	job := &relayoutJob{a: a, uuid: l.UUID, want: l.Profiles, since: now}
	var errs []error
	for _, d := range st.Snapshot.Readings.Devices {
		if d.UUID != l.UUID {
			continue
		}
		for _, p := range d.Processes {
			job.pids = append(job.pids, p.PID)
		}
		errs = append(errs, t.drainAll(ctx, d))
	}
	if err := errors.Join(errs...); err != nil {
		if serr := t.startAll(ctx, job.pids); serr != nil {
			// a failure, not a refusal, even when the drain was refused:
			// tenants may be left stopped
			return fmt.Errorf("%v; starting the processes again: %w", err, serr)
		}
		return err
	}
	if t.relayouts == nil {
		t.relayouts = map[string]*relayoutJob{}
	}
	t.relayouts[l.UUID] = job
	return nil
}

// relayoutStarted is the decision of a drain under way; the layout's own
// decision (journaled and counted) comes when it is set (progressRelayout).
func (t *Tuner) relayoutStarted(ctx context.Context, a Action, now time.Time) []Decision {
	dd := Decision{Time: now, GPU: a.GPU, Knob: gpu.KnobMIGDrain, To: "every instance", Outcome: OutcomeApplied, Applied: true,
		Reason: joinReasons(a.Reason, "draining every instance first (MIG changes only on an empty GPU)")}
	t.journal(Record{Time: now, Event: string(OutcomeApplied), Target: Target{GPU: a.GPU, Knob: gpu.KnobMIGDrain}, Reason: dd.Reason})
	level.Info(t.o.Logger).Log("msg", "tuner decision", "outcome", dd.Outcome, "gpu", a.GPU, "knob", dd.Knob, "to", dd.To, "reason", dd.Reason)
	return append([]Decision{dd}, t.progressRelayouts(ctx, now)...)
}

// progressRelayouts carries on every relayout under way, GPU by GPU in
// UUID order.
func (t *Tuner) progressRelayouts(ctx context.Context, now time.Time) []Decision {
	var out []Decision
	for _, uuid := range slices.Sorted(maps.Keys(t.relayouts)) {
		out = append(out, t.progressRelayout(ctx, t.relayouts[uuid], now)...)
	}
	return out
}

// progressRelayout sets the waiting layout once the drained instances are
// empty and starts the processes again; it returns the decision when the
// job ends (done, failed or given up).
func (t *Tuner) progressRelayout(ctx context.Context, job *relayoutJob, now time.Time) []Decision {
	err := t.setLayout(ctx, job.uuid, job.want)
	if errors.Is(err, gpu.ErrBusy) && now.Sub(job.since) < relayoutTimeout {
		return nil // still draining
	}
	delete(t.relayouts, job.uuid)
	a := job.a
	d := Decision{Time: now, GPU: a.GPU, Knob: a.Knob, From: valueText(a.Current), To: a.Want.String(), Reason: a.Reason}
	if err != nil {
		err = errors.Join(err, t.startAll(ctx, job.pids))
		d.Outcome = outcomeOf(err)
		d.Reason = joinReasons(a.Reason, fmt.Sprintf("%s after %v of draining: %v; the processes were started again in the old layout", d.Outcome, now.Sub(job.since).Round(time.Second), err))
		return []Decision{t.finish(a, d, now, err)}
	}
	d.Outcome, d.Applied = OutcomeApplied, true
	if err := t.startAll(ctx, job.pids); err != nil {
		d.Reason = joinReasons(a.Reason, "layout set; "+err.Error())
	} else {
		d.Reason = joinReasons(a.Reason, fmt.Sprintf("layout set after %v of draining, processes started again", now.Sub(job.since).Round(time.Second)))
	}
	t.noteApplied(nil, a, now)
	return []Decision{t.finish(a, d, now, nil)}
}

// Progress carries on what the tuner started and has to finish between
// its rounds (a MIG relayout waiting for its instances to drain); a host
// may call it more often than RunOnce so that the instances restart
// sooner. It returns the decisions that ended.
func (t *Tuner) Progress(ctx context.Context) []Decision {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.relayouts) == 0 {
		return nil
	}
	now := t.o.Clock.Now()
	out := t.progressRelayouts(ctx, now)
	if len(out) > 0 {
		t.remember(out)
		t.publishLocked(now)
	}
	return out
}

// Underway reports whether a MIG relayout the tuner carries out itself
// waits for its instances to drain (Progress finishes it).
func (t *Tuner) Underway() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.relayouts) > 0
}
