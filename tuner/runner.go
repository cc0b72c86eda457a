package tuner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// Runner runs a Tuner in real time beside the sampler: a restore of what
// an earlier run left changed before the first round, a round every
// interval on the clock, and the restore of the originals at exit on its
// own deadline.
type Runner struct {
	t        *Tuner
	journal  *Journal
	clock    gpu.Clock
	interval time.Duration
	snapshot func() *tenant.Snapshot
	logger   log.Logger
	failed   bool // a restore failed: the exit status says so
	closers  []io.Closer
	released []io.Closer
	// restoreTimeout bounds the restore at start and at exit
	// (DefaultRestoreTimeout unless SetRestoreTimeout).
	restoreTimeout time.Duration
	// lateCloses bounds the closes after a restore that ended past
	// restoreTimeout (lateCloseTimeout; shorter in tests).
	lateCloses time.Duration
	// callTimeout is the longest an outside program a round's call runs
	// may take (SetCallTimeout): the rounds' bound is never below it.
	callTimeout time.Duration
	// done is closed when Run returns: the tuner is idle, for the restore.
	done chan struct{}
	// late is what the exit left running past its deadline (exitlate.go).
	late lateWork
}

// DefaultRestoreTimeout bounds the restore at exit (and the one at
// start) unless SetRestoreTimeout (--tuner.restore-timeout) says
// otherwise: its own deadline, apart from the rest of the shutdown
// (Kubernetes' default grace period). At exit, a hook still running off
// the round is cancelled first, but a restore's or a change's back to the
// original, waited for up to hooksShare of it; a hook or a restore's own
// restart hook that takes longer is cut, and what it did not set back
// stays open in the journal for the next start.
const DefaultRestoreTimeout = 30 * time.Second

// firstSnapshotPoll is how often the start's restore looks for the first
// snapshot (the GPUs' processes, to tell a client gone from one running).
const firstSnapshotPoll = 50 * time.Millisecond

// NewRunner returns a Runner of t deciding every interval on clock over
// the snapshots snapshot returns; journal (nil for none) is the one t
// writes, closed by the restore at exit.
func NewRunner(t *Tuner, journal *Journal, clock gpu.Clock, interval time.Duration, snapshot func() *tenant.Snapshot, logger log.Logger) *Runner {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	return &Runner{t: t, journal: journal, clock: clock, interval: interval, snapshot: snapshot, logger: logger, done: make(chan struct{}),
		restoreTimeout: DefaultRestoreTimeout, lateCloses: lateCloseTimeout}
}

// RestoreTimeout is what bounds the restores at start and at exit.
func (r *Runner) RestoreTimeout() time.Duration { return r.restoreTimeout }

// SetRestoreTimeout bounds the restores at start and at exit by d (> 0):
// long enough for the restart hook a restore runs, where one is given.
func (r *Runner) SetRestoreTimeout(d time.Duration) {
	if d > 0 {
		r.restoreTimeout = d
	}
}

// SetCallTimeout says how long one outside program a round's call runs
// may take (--mps.timeout, --nvidia-smi.timeout: the longest of them): a
// round's bound is at least d, so that it never kills a program its own
// timeout would have let run. d <= 0 leaves it as it is.
func (r *Runner) SetCallTimeout(d time.Duration) {
	if d > 0 {
		r.callTimeout = d
	}
}

// RoundTimeout bounds each round's calls to the actuators: roundShare of
// the interval, at least the call timeout (SetCallTimeout). A call that
// cannot get its GPU by then (the NVML backend held by a sample stuck in a
// driver call) gives up as busy (gpu.ErrBusy: refused, nothing asked of
// the GPU), so that the round ends and the next one runs; a driver call
// under way is not cut (the change it makes is journaled as made). Hooks
// (an MPS client's restart, a rebalancing plan) run off the round on
// their own timeouts, and the restores at start and exit on
// --tuner.restore-timeout: neither is bounded by it.
func (r *Runner) RoundTimeout() time.Duration {
	return max(share(r.interval, roundShare), r.callTimeout)
}

// CloseAtExit has the restore at exit close cs after setting the
// originals back: the actuators that hold something of their own (the
// pause's pulses and watchdog, which thaw every tenant on close).
func (r *Runner) CloseAtExit(cs ...io.Closer) { r.closers = append(r.closers, cs...) }

// ReleaseAtExit has the restore at exit close cs last: the node lock,
// released once every close has returned, the actuators' and the
// journal's (never while one is blocked: what it does may still land),
// once every hook cut at exit has ended, and after a round stuck at exit
// once that round ends too, so that a
// tuner that takes it finds the journal free and nothing of this one
// acting. Not released by the exit's return, it is when they end, or by
// the kernel as the process exits.
func (r *Runner) ReleaseAtExit(cs ...io.Closer) { r.released = append(r.released, cs...) }

// Tuner returns the tuner r runs.
func (r *Runner) Tuner() *Tuner { return r.t }

// Status is the tuner's published status, for the collector, with the
// interval r runs the rounds at (a copy: the published one stays as it
// is).
func (r *Runner) Status() *Status {
	s := *r.t.Status()
	s.Interval = r.interval
	return &s
}

// LogJournalRecovery says what opening the journal at path found and did,
// and what the start does with the originals it holds: with enforce (a GPU
// in enforce mode) restores those of the GPUs in enforce, else thaws the
// paused tenants alone (which it does on every GPU).
func LogJournalRecovery(logger log.Logger, path string, j *Journal, enforce bool) {
	logJournalOpen(logger, path, j)
	n := len(j.Originals())
	switch {
	case n > 0 && enforce:
		level.Warn(logger).Log("msg", "the tuner journal holds settings an earlier run changed and did not restore (an unclean exit, a failed restore, or their GPU not in enforce mode at its exit); restoring them now on the GPUs in enforce mode (on the others, paused tenants alone are thawed)", "journal", path, "originals", n)
	case n > 0:
		level.Warn(logger).Log("msg", "the tuner journal holds settings an earlier run changed and did not restore (an unclean exit, a failed restore, or their GPU not in enforce mode at its exit); the tuner acts only in enforce mode: paused tenants are thawed, the other settings stay as they are", "journal", path, "originals", n)
	}
}

// logJournalOpen says what opening the journal at path found and did: a
// torn tail cut off, records dropped, a journal that cannot be written.
func logJournalOpen(logger log.Logger, path string, j *Journal) {
	st := j.Stats()
	if st.TornBytes > 0 {
		level.Warn(logger).Log("msg", "tuner journal: cut off a torn last record (the previous run ended during a write)", "journal", path, "bytes", st.TornBytes)
	}
	for _, why := range []string{"corrupt", "invalid", "oversize"} {
		if n := st.Dropped[why]; n > 0 {
			level.Error(logger).Log("msg", "tuner journal: dropped records that cannot be trusted; an original they held is lost", "journal", path, "reason", why, "records", n)
		}
	}
	for _, b := range st.Bad { // where each was: check by hand the setting it names
		level.Error(logger).Log("msg", "tuner journal: dropped a record that cannot be trusted", "journal", path, "line", b.Line, "byte", b.Offset, "reason", b.Reason, "detail", b.Detail)
	}
	if st.WriteError != "" {
		level.Error(logger).Log("msg", "tuner journal cannot be written: the tuner makes no change until a write succeeds", "journal", path, "err", st.WriteError)
	}
}

// roundShare is the part of the interval a round's actuator calls may
// wait (Runner.RoundTimeout): the rest keeps the next round on its tick.
const roundShare = 0.8

// Run first restores what an earlier run left changed (as soon as the
// first snapshot is there), then decides every interval until ctx is done:
// a round starts an interval after the one before started, and one that
// takes longer than the interval is followed at the next whole interval
// from its start. Each round's context ends RoundTimeout after it
// starts. It runs once.
func (r *Runner) Run(ctx context.Context) {
	defer close(r.done)
	snap := r.snapshot()
	for snap == nil {
		select {
		case <-ctx.Done():
			return
		case <-r.clock.After(firstSnapshotPoll):
		}
		snap = r.snapshot()
	}
	rctx, cancel := context.WithTimeout(ctx, r.restoreTimeout)
	_, err := r.t.Recover(rctx, snap)
	cancel()
	if err != nil && ctx.Err() == nil { // cut short by a stop: the restore at exit goes on
		r.failed = true
		level.Error(r.logger).Log("msg", "tuner: settings an earlier run changed could not all be restored at start; tried again at exit and at the next start", "err", err)
	}
	wait := r.interval
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.clock.After(wait):
		}
		start := r.clock.Now()
		round, cancel := context.WithTimeout(ctx, r.RoundTimeout())
		_, err := r.t.RunOnce(round, r.snapshot())
		cancel()
		if err != nil && ctx.Err() == nil {
			r.failed = true
			level.Error(r.logger).Log("msg", "tuner round failed", "err", err)
		}
		// the next round an interval after this one started: the time a
		// round takes (an actuator's calls, a client's restart) does not
		// stretch the interval; past it, the next whole interval
		wait = gpu.UntilNext(r.clock, start, r.interval)
	}
}

// The restore's deadline (--tuner.restore-timeout) is split so that its
// error and its closes come within it. Of what is left of it once the
// last round has ended: where a hook still running at exit is waited for
// (a restore's or a revert's, setting back an original), it and the
// restores of the originals none of them holds get hooksShare; the
// originals those hooks held and did not set back (a hook that failed,
// its tenant's other clients) are tried until heldShare. With no hook
// waited for, the restore runs until heldShare. What is left then closes
// the actuators (the pause's thaw) and the journal (closeAll): one close
// blocked keeps none of the others, and is named in the error. A round
// that has not ended by heldShare of the whole deadline (an actuator
// stuck) sets nothing back, cancels the hooks still running (apart from
// the tuner's lock, which that round holds: hookLive), and closes the
// same. The node lock is
// released once every close has returned, the journal's included, the
// round has ended and every hook cut at exit has (waited for within the
// deadline; else later, or the process exits), so that no other tuner
// restores while a stuck call may still land. Past the whole deadline
// the exit goes on without what is still stuck.
const (
	hooksShare = 0.8
	heldShare  = 0.95
)

// ExitHookWait is the longest the restore at exit, on timeout, waits for
// a hook still running (a restore's or a revert's restart of an MPS
// client) and restores what no hook holds: hooksShare of it (of what is
// left of it where the last round ends late).
func ExitHookWait(timeout time.Duration) time.Duration {
	return share(timeout, hooksShare)
}

// share is the part f of d.
func share(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) * f)
}

// leftOf is what is left of ctx's deadline, read on the wall clock (a
// context's deadline is wall time, not the injected clock's). Here ctx
// has one (RestoreAtExit and Restore make it with the restore's timeout);
// one without has nothing left: what is made of it is done at once, never
// a wait without bound.
func leftOf(ctx context.Context) time.Duration {
	dl, _ := ctx.Deadline()
	return time.Until(dl)
}

// exitShares are the contexts of the restore within all, split from what
// is left of all's deadline: the hooks' and their first pass's
// (hooksShare of it), and the held originals' and, with no hook waited
// for, the whole restore's (heldShare); cancel ends both.
func exitShares(all context.Context) (hooks, held context.Context, cancel func()) {
	left := leftOf(all)
	hooks, c1 := context.WithTimeout(all, share(left, hooksShare))
	held, c2 := context.WithTimeout(all, share(left, heldShare))
	return hooks, held, func() { c1(); c2() }
}

// RestoreAtExit waits for Run to return (its context is done) and sets
// the originals back, all within its restore timeout whatever else is stuck
// (split as hooksShare says); the error is what makes the exit status
// non-zero. What is not restored stays open in the journal, for the next
// start.
func (r *Runner) RestoreAtExit() error {
	all, cancel := context.WithTimeout(context.Background(), r.restoreTimeout)
	defer cancel()
	round, cancelRound := context.WithTimeout(all, share(r.restoreTimeout, heldShare))
	defer cancelRound()
	res := make(chan exitErr, 1)
	closing := make(chan struct{}) // closed as the closes start
	decided := make(chan struct{}) // closed once the exit has chosen its way: restore, or the round stuck
	go func() {
		select {
		case <-r.done:
		case <-round.Done():
		}
		beforeExitWay(all)
		select {
		case <-r.done: // (an ended round wins over the deadline reached with it)
			close(decided)
			res <- r.restoreWithin(all, closing)
		default:
			// nothing set back (the round holds the tuner), but the
			// hooks are cancelled and the pause's thaw and the journal's
			// close come before the error all the same; the node lock is
			// kept until the round and the hooks end
			close(closing)
			close(decided)
			r.t.hookLive.stop()
			err := errors.New("the tuner's round did not end (an actuator is stuck): nothing set back")
			res <- exitErr{restore: err, close: r.closeAll(all, restoreBound, r.roundAndHooksEnded())}
		}
	}()
	var e exitErr
	select {
	case e = <-res:
	case <-all.Done():
		// The round's deadline, within all's, has passed too: the way
		// is chosen at once (a stuck round is not taken for a stuck
		// restore because its goroutine ran late).
		<-decided
		select {
		case e = <-res: // (a result sent with the deadline reached wins)
		case <-closing: // (the closes end at all's end, naming what did not close)
			e = <-res
		default:
			e.restore = fmt.Errorf("not finished in %v (--tuner.restore-timeout): the restore is stuck (an actuator's call or a journal write), nothing closed", r.restoreTimeout)
			go r.logLateRestore(res, r.late.begin("the restore at exit, stuck past its deadline (an actuator's call or a journal write), and its closes"))
		}
	}
	return r.restoreResult(e)
}

// beforeExitWay runs in RestoreAtExit once the round has ended or its
// deadline has passed, before the exit chooses its way; tests make it
// late (past all's deadline), as a loaded host may.
var beforeExitWay = func(all context.Context) {}

// roundAndHooksEnded is closed once the round stuck at exit has ended,
// and then every hook (those it started too, cancelled as they start).
func (r *Runner) roundAndHooksEnded() <-chan struct{} {
	ended := make(chan struct{})
	end := r.late.begin("the tuner's round stuck at exit")
	go func() {
		<-r.done
		level.Info(r.logger).Log("msg", "tuner exit: the round stuck at exit has ended (what it left open stays in the journal for the next start)")
		end()
		<-r.t.hookLive.stop()
		close(ended)
	}()
	return ended
}

// logLateRestore logs the end of a restore at exit stuck past its
// deadline (the shutdown waits for it a while: AwaitLate), then ends it
// (end): what it set back and closed then, or what it did not: the
// restore's outcome and the closes' each in a line of its own.
func (r *Runner) logLateRestore(res <-chan exitErr, end func()) {
	defer end()
	e := <-res
	const late = "tuner exit: the restore stuck at the deadline ended after it: "
	if e.restore != nil {
		level.Error(r.logger).Log("msg", late+"original settings NOT restored; the journal restores them at the next start", "err", e.restore)
	} else {
		level.Warn(r.logger).Log("msg", late+"the original settings are set back (the exit's error said not)")
	}
	if e.close != nil {
		level.Error(r.logger).Log("msg", late+closeFailed, "err", e.close)
	} else {
		level.Warn(r.logger).Log("msg", late+"the actuators and the journal closed")
	}
}

// lateCloseTimeout bounds the closes after a restore that ended past the
// exit's deadline (logLateRestore): theirs, from the restore's end, the
// exit's being spent.
const lateCloseTimeout = 5 * time.Second

// restoreBound is what the closes' errors and late lines call the
// exit's deadline; lateBound, the one of the closes after a restore that
// ended past it.
const restoreBound = "--tuner.restore-timeout"

func (r *Runner) lateBound() string {
	return fmt.Sprintf("the %v the closes get of their own after a restore that ended past %s", r.lateCloses, restoreBound)
}

// exitErr is the outcome of an exit: the restore's error (originals not
// set back) apart from the closes' and the release's, and from a restore
// that failed while running, every original set back since (ran).
type exitErr struct {
	restore, close, ran error
}

// closeFailed is what the log says of a failed close or release at exit.
const closeFailed = "an actuator, the journal or the node lock did not close or could not be released (err names it); this is not about the settings: a failed restore is logged apart"

// Restore sets the originals back (within its restore timeout) and closes the
// journal, with Run not running; the error is what makes the exit status
// non-zero.
func (r *Runner) Restore() error {
	all, cancel := context.WithTimeout(context.Background(), r.restoreTimeout)
	defer cancel()
	return r.restoreResult(r.restoreWithin(all, make(chan struct{})))
}

// restoreResult logs and wraps an exit's errors, each under its own
// message: a restore failed while running, set back since; the restore's
// (originals not set back); and the closes' and release's (the settings
// as the restore left them). Any makes the exit status non-zero.
func (r *Runner) restoreResult(e exitErr) error {
	var err error
	if e.ran != nil { // (the exit status non-zero all the same: the failure was)
		level.Error(r.logger).Log("msg", "tuner exit: a restore failed while running (logged then), made at exit since: the exit status is non-zero for it; err says what is still open", "err", e.ran)
		err = fmt.Errorf("tuner: %w", e.ran)
	}
	if e.restore != nil {
		level.Error(r.logger).Log("msg", "tuner: original settings NOT restored; the journal restores them at the next start", "err", e.restore)
		err = fmt.Errorf("tuner restore: %w", e.restore)
	}
	if e.close != nil {
		level.Error(r.logger).Log("msg", "tuner exit: "+closeFailed, "err", e.close)
		err = errors.Join(err, fmt.Errorf("tuner exit: %w", e.close))
	}
	return err
}

// restoreWithin sets the originals back within all (split by
// exitShares), closes closing, then closes the actuators CloseAtExit
// names and the journal and releases what ReleaseAtExit names (closeAll).
func (r *Runner) restoreWithin(all context.Context, closing chan<- struct{}) exitErr {
	hooks, held, c := exitShares(all)
	defer c()
	_, err := r.t.restoreAtExit(hooks, held)
	close(closing)
	closeBy, bound := all, restoreBound
	if all.Err() != nil {
		// ended past the deadline: the exit has returned (or, the two
		// ending at once, waits for these closes), theirs is spent
		late, cancel := context.WithTimeout(context.WithoutCancel(all), r.lateCloses)
		defer cancel()
		closeBy, bound = late, r.lateBound()
	}
	cerr := r.closeAll(closeBy, bound, r.t.hookLive.ended())
	var ran error
	if err == nil && r.failed { // (said by what the journal still holds open)
		switch open, kept := r.openAtExit(); {
		case open > 0:
			err = fmt.Errorf("a restore of original settings failed while running (see the log), and %d are still open in the journal", open)
		case kept > 0:
			ran = fmt.Errorf("a restore of original settings failed while running (see the log); every original is set back now but the %d of GPUs not in enforce mode, kept open in the journal", kept)
		default:
			ran = errors.New("a restore of original settings failed while running (see the log); every original is set back now")
		}
	}
	return exitErr{restore: err, close: cerr, ran: ran}
}

// openAtExit counts the originals still open in the journal: those the
// exit sets back (not set back: exitRestores' AtExit, WaitingForListing,
// ThawPending and Failed), and those it keeps open (their GPU not in
// enforce mode).
func (r *Runner) openAtExit() (open, kept int) {
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	e := r.t.exitRestores()
	return e.AtExit + e.WaitingForListing + e.ThawPending + e.Failed, e.KeptOpen
}

// closeAll closes the actuators CloseAtExit names and the journal within
// ctx (called bound in errors and the log), each in its own goroutine: one blocked (a freezer's write on a
// stuck file system, a lock a stuck call holds) keeps none of the others.
// The journal closes once the actuators have, or half of what is left of
// ctx has passed. No actuator's close writes to it (the pause's thaws
// through the freezer and stops its watchdog, journaling nothing; a pause
// the restore did not set back, a round stuck, stays open in it and is
// thawed again, harmlessly, at the next start): the order buys nothing
// now and costs nothing, the journal's close being quick and half of what
// is left kept for it. An actuator still closing is waited for until ctx
// is done all the same (its thaw may yet land); a write to the journal
// then is refused (usedAfterClose). Those not closed by ctx's end are
// named, and their ends logged as they come (closes.late). What
// ReleaseAtExit names is released once every close has returned and
// after is closed (the end of the hooks cut at exit, nil where none runs;
// a round stuck at exit: its end, then its hooks'), waited for until ctx
// is done: at once
// where they have, its error returned; else later (or never: the process
// exits first), a failure logged.
func (r *Runner) closeAll(ctx context.Context, bound string, after <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, leftOf(ctx)) // (a ctx without a deadline is done at once: leftOf)
	defer cancel()
	first, cancelFirst := context.WithTimeout(ctx, leftOf(ctx)/2)
	defer cancelFirst()
	c := &closes{ended: make(chan closed, len(r.closers)+1), open: map[string]bool{}, bound: bound}
	for i, a := range r.closers {
		c.start(fmt.Sprintf("actuator %d (%T)", i+1, a), a)
	}
	c.wait(first)
	if r.journal != nil {
		c.start("the journal", r.journal)
	}
	c.wait(ctx)
	if len(c.open) == 0 && after != nil && len(r.released) > 0 {
		select { // (what after waits for, within the deadline)
		case <-after:
		case <-ctx.Done():
		}
	}
	err := c.result()
	if len(c.open) == 0 && isClosed(after) {
		return errors.Join(err, r.release())
	}
	switch {
	case len(r.released) == 0:
	case len(c.open) > 0:
		err = errors.Join(err, errors.New("the node lock is kept until they end"))
	default:
		err = errors.Join(err, errors.New("the node lock is kept until the round, or a hook cut at exit, ends"))
	}
	ends := c.begin(&r.late)
	endRelease := func() {}
	if len(r.released) > 0 {
		endRelease = r.late.begin("releasing " + r.releasedNames() + " (kept until what is named before it ends)")
	}
	go func() {
		defer endRelease()
		c.late(r.logger, ends)
		if after != nil {
			<-after
		}
		if rerr := r.release(); rerr != nil {
			level.Error(r.logger).Log("msg", "tuner exit: the node lock could not be released (the kernel releases it as the process exits)", "err", rerr)
		} else if len(r.released) > 0 {
			level.Info(r.logger).Log("msg", "tuner exit: the node lock is released, past the exit's deadline, now that what kept it has ended (a close named as not closed, the round stuck at exit, a hook cut at exit)")
		}
	}()
	return err
}

// isClosed reports whether ch is nil or closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return ch == nil
	}
}

// closes are the closes at exit, each in its own goroutine.
type closes struct {
	ended chan closed     // (buffered for every close)
	names []string        // in the order started
	open  map[string]bool // (names are unique: one a close)
	err   error
	bound string // what bounds them: the exit's deadline, or the late closes'
}

// closed is the end of a close: its name and error.
type closed struct {
	name string
	err  error
}

// start closes cl, called name, in its own goroutine.
func (c *closes) start(name string, cl io.Closer) {
	c.names = append(c.names, name)
	c.open[name] = true
	go func() {
		c.ended <- closed{name, cl.Close()}
	}()
}

// wait takes the ends of the closes started until all have ended or ctx
// is done (those ended by then taken too).
func (c *closes) wait(ctx context.Context) {
	for len(c.open) > 0 {
		select {
		case e := <-c.ended:
			c.take(e)
			continue
		case <-ctx.Done():
		}
		select { // (one ended with the deadline counts as closed)
		case e := <-c.ended:
			c.take(e)
		default:
			return
		}
	}
}

// begin counts the closes still pending as late work, each ended by
// its end in ends.
func (c *closes) begin(l *lateWork) map[string]func() {
	ends := map[string]func(){}
	for _, n := range c.names {
		if c.open[n] {
			ends[n] = l.begin("closing " + n)
		}
	}
	return ends
}

// late logs the end of each close still pending, as it ends, and ends
// it in ends (the shutdown waits for them a while: AwaitLate): the exit's
// error named it as not closed.
func (c *closes) late(logger log.Logger, ends map[string]func()) {
	for range len(c.open) {
		e := <-c.ended
		if e.err != nil {
			level.Error(logger).Log("msg", "tuner exit: a close named as not closed by the deadline ended after it and failed", "deadline", c.bound, "closer", e.name, "err", e.err)
		} else {
			level.Warn(logger).Log("msg", "tuner exit: closed after the deadline: a close named as not closed ended, and succeeded", "deadline", c.bound, "closer", e.name)
		}
		ends[e.name]() // (after its line)
	}
}

// take records the end e.
func (c *closes) take(e closed) {
	delete(c.open, e.name)
	if e.err != nil {
		c.err = errors.Join(c.err, fmt.Errorf("closing %s: %w", e.name, e.err))
	}
}

// result is the closes' errors, and the names of those still open.
func (c *closes) result() error {
	if len(c.open) == 0 {
		return c.err
	}
	var left []string
	for _, n := range c.names {
		if c.open[n] {
			left = append(left, n)
		}
	}
	return errors.Join(c.err, fmt.Errorf("not closed within %s: %s", c.bound, strings.Join(left, ", ")))
}

// release releases what ReleaseAtExit names, each named in its error.
func (r *Runner) release() error {
	var err error
	for _, c := range r.released {
		if cerr := c.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("releasing %s: %w", lockName(c), cerr))
		}
	}
	return err
}

// releasedNames names what ReleaseAtExit names, for the log.
func (r *Runner) releasedNames() string {
	var names []string
	for _, c := range r.released {
		names = append(names, lockName(c))
	}
	return strings.Join(names, ", ")
}

// lockName is what an error calls the lock c: the node lock by its path.
func lockName(c io.Closer) string {
	if p, ok := c.(interface{ Path() string }); ok {
		return "the node lock " + p.Path()
	}
	return fmt.Sprintf("a lock (%T)", c)
}
