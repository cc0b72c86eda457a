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

// Running is the original a relayout journals for each process before it
// stops it: a restore (at exit, or at start after a crash) starts the
// process again, so that no process the tuner stopped stays stopped.
type Running struct{}

// Kind returns "process".
func (Running) Kind() string { return "process" }

func (Running) String() string { return "running" }

// Distance is 0 for Running, else 1.
func (Running) Distance(o Value) float64 {
	if _, ok := o.(Running); ok {
		return 0
	}
	return 1
}

// relayoutJob is a MIG relayout the tuner carries out itself, on a host
// without a rebalancing hook whose backends drain instances and restart
// processes (the simulator): every instance was drained; once they are
// empty the layout is set and the processes are started again. A start
// that fails is tried again (relayoutStartTries in all, the waits doubling
// from relayoutStartWait) until every process runs.
type relayoutJob struct {
	a     Action
	uuid  string
	want  []string
	pids  []uint32
	since time.Time
	// looked is when the layout was last tried while the instances
	// drain: one look an instant, however many calls carry the job on
	// then (a host's Progress, then its round, at the same time).
	looked time.Time
	// tenants are the processes' tenants, by PID, where known.
	tenants map[uint32]string
	// set: the layout step is over (set, failed or given up); stopped
	// are the processes not started yet, tries the starts tried, next
	// when the next try is due.
	set     bool
	stopped []uint32
	tries   int
	next    time.Time
	err     error // the last try's
}

// relayoutTimeout: a drain not done by then is given up, and the
// processes are started again in the old layout.
const relayoutTimeout = 3 * time.Minute

// The starts of a relayout's processes: tried this many times in all, the
// first retry after relayoutStartWait, each wait doubled.
const (
	relayoutStartTries = 5
	relayoutStartWait  = 2 * time.Second
)

// startRelayout journals every process of the plan's GPU as running,
// drains every MIG instance and leaves the rest to progressRelayout; when
// a drain fails, the processes are started again at once (and retried as
// progressRelayout does).
func (t *Tuner) startRelayout(ctx context.Context, st *State, a Action, l gpu.MIGLayoutPlan, now time.Time) error {
	if _, ok := t.relayouts[l.UUID]; ok {
		// the one under way keeps its drain, its timeout and its decision
		return fmt.Errorf("a relayout of this GPU is under way: %w", gpu.ErrBusy)
	}
	job := &relayoutJob{a: a, uuid: l.UUID, want: l.Profiles, since: now, tenants: map[uint32]string{}}
	for _, u := range st.Snapshot.Usage {
		for _, pid := range u.PIDs {
			job.tenants[pid] = u.Tenant
		}
	}
	var devs []gpu.Device
	for _, d := range st.Snapshot.Readings.Devices {
		if d.UUID != l.UUID {
			continue
		}
		devs = append(devs, d)
		for _, p := range d.Processes {
			job.pids = append(job.pids, p.PID)
		}
	}
	if err := t.keepRunning(job, now); err != nil {
		return err
	}
	var errs []error
	for _, d := range devs {
		errs = append(errs, t.drainAll(ctx, d))
	}
	if t.relayouts == nil {
		t.relayouts = map[string]*relayoutJob{}
	}
	t.relayouts[l.UUID] = job
	if err := errors.Join(errs...); err != nil {
		job.set, job.stopped = true, job.pids
		if serr := t.startStopped(ctx, job, now); serr != nil {
			// a failure, not a refusal, even when the drain was refused:
			// tenants are left stopped until a retry starts them
			return fmt.Errorf("%v; starting the processes again: %w%s", err, serr, job.retrying())
		}
		delete(t.relayouts, l.UUID)
		return err
	}
	return nil
}

// keepRunning journals each process of the GPU uuid as running before a
// relayout stops it; a relayout whose processes could not be journaled
// is not started.
func (t *Tuner) keepRunning(job *relayoutJob, now time.Time) error {
	for _, pid := range job.pids {
		tg := Target{GPU: job.uuid, Knob: gpu.KnobProcessLifecycle, PID: pid}
		if _, ok := t.originals[tg.String()]; ok {
			continue
		}
		if err := t.closeLeftOpen(tg.String(), now); err != nil {
			return fmt.Errorf("not drained, PID %d's earlier original could not be closed in the journal: %w", pid, err)
		}
		rec := Record{Time: now, Event: EventOriginal, Target: tg, Tenant: job.tenants[pid], From: encodeValue(Running{})}
		if err := t.journal(rec); err != nil {
			return fmt.Errorf("not drained, PID %d could not be journaled as running: %w", pid, err)
		}
		t.originals[tg.String()] = Original{Target: tg, Tenant: rec.Tenant, Value: Running{}, At: now}
	}
	return nil
}

// startStopped tries once to start the job's processes still stopped; a
// process started is journaled as restored. It returns what failed; the
// next try is then due after the job's back-off.
func (t *Tuner) startStopped(ctx context.Context, job *relayoutJob, now time.Time) error {
	var errs []error
	var left []uint32
	for _, pid := range job.stopped {
		tg := Target{GPU: job.uuid, Knob: gpu.KnobProcessLifecycle, PID: pid}
		if err := t.startProcess(ctx, pid); err != nil {
			errs = append(errs, fmt.Errorf("start PID %d: %w", pid, err))
			left = append(left, pid)
			continue
		}
		if _, ok := t.originals[tg.String()]; ok {
			t.journal(Record{Time: now, Event: EventRestored, Target: tg, Tenant: job.tenants[pid], From: encodeValue(Running{}), Reason: "started again after a MIG relayout"})
			t.dropOriginal(tg.String())
		}
	}
	job.stopped = left
	job.tries++
	job.next = now.Add(job.backoff())
	job.err = errors.Join(errs...)
	return job.err
}

// backoff is the wait before the job's next start: relayoutStartWait,
// doubled for each try after the first.
func (j *relayoutJob) backoff() time.Duration { return relayoutStartWait << (j.tries - 1) }

// retrying says when the job's next start is due, or "" after its last.
func (j *relayoutJob) retrying() string {
	if len(j.stopped) == 0 || j.tries >= relayoutStartTries {
		return ""
	}
	return fmt.Sprintf("; retrying in %v (try %d of %d)", j.backoff(), j.tries+1, relayoutStartTries)
}

// relayoutStarted is the decision of a drain under way; the layout's own
// decision (journaled and counted) comes when it is set (progressRelayout).
func (t *Tuner) relayoutStarted(ctx context.Context, a Action, now time.Time) []Decision {
	dd := Decision{Time: now, GPU: a.GPU, Knob: gpu.KnobMIGDrain, To: "every instance", Outcome: OutcomeApplied, Applied: true,
		Reason: joinReasons(a.Reason, "draining every instance first (MIG changes only on an empty GPU)")}
	t.journal(Record{Time: now, Event: string(OutcomeApplied), Target: Target{GPU: a.GPU, Knob: gpu.KnobMIGDrain}, Reason: dd.Reason})
	level.Info(t.o.Logger).Log("msg", "tuner decision", "outcome", dd.Outcome, "gpu", a.GPU, "knob", dd.Knob, "to", dd.To, "reason", dd.Reason)
	return append([]Decision{dd}, t.progressRelayout(ctx, t.relayouts[a.Plan.MIG[0].UUID], now)...)
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
// layout step ends (done, failed or given up), and a decision of the
// processes' start when it took retries. With the kill switch engaged the
// layout is not set: the processes start again in the old layout.
func (t *Tuner) progressRelayout(ctx context.Context, job *relayoutJob, now time.Time) []Decision {
	if job.set {
		return t.retryStarts(ctx, job, now)
	}
	if t.chain().Stopped() {
		return t.giveUpRelayout(ctx, job, now)
	}
	if job.looked.Equal(now) {
		return nil
	}
	job.looked = now
	err := t.setLayout(ctx, job.uuid, job.want)
	if errors.Is(err, gpu.ErrBusy) && now.Sub(job.since) < relayoutTimeout {
		return nil // still draining
	}
	job.set, job.stopped = true, job.pids
	serr := t.startStopped(ctx, job, now)
	if len(job.stopped) == 0 {
		delete(t.relayouts, job.uuid)
	}
	a := job.a
	d := Decision{Time: now, GPU: a.GPU, Knob: a.Knob, From: valueText(a.Current), To: a.Want.String(), Reason: a.Reason}
	if err != nil {
		err = errors.Join(err, serr)
		d.Outcome = outcomeOf(err)
		d.Reason = joinReasons(a.Reason, fmt.Sprintf("%s after %v of draining: %v; the processes were started again in the old layout%s", d.Outcome, now.Sub(job.since).Round(time.Second), err, job.retrying()))
		return []Decision{t.finish(a, d, now, err)}
	}
	d.Outcome, d.Applied = OutcomeApplied, true
	if serr != nil {
		d.Reason = joinReasons(a.Reason, "layout set; "+serr.Error()+job.retrying())
	} else {
		d.Reason = joinReasons(a.Reason, fmt.Sprintf("layout set after %v of draining, processes started again", now.Sub(job.since).Round(time.Second)))
	}
	t.noteApplied(nil, a, now)
	return []Decision{t.finish(a, d, now, nil)}
}

// giveUpRelayout ends a relayout under way, its layout not set, as the
// kill switch asks: its processes start again in the old layout.
func (t *Tuner) giveUpRelayout(ctx context.Context, job *relayoutJob, now time.Time) []Decision {
	job.set, job.stopped = true, job.pids
	serr := t.startStopped(ctx, job, now)
	if len(job.stopped) == 0 {
		delete(t.relayouts, job.uuid)
	}
	a := job.a
	d := Decision{Time: now, GPU: a.GPU, Knob: a.Knob, From: valueText(a.Current), To: a.Want.String(), Outcome: OutcomeGuarded, Guard: GuardKillSwitch,
		Reason: joinReasons(a.Reason, fmt.Sprintf("given up after %v of draining: kill switch engaged; the processes were started again in the old layout", now.Sub(job.since).Round(time.Second)))}
	if serr != nil {
		d.Reason = joinReasons(d.Reason, serr.Error()+job.retrying())
	}
	t.counts.Refusals[GuardKillSwitch]++
	return []Decision{t.finish(a, d, now, nil)}
}

// retryStarts tries again, once due, to start the processes a relayout
// left stopped. When they all run, or after the last try, the job ends
// with a decision of the process lifecycle: applied, or failed (logged at
// error level; the processes stay journaled as running, for the restore
// at exit and the next start).
func (t *Tuner) retryStarts(ctx context.Context, job *relayoutJob, now time.Time) []Decision {
	if now.Before(job.next) {
		return nil
	}
	pids, err := job.stopped, job.err
	if job.tries < relayoutStartTries {
		if err = t.startStopped(ctx, job, now); err != nil && job.tries < relayoutStartTries {
			return nil
		}
	}
	delete(t.relayouts, job.uuid)
	var out []Decision
	for _, pid := range pids {
		a := Action{Target: Target{GPU: job.uuid, Knob: gpu.KnobProcessLifecycle, PID: pid}, Tenant: job.tenants[pid], Want: Running{},
			Reason: "started again after the MIG relayout to " + job.a.Want.String()}
		d := Decision{Time: now, GPU: job.uuid, Tenant: a.Tenant, Knob: a.Knob, From: "stopped", To: Running{}.String(), Outcome: OutcomeApplied, Applied: true,
			Reason: joinReasons(a.Reason, fmt.Sprintf("PID %d started on try %d of %d", pid, job.tries, relayoutStartTries))}
		var perr error
		if slices.Contains(job.stopped, pid) {
			perr = err
			d.Outcome, d.Applied = OutcomeFailed, false
			d.Reason = joinReasons(a.Reason, fmt.Sprintf("PID %d not started after %d tries: %v", pid, job.tries, err))
			level.Error(t.o.Logger).Log("msg", "tuner could not start a process again after a MIG relayout; it stays stopped until a restore starts it",
				"gpu", job.uuid, "tenant", a.Tenant, "pid", pid, "tries", job.tries, "err", err)
		}
		out = append(out, t.finish(a, d, now, perr))
	}
	return out
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

// drainAll drains every MIG instance of d, for a relayout.
func (t *Tuner) drainAll(ctx context.Context, d gpu.Device) error {
	dr, ok := actuator[gpu.MIGDrainActuator](t.o.Actuators)
	if !ok {
		return notSupported(gpu.KnobMIGDrain)
	}
	var errs []error
	for _, m := range d.MIG {
		end := t.calling("drain MIG instance " + m.UUID + " of GPU " + d.UUID)
		err := dr.DrainMIGInstance(ctx, d.UUID, m.UUID)
		end()
		if err != nil {
			errs = append(errs, fmt.Errorf("drain %s: %w", m.UUID, err))
		}
	}
	return errors.Join(errs...)
}

// startProcess starts a process a relayout stopped.
func (t *Tuner) startProcess(ctx context.Context, pid uint32) error {
	defer t.calling(fmt.Sprintf("start process %d", pid))()
	return startProcess(ctx, t.o.Actuators, pid)
}

func startProcess(ctx context.Context, ac Actuators, pid uint32) error {
	lc, ok := actuator[gpu.TenantLifecycleActuator](ac)
	if !ok {
		return notSupported(gpu.KnobProcessLifecycle)
	}
	return lc.StartProcess(ctx, pid)
}

// setLayout sets a GPU's MIG layout.
func (t *Tuner) setLayout(ctx context.Context, uuid string, profiles []string) error {
	defer t.calling("set the MIG layout of GPU " + uuid)()
	return setLayout(ctx, t.o.Actuators, uuid, profiles)
}

func setLayout(ctx context.Context, ac Actuators, uuid string, profiles []string) error {
	mig, ok := actuator[gpu.MIGActuator](ac)
	if !ok {
		return notSupported(gpu.KnobMIGLayout)
	}
	return mig.ConfigureMIG(ctx, uuid, profiles)
}
