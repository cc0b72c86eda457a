package tuner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// Recover restores, once, the originals an earlier run left open in the
// journal (it exited before restoring them), on snap's GPUs (snap may be
// nil). An MPS original whose PID snap does not list, or whose GPU it does
// not read (or with snap nil), is left to the rounds where it names its
// client (restorehook.go); one that names none is then closed as gone,
// or, its GPU unread, left open. The exporter calls it at start,
// before the first round; RunOnce calls it when nobody did. Only a GPU in
// enforce mode is acted on, whatever the other GPUs' modes, but for a
// pause, thawed in any mode; a failed restore stays open, for the restore
// at exit and the next start, and is counted and logged. Its decisions are
// kept for the status, as a round's are.
func (t *Tuner) Recover(ctx context.Context, snap *tenant.Snapshot) ([]Decision, error) {
	defer t.watchRound()() // (a call that hangs in it is logged as a round's is)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.o.Clock.Now()
	if snap != nil {
		t.last = snap
		t.noteRecent(snap, now)
		t.noteConflictingModes(snap) // (before the restores it decides)
	}
	// published before the restore: an actuator call that hangs in it,
	// past its deadline, leaves the last run at this start, aging, so that
	// a stalled start shows (VGPUTunerRoundsStalled) as a stalled round does
	t.publishLocked(now)
	d, err := t.recoverLocked(ctx, now)
	t.remember(d)
	t.publishLocked(now)
	return d, err
}

func (t *Tuner) recoverLocked(ctx context.Context, now time.Time) ([]Decision, error) {
	if t.recovered {
		return nil, nil
	}
	t.recovered = true
	return t.restoreLocked(ctx, now, whyRecovered, nil)
}

// whyRecovered is the reason of the restores at start. What an earlier run
// left open in the journal is not always a crash's: its exit keeps open
// what it could not set back and what it left on a GPU out of enforce.
const whyRecovered = "restored at start (left open in the journal by an earlier run: an unclean exit, a failed restore, or its GPU not in enforce mode at exit)"

// Restore sets back every original the tuner (or an earlier run, per the
// journal) changed, on the latest snapshot's GPUs in enforce mode (on the
// others, the pauses alone: a paused tenant is thawed in any mode). It is
// called on exit; a failed restore is returned (and journaled, logged and
// counted). A busy actuator (gpu.ErrBusy: a client restart still in
// progress) is retried until ctx's deadline. The hooks still running are
// cancelled and settled first, but the restores and reverts that set back
// what it would: it waits for those, with what is left of ctx's deadline,
// once every original none of them holds is set back (exitrestore.go).
func (t *Tuner) Restore(ctx context.Context) ([]Decision, error) {
	return t.restoreAtExit(ctx, ctx)
}

// restoreAtExit is Restore with the hooks still running waited for (and,
// while one the exit waits for runs, the originals none of them holds set
// back) until hooks is done, and the rest until ctx is done: the runner
// ends hooks before ctx (hooksShare), so that the originals the hooks held
// get a try of their own rather than a failure journaled at once, and
// with no hook waited for the restore has the whole of ctx.
func (t *Tuner) restoreAtExit(hooks, ctx context.Context) ([]Decision, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// a journal put at the path since the last round (or its write): its
	// originals adopted now, set back with this run's
	t.relinkJournal()
	t.exiting = true // (adopted from here on: kept for the next start)
	now := t.o.Clock.Now()
	const why = whyAtExit
	d := t.cancelHooks(hooks, now)
	held := t.heldAtExit()
	first, stop := t.whileAwaited(hooks, ctx)
	r, err := t.restoreLocked(first, now, why, func(k string) bool { return !held[k] })
	stop()
	d = append(d, r...)
	w, werr := t.awaitHooks(hooks)
	d = append(d, w...)
	if len(held) > 0 {
		// what those hooks held and did not set back (a hook that failed, an
		// original of their tenant's on another GPU)
		now = t.o.Clock.Now()
		r, rerr := t.restoreLocked(ctx, now, why, func(k string) bool { return held[k] })
		d = append(d, r...)
		err = errors.Join(err, rerr)
	}
	err = errors.Join(werr, err, t.keptAtExit())
	t.countPendingAtExit()
	t.writeUnwrittenAtExit()
	// the path checked again: one removed or replaced since the restore's
	// last write is written again (no round follows the exit), what it
	// kept left for the next start
	t.relinkJournal()
	t.remember(d)
	t.publishLocked(now)
	return d, err
}

// whyAtExit is the reason of the restores at exit.
const whyAtExit = "restored at exit"

// Restore's retries of a busy actuator: the first wait, doubled up to the
// last.
const (
	restoreRetryFirst = 100 * time.Millisecond
	restoreRetryMax   = 2 * time.Second
)

// restoreLocked sets back the originals only takes (nil: every one), but
// those a hook still running holds (heldAtExit: left open, for the next
// start, and named by awaitHooks).
func (t *Tuner) restoreLocked(ctx context.Context, now time.Time, why string, only func(k string) bool) ([]Decision, error) {
	keys := make([]string, 0, len(t.originals))
	var left []string
	for k, o := range t.originals {
		if only != nil && !only(k) || t.holder(restoreWait(o)) != nil {
			continue
		}
		// a pause stops a tenant: thawed whatever the mode; any other
		// setting only on a GPU in enforce, the one mode that acts (a GPU
		// in off or recommend is left as it is while another enforces)
		if o.Target.Knob == gpu.KnobPauseDuty || t.enforcedOn(o.Target.GPU) {
			keys = append(keys, k)
		} else {
			left = append(left, k)
		}
	}
	if len(left) > 0 {
		slices.Sort(left)
		level.Warn(t.o.Logger).Log("msg", "the tuner journal holds settings changed and not restored on GPUs not in enforce mode; the tuner acts only in enforce mode, so they stay as they are until a start with their GPU in enforce restores them",
			"originals", len(left), "targets", strings.Join(left, " "))
	}
	keys = t.followAtRestore(keys, now)
	sort.Strings(keys)
	keys = slices.Compact(keys)
	sort.SliceStable(keys, func(a, b int) bool {
		return t.restoreRank(keys[a]) < t.restoreRank(keys[b])
	})
	var out []Decision
	var errs []error
	_, retry := ctx.Deadline()
	wait := restoreRetryFirst
	refused := map[string]error{} // each busy key's latest refusal
	for len(keys) > 0 {
		var busy []string
		for _, k := range keys {
			// an MPS cap of a tenant whose thaw is tried again waits
			// with it (frozenPause)
			if p := t.frozenPause(t.originals[k]); retry && p != "" && slices.Contains(busy, p) {
				busy = append(busy, k)
				continue
			}
			d, err := t.restoreOne(ctx, k, now, why, retry, refused[k])
			if errors.Is(err, gpu.ErrBusy) && retry {
				busy = append(busy, k)
				refused[k] = err
				continue
			}
			if d != nil {
				out = append(out, *d)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
		keys = busy
		if len(keys) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			retry = false // one last try each, which records the failure
		case <-t.o.Clock.After(wait):
			wait = min(2*wait, restoreRetryMax)
		}
	}
	t.closeMovedAtExit(now)
	return out, errors.Join(errs...)
}

// restoreRank orders the restores (the lower first; in name order
// within a rank). A pause is thawed first: a client of its tenant
// restarted (an MPS cap is set back through a restart) while its
// processes are still frozen would leave the restart hook waiting on
// them (a signal other than SIGKILL is not delivered to a frozen task;
// under the v1 freezer not even SIGKILL until it is thawed). A GPU lost
// (read down, or gone from the readings) comes last: its actuator may
// hang until the deadline, which the GPUs that answer would otherwise
// not be set back within.
//
// A client of a tenant whose pause is still open once the pauses are
// tried (its thaw failed) is not restarted in that pass (frozenPause).
func (t *Tuner) restoreRank(k string) int {
	switch o := t.originals[k]; {
	case o.Target.Knob == gpu.KnobPauseDuty:
		return 0
	case t.gpuLost(o.Target.GPU):
		return 2
	}
	return 1
}

// restoreOne sets one original back. With busy, a busy actuator's error is
// returned alone, to be tried again; otherwise a failure is decided,
// journaled, counted and logged. refused is the busy actuator's latest
// refusal of an earlier try (nil for none), told beside a last try's
// failure once ctx has ended (withRefusal).
func (t *Tuner) restoreOne(ctx context.Context, k string, now time.Time, why string, busy bool, refused error) (*Decision, error) {
	a, d, left, skip := t.restoreAction(k, now, why)
	if skip {
		return nil, nil
	}
	if how, ok := t.atOriginal(k); ok && left == nil && why == whyAtExit {
		return t.closeAtOriginal(k, d, how, now), nil // (inforce.go)
	}
	if p := t.frozenPause(t.originals[k]); left == nil && p != "" {
		left = fmt.Errorf("not tried: %s is still open, %s, and a client restarted while its processes may be frozen leaves the restart hook waiting on them; tried again once the tenant is thawed (%s)", pauseText(p, t.originals[p], t.originals[k]), thawState(t.originals[p]), t.awaitThaw(k, why))
	}
	return t.restoreApply(ctx, k, a, d, left, busy, refused, now)
}

// frozenPause is the key of an open pause original of o's tenant, or of
// one that froze o's client (froze), where o's restore restarts a
// client (an MPS cap); "" for none. One this run gave back to 0 holds
// none (thawedInForce: its tenant is thawed). The pauses are tried first
// (restoreRank): one still open has a failed thaw (or one not tried yet:
// a hook still running holds it), and its tenant's processes may be
// frozen. The names alone do not tell: a reload of the tenants file that
// renamed the tenant between the cap's original and the pause's leaves
// the two under different names, the client among the processes paused.
func (t *Tuner) frozenPause(o Original) string {
	if o.Target.Knob != gpu.KnobMPSActiveThreads {
		return ""
	}
	for _, k := range slices.Sorted(maps.Keys(t.originals)) {
		p := t.originals[k]
		if p.Target.Knob == gpu.KnobPauseDuty && !t.thawedInForce(k) && (o.Tenant != "" && p.Tenant == o.Tenant || froze(p, o)) {
			return k
		}
	}
	return ""
}

// froze reports whether the pause original p froze the client of the MPS
// original o: its PID is among p's processes and, where both name their
// processes (Identity: a PID is taken again once its process exits), it
// is the same process, on the same boot with the start time p journaled
// for that PID. Where either names none, the PID alone tells.
func froze(p, o Original) bool {
	pid := o.Target.PID
	if !slices.Contains(p.PIDs, pid) {
		return false
	}
	was, named := p.start(p.PIDs, pid)
	if !named || o.Boot == "" || len(o.Starts) != 1 {
		return true
	}
	return p.Boot == o.Boot && was != 0 && was == o.Starts[0]
}

// pauseText names the pause original p (key k) that holds the restore of
// the MPS original o (frozenPause): by its tenant, and by the PID it froze
// where that is how it holds o's client (another tenant's by name).
func pauseText(k string, p, o Original) string {
	if o.Tenant != "" && p.Tenant == o.Tenant {
		return fmt.Sprintf("%s's pause (%s)", p.Tenant, k)
	}
	return fmt.Sprintf("%s's pause (%s), which froze PID %d,", p.Tenant, k, o.Target.PID)
}

// thawState says why the pause original p is open, as frozenPause's
// restores say it.
func thawState(p Original) string {
	if p.RestoreFailed {
		return "its thaw failed"
	}
	return "not thawed yet"
}

// withRefusal is err, a failure of a restore's last try, with refused,
// the actuator's latest refusal of it as busy (nil for none), told beside
// it where ctx has ended (its deadline, or at exit the hooks' share of
// it): the last try runs on the ended context, which an actuator refuses
// before calling (the NVML backend; a command or hook is not started), so
// that its error alone would say "context deadline exceeded" where the
// operator needs the refusal's why (processes on a MIG layout, a client
// restart in progress). The refusal is told as text: the outcome is the
// last try's (a call cut by the deadline may have changed something).
func withRefusal(ctx context.Context, err, refused error) error {
	if err == nil || refused == nil || errors.Is(err, gpu.ErrBusy) || ctx.Err() == nil {
		return err
	}
	return fmt.Errorf("%w (refused as busy until the restore stopped waiting: %s)", err, refused.Error())
}

// restoreAction is the action that sets the original k back, with why,
// and its decision; left, why it is not tried (left for the next start);
// skip, that there is nothing to decide (the successor of its restarted
// client is still looked for, or, at start, its process not listed yet:
// left to a later round; or its process is gone: dropped).
func (t *Tuner) restoreAction(k string, now time.Time, why string) (a Action, d Decision, left error, skip bool) {
	o := t.originals[k]
	a = Action{Target: o.Target, GPUIndex: t.indexOf(o.Target.GPU), Tenant: o.Tenant, PIDs: o.PIDs, Want: o.Value, Revert: true, Reason: why}
	if o.Target.Knob == gpu.KnobPauseDuty {
		a, why = t.samePaused(a, o, why) // (a PID another's by now passed over)
	}
	present, known := true, true
	if o.kept != "" {
		t.leaveKept(o)
		return a, d, nil, true
	}
	if o.Target.Knob == gpu.KnobMPSActiveThreads {
		a.Restart = true
		present, known = t.processPresent(o.Target)
		// a restarted client whose successor is still looked for
		// (followAtRestore did not find it)
		if w, ok := t.awaitsSuccessor(k); ok {
			if why == whyRecovered {
				w.restore = why // set back on the successor once a round finds it
				return a, d, nil, true
			}
			switch {
			case w.to != 0:
				left = fmt.Errorf("PID %d was restarted and goes on as PID %d, whose original the journal did not take, and the latest snapshot does not list PID %d on the GPU under its tenant: left for the next start, which closes the original as gone unless it finds the successor within %s of the restart (PID %d, if it runs, keeps the cap it was started with)", o.Target.PID, w.to, w.to, successorWithin, w.to)
			case w.old != 0:
				left = fmt.Errorf("the restart hook named PID %d the successor of PID %d, and no snapshot has listed it on the GPU yet: left for the next start", o.Target.PID, w.old)
			default:
				left = fmt.Errorf("PID %d was restarted and the restart hook named no successor, which is told only once %s has passed since the restart: left for the next start, which goes on looking for it", o.Target.PID, successorWithin)
			}
		}
		// one whose client was restarted less than successorWithin ago is
		// not closed as gone below, the successor perhaps not told yet
		// (restartedLately)
		if left == nil && !present && !t.seenLately(k, now) && t.restartedLately(k, now) {
			left = fmt.Errorf("PID %d was restarted less than %s ago, and its successor may not be told yet: left for the next start, which goes on looking for it", o.Target.PID, successorWithin)
		}
		// a process the last sample missed, seen by this run within
		// GoneAfter, is taken as running; one taken from the journal that
		// no snapshot has listed since is gone where the procfs tells so
		// (unlistedGone), or it names no identity (tellsClient), or none
		// has listed it for GoneAfter (awaitsListing): the start leaves it to the rounds
		// (restorehook.go), and an exit before that leaves it open, a
		// failed restore, for the next start, which restarts it only once
		// a snapshot lists it (closed here, a client every sample since
		// the start missed would keep the tuner's cap for good)
		if left == nil && !present && !t.seenLately(k, now) {
			switch gone := t.unlistedGone(o); {
			case gone != "":
				t.closeGoneClient(k, gone, now) // (the procfs tells it gone: nothing to wait for)
				return a, d, nil, true
			case !t.awaitsListing(k):
				t.dropGoneOriginal(k, now)
				return a, d, nil, true
			case why == whyRecovered:
				t.awaitListing(k, why)
				return a, d, nil, true
			}
			left = fmt.Errorf("no snapshot has listed PID %d on its GPU since this run took its original from the journal, less than %v ago, and a sample may miss a running client: left for the next start, which restores it once a snapshot lists it, or closes it as gone once none has for %v", o.Target.PID, GoneAfter, GoneAfter)
		}
		// one whose GPU the start's snapshot does not read (read down, or
		// no snapshot yet) is left to the rounds as an unlisted one is:
		// its minute runs from the first snapshot that reads the GPU
		if left == nil && !known && why == whyRecovered && t.awaitsListing(k) {
			t.awaitListing(k, why)
			return a, d, nil, true
		}
		// a PID whose process is not the client journaled with it (another
		// boot, another start time) is not restarted, nor one whose
		// identity cannot be read now (mpsidentity.go)
		if left == nil {
			gone, unread := t.clientGone(o, present && known)
			if gone != "" {
				t.closeGoneClient(k, gone, now)
				return a, d, nil, true
			}
			left = unread
		}
	}
	d = Decision{Time: now, GPU: o.Target.GPU, Tenant: o.Tenant, Knob: o.Target.Knob, From: t.lastSet(k), To: valueText(o.Value), Reason: why}
	switch {
	case o.Value == nil:
		left = errors.New("the journal holds no value to restore")
	case left != nil:
	case !known:
		left = fmt.Errorf("no snapshot says whether PID %d still runs (none yet, or its GPU read down or not listed), and a client restart by a PID from before could restart another process: left for the next start", o.Target.PID)
	}
	return a, d, left, false
}

// restoreApply sets the original k back through a (restoreAction), unless
// left says why not, and settles the outcome (settleRestore), a
// failure told with refused, an earlier try's refusal (withRefusal).
func (t *Tuner) restoreApply(ctx context.Context, k string, a Action, d Decision, left error, busy bool, refused error, now time.Time) (*Decision, error) {
	o := t.originals[k]
	err := left
	if err == nil {
		t.noteRestoredNow(k, now)
		var near string
		if a, near, err = t.applyReachable(ctx, a); near != "" {
			d.To, d.Reason = valueText(a.Want), joinReasons(d.Reason, near)
		}
		err = withRefusal(ctx, err, refused)
		if o.Target.Knob == gpu.KnobPauseDuty {
			why, cerr := t.thawCgroups(ctx, a, o, d.Reason) // (a cgroup no PID names now thawed)
			d.Reason, err = why, errors.Join(err, cerr)
		}
	}
	if err != nil && busy && errors.Is(err, gpu.ErrBusy) {
		return nil, err
	}
	return t.settleRestore(ctx, o, a, d, err, now)
}

// settleRestore is restoreSettled, but for an MPS cap set back on a host
// that cannot restart its client (errRestartPending): the set-back call
// took, and the original is restored as a change is applied (settle),
// pending until the client starts a new context, the decision's reason
// and the restored record saying so, no failure counted. Kept open, every
// exit would fail and every start make the same call again, with nothing
// more to do: no call of the tuner's restarts the client on such a host.
// The fraction set back is held pending as a change's is (noteApplied),
// till a reading shows it in force (syncPending), or readings keep
// contradicting it (pendingcontradicted.go): the rounds' policies
// read the client at its original, not at the cap its running context
// keeps, and a later cap journals that as its original.
func (t *Tuner) settleRestore(ctx context.Context, o Original, a Action, d Decision, err error, now time.Time) (*Decision, error) {
	f, ok := o.Value.(Fraction)
	pending := ok && errors.Is(err, errRestartPending)
	a, d, err = pendingRestart(a, d, err)
	rd, err := t.restoreSettled(ctx, o, a, d, err, pending, now)
	if pending && err == nil {
		t.pending[o.Target.String()] = f
		t.notePendingRestore(o, now)
	}
	return rd, err
}

// restoreSettled ends the restore of the original o through a, err its
// outcome: a failure is decided, journaled, counted and logged, and the
// original stays open; a success is read back, journaled, counted and
// logged, and the original dropped; one settled pending (an MPS cap the
// client takes with its next context) is counted once it is resolved
// (countPending), restored or not.
func (t *Tuner) restoreSettled(ctx context.Context, o Original, a Action, d Decision, err error, pending bool, now time.Time) (*Decision, error) {
	k := o.Target.String()
	why := d.Reason
	if err == nil && o.Target.Knob != gpu.KnobPauseDuty {
		var known bool
		a, d, known = t.readBackKnown(ctx, a, d) // (a restore the GPU holds otherwise says so)
		t.noteInForce(a, known, now)
		why = d.Reason
	}
	if err != nil {
		if outcomeOf(err) != OutcomeRefused {
			t.noteInForce(a, false, now)
		} else if _, called := t.inForce[k]; !called && oneCall(a.Knob) && a.Plan == nil {
			// a restore refused whole changed nothing: a value this run
			// knows stays; where it knows none, a later reading may tell
			t.inForce[k] = inForceValue{gpu: o.Target.GPU, at: now, refused: true}
		}
		d.Outcome = OutcomeFailed
		d.Reason = joinReasons(why, "restore failed: "+err.Error())
		t.counts.RestoreFailures++
		t.noteRestoreFailed(k)
		t.journal(restoreRecord(EventRestoreFailed, o, now, err.Error()))
		level.Error(t.o.Logger).Log("msg", "tuner could not restore an original setting", "target", o.Target.String(), "from", orUnknown(d.From), "value", valueText(o.Value), "err", err)
		return &d, fmt.Errorf("restore %s to %v: %w", o.Target, o.Value, err)
	}
	d.Outcome, d.Applied = OutcomeRestored, true
	if !pending {
		t.counts.Restores++
	}
	t.journal(restoreRecord(EventRestored, o, now, why))
	level.Info(t.o.Logger).Log("msg", "tuner restored an original setting", "target", o.Target.String(), "from", orUnknown(d.From), "value", o.Value.String(), "reason", why)
	t.dropOriginal(k)
	delete(t.pending, k)
	return &d, nil
}

// dropGoneOriginal closes the MPS original k, whose process is gone, in
// the journal and drops it: its context is gone, and the next one starts
// with the default, not with the tuner's fraction.
func (t *Tuner) dropGoneOriginal(k string, now time.Time) {
	t.closeOriginal(k, now, "process gone; nothing to restore")
}

// closeOriginal closes the original k in the journal, saying why, and
// drops it, without setting anything back.
func (t *Tuner) closeOriginal(k string, now time.Time, why string) {
	o := t.originals[k]
	t.journal(restoreRecord(EventRestored, o, now, why))
	t.dropOriginal(k)
}

// closeLeftOpen journals the restored record of the original of k that
// the journal holds open and the tuner no longer does: one set back, or
// closed without a call (its client gone, a change of a round set it
// back), while the journal could not be written (a full disk, a start on
// a file system mounted read-only). It is written before the target's
// next original: the journal keeps a target's first original open, so
// that the new one would be left out, and a start after a crash would set
// back the value from before that restore over what was in force since
// (an operator's). Where it cannot be written either, the error is
// returned and the caller makes no change (as where an original cannot
// be journaled); the original stays open, for the next try.
func (t *Tuner) closeLeftOpen(k string, now time.Time) error {
	if t.o.Journal == nil {
		return nil
	}
	if _, held := t.originals[k]; held {
		return nil
	}
	o, open := t.o.Journal.openOriginal(k)
	if !open {
		return nil
	}
	if err := t.journal(restoreRecord(EventRestored, o, now, whyClosedLate)); err != nil {
		return err
	}
	level.Info(t.o.Logger).Log("msg", "tuner closed in the journal an original set back while the journal could not be written, before its setting's fresh original", "target", k, "value", valueText(o.Value))
	return nil
}

// whyClosedLate is the reason of the restored record that closes an
// original the tuner set back (or closed) while the journal could not
// be written.
const whyClosedLate = "set back or closed earlier, while the journal could not be written: closed before the setting's next original"

// An MPS client's cap set back to its original by a change of a round (a
// revert, a policy's change back to it, a rollback) leaves nothing to
// restore: kept open, the exit (or the next start) would set it again and
// restart the client a second time for nothing (a model server loses its
// KV cache and the requests in flight), and count and journal a restore.
// So the original is closed, a restored record saying why, and the next
// change of the cap journals a fresh one. The other knobs keep theirs
// open: the policies read a GPU's originals as the settings to go back to
// (State.Originals: the time slice's level at slack, the power limit
// lowered once a run, the clock given back), and the exit closes them
// without a call where it knows them at their value (inforce.go), else
// sets them back, no restart; a pause's original names every process
// and cgroup the tenant's pause froze, which the restore's thaw alone lets
// go all of, and stays the tenant's pause target (State.Paused).

// setBack drops the open original of a's target where a, applied, set an
// MPS client's cap back to its value, and returns it, to be closed in the
// journal (closeSetBack) once a's own outcome is. A change whose hook the
// exit waited for is left to the exit, as the restore it made
// (restoredByHook).
func (t *Tuner) setBack(a Action, h *hookCall) (Original, bool) {
	if a.Knob != gpu.KnobMPSActiveThreads || a.Plan != nil || h != nil && h.atExit {
		return Original{}, false
	}
	k := a.Target.String()
	o, open := t.originals[k]
	if !open || !t.setsBackHeld(a, o) {
		return Original{}, false
	}
	t.dropOriginal(k)
	return o, true
}

// closeSetBack closes in the journal the original o that a change of the
// round set back (setBack).
func (t *Tuner) closeSetBack(o Original, now time.Time) {
	t.journal(restoreRecord(EventRestored, o, now, whySetBack))
	level.Info(t.o.Logger).Log("msg", "tuner closed an original its own change set back: nothing left to restore", "target", o.Target.String(), "value", o.Value.String())
}

// whySetBack is the reason of the restored record that closes an original
// a change of a round set back.
const whySetBack = "set back to the original by the tuner's change (a revert, a rollback or a policy's change back): nothing left to restore"

// gpuLost reports whether the latest snapshot reads the GPU down or has
// it no more (false when unknown).
func (t *Tuner) gpuLost(uuid string) bool {
	if t.last == nil || t.last.Readings == nil {
		return false
	}
	d := t.last.Readings.DeviceByUUID(uuid)
	return d == nil || !d.Up
}

// processPresent reports whether the target's process still runs on its
// GPU in the latest snapshot; known is false without one (before the
// first, or one without readings) or where it reads the GPU down, lists
// it not at all (its processes unlisted: not enumerated at this start, or
// fallen off the bus) or could not read the list that would hold the
// process (NVML refused it: listsRead), present then true.
func (t *Tuner) processPresent(tg Target) (present, known bool) {
	if t.last == nil || t.last.Readings == nil {
		return true, false
	}
	d := t.last.Readings.DeviceByUUID(tg.GPU)
	if d == nil || !d.Up {
		return true, false
	}
	for _, p := range d.Processes {
		if p.PID == tg.PID {
			return true, true
		}
	}
	p, ok := t.procs[tg.String()]
	if !ok {
		p = procSeen{tg: tg}
	}
	if !readLists(d).holds(p) {
		return true, false
	}
	return false, true
}

// noteJournal counts and logs a journal write's outcome: the first failure
// at error level (the tuner stops acting), repeats at debug, the first
// success after failures at info (it acts again). A write after the
// exit closed the journal (a round stuck at exit that ends after it) is
// no failure of the journal's: said at info, once, not counted.
func (t *Tuner) noteJournal(err error) {
	switch {
	case errors.Is(err, ErrJournalClosed):
		if !t.journalBroken {
			level.Info(t.o.Logger).Log("msg", "tuner journal closed by the exit: what the round that ended after it would have journaled is left out, and what the journal holds open is set back at the next start", "err", err)
		}
		t.journalBroken = true
	case err != nil:
		t.counts.JournalErrors++
		lv := level.Debug
		if !t.journalBroken {
			lv = level.Error
		}
		t.journalBroken = true
		lv(t.o.Logger).Log("msg", "tuner journal write failed: the tuner makes no change until a write succeeds (restores go on)", "err", err)
	case t.journalBroken:
		t.journalWritableAgain()
	}
}

// journalWritableAgain says that the journal can be written again after a
// write failed (or it was opened unwritable): the tuner acts again, the
// next decision the journal holds back is logged anew, and the restored
// records it could not write are written (unwritten.go).
func (t *Tuner) journalWritableAgain() {
	t.journalBroken = false
	defer t.writeUnwritten()
	for k, v := range t.refused {
		if strings.HasPrefix(v, journalRefusal+" ") {
			delete(t.refused, k)
		}
	}
	level.Info(t.o.Logger).Log("msg", "tuner journal writable again: the tuner acts again")
}

// orUnknown is a decision's from value as the log says it: "unknown"
// where the tuner holds none, as /tuner says it.
func orUnknown(from string) string {
	if from == "" {
		return "unknown"
	}
	return from
}
