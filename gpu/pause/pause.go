// Package pause pauses a tenant's processes on a host for a fraction of
// every period (gpu.PauseActuator): through the cgroup v2 freezer
// (cgroup.freeze) or the v1 freezer (freezer.state) where a process runs
// in a pod, container or systemd unit of its own, and by SIGSTOP/SIGCONT
// to its process group otherwise. A paused process launches no new GPU
// work, so a tenant's pause duty is its time-slice weight on a shared GPU.
//
// The pulse loop runs on an injected clock: it freezes every group of the
// tenant together (or none: a group that fails to freeze thaws the others),
// waits duty*period (never more than MaxPause) from the write of the freeze
// (one not settled by then fails), thaws, waits the rest of
// the period. A watchdog process (watchdog.go) thaws what the loop froze
// when this process dies or hangs mid-pulse. A duty of 0 stops the loop and thaws at once, whether or not
// this process paused the tenant: after a crash, the tuner's journal names
// the tenant and its PID, and setting 0 thaws its group.
package pause

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/cgroupfile"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// Defaults.
const (
	DefaultPeriod        = 500 * time.Millisecond
	DefaultMaxDuty       = 0.9
	DefaultFreezeTimeout = time.Second
)

// The shortest Period and MaxPause the command line accepts
// (--pause.period, --pause.max; New takes any). A freeze takes from under a millisecond
// to tens of them to settle (longer while a task is in a driver call),
// and two freezer writes and two lines to the watchdog go with every
// period: a period under MinPeriod would spend itself freezing and
// thawing (one of a nanosecond spins). MinMaxPause floors the cap on
// every pause, not a pause: at a small duty a pause is shorter (5 ms at
// 0.1 of a 50 ms period), and such pauses mostly settle in time. A cap
// under it would hold every tenant's pause, whatever its duty, to a few
// milliseconds a period (under 2% of the default period): the pause
// knob all but powerless while the tuner raises it to its ceiling, and
// every pause at the cap short enough for a busy cgroup's freeze to
// outlast it (a failed period).
const (
	MinPeriod   = 50 * time.Millisecond
	MinMaxPause = 10 * time.Millisecond
)

// Options configure a Pauser.
type Options struct {
	// Period is the pulse period (DefaultPeriod when 0).
	Period time.Duration
	// MaxPause is the longest a tenant stays paused at once (a liveness
	// probe's or a client's timeout must be longer); 0: MaxDuty*Period.
	MaxPause time.Duration
	// MaxDuty is the largest duty accepted (DefaultMaxDuty when 0).
	MaxDuty float64
	// FreezeTimeout is how long a cgroup may take to freeze before the
	// freeze counts as failed (DefaultFreezeTimeout when 0); never longer
	// than the pause: one not settled by its end fails then.
	FreezeTimeout time.Duration
	// ProcRoot is the procfs root ("/proc" when empty).
	ProcRoot string
	// CgroupV2Root is the cgroup v2 hierarchy and CgroupV1Freezer the v1
	// freezer hierarchy; "" where the host has none (Detect finds them).
	CgroupV2Root    string
	CgroupV1Freezer string
	Clock           gpu.Clock
	Logger          log.Logger
	// Watchdog is the command of the watchdog process (the exporter with
	// WatchdogArg): started at the first pause, it thaws what is frozen
	// when this process dies or a freeze outlives its lease. None when
	// empty: a crash then leaves a tenant paused until the next start.
	Watchdog []string
	// Supervisor is the pipe to the watchdog of this process's supervisor
	// (TakeSupervised), which outlives it: used in place of starting
	// Watchdog, and never closed (its end is this process's exit); one
	// found gone is replaced by a Watchdog started.
	Supervisor io.Writer

	// startWatchdog replaces the watchdog process in tests.
	startWatchdog func() (io.WriteCloser, func() error, error)

	// kill and getpgid replace the system calls in tests.
	kill    func(pid int, sig syscall.Signal) error
	getpgid func(pid int) (int, error)
}

// Pauser is the host's pause actuator.
type Pauser struct {
	o Options
	r resolver

	wd *watchdog // nil without one

	mu      sync.Mutex // serializes SetPauseDuty and Close
	tenants map[string]*pulse

	// leftover are, per tenant, groups it no longer holds (dropped from
	// its set, or its pulse ended) whose thaw failed: their watchdog
	// leases stand, and each SetPauseDuty of the tenant, each thaw of its
	// pulse and Close try again; one that stays frozen is logged, and
	// fails only the call that ends the tenant's pause where its own
	// groups stay frozen too
	leftMu   sync.Mutex
	leftover map[string][]group

	// failMu is taken alone or under mu, never the other way round
	failMu   sync.Mutex
	failures map[string]uint64 // per tenant, periods whose freeze failed
}

// pulse is one paused tenant: its duty and its groups per GPU, and its
// loop. Each call for a GPU replaces that GPU's groups: a tenant whose
// processes restarted in another cgroup or process group is paused by
// the new ones, and the old ones are thawed (a restarted client, a VM
// started again under a new scope).
type pulse struct {
	mu     sync.Mutex
	duties map[string]float64 // by GPU UUID
	groups map[string][]group // by GPU UUID

	// act serializes the loop's freezes and thaws with a change of the
	// groups, so that a group dropped from the set is thawed after the
	// loop's last freeze of it, never before, and a group added while the
	// others are frozen is frozen with them. Under act: frozen says
	// whether they are, until when (onUntil), and when the watchdog's
	// lease of their freeze ends (leaseUntil).
	act                 sync.Mutex
	frozen              bool
	onUntil, leaseUntil time.Time

	// failed says the latest period's freeze failed: thawed then, the
	// tenant runs through it, or only its tasks that froze stop
	failed atomic.Bool
	// none says the latest period froze nothing: none of the tenant's
	// groups is left (errNoneLeft)
	none atomic.Bool

	stop chan struct{}
	done chan struct{}
}

// New returns a Pauser with o's settings.
func New(o Options) (*Pauser, error) {
	if o.Clock == nil {
		return nil, errors.New("pause: a clock is needed")
	}
	if o.Period <= 0 {
		o.Period = DefaultPeriod
	}
	if o.MaxDuty <= 0 {
		o.MaxDuty = DefaultMaxDuty
	}
	if o.MaxDuty > 1 {
		return nil, fmt.Errorf("pause: max duty %v above 1", o.MaxDuty)
	}
	if o.MaxPause <= 0 {
		o.MaxPause = time.Duration(o.MaxDuty * float64(o.Period))
	}
	if o.FreezeTimeout <= 0 {
		o.FreezeTimeout = DefaultFreezeTimeout
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.Logger == nil {
		o.Logger = log.NewNopLogger()
	}
	if o.kill == nil {
		o.kill = syscall.Kill
	}
	if o.getpgid == nil {
		o.getpgid = syscall.Getpgid
	}
	if o.startWatchdog == nil && len(o.Watchdog) > 0 {
		o.startWatchdog = watchdogCommand(o.Watchdog)
	}
	if o.Supervisor != nil {
		o.startWatchdog = supervisorPipe(o.Supervisor, o.startWatchdog)
	}
	self, _ := o.getpgid(os.Getpid())
	p := &Pauser{o: o, tenants: map[string]*pulse{}, r: resolver{
		proc: o.ProcRoot, host: cgroupfile.NewHost(filepath.Join(o.ProcRoot, "self", "cgroup")),
		v2: o.CgroupV2Root, v1: o.CgroupV1Freezer, clock: o.Clock,
		timeout: o.FreezeTimeout, kill: o.kill, getpgid: o.getpgid, selfPgid: self,
	}}
	p.r.selfV2, p.r.selfV1 = p.r.ownDirs(os.Getpid())
	if o.startWatchdog != nil {
		p.wd = &watchdog{start: o.startWatchdog, clock: o.Clock, every: o.Period, logger: o.Logger}
	}
	return p, nil
}

// Detect returns a Pauser for this host: it finds the cgroup v2 hierarchy
// (root, or "unified" on a hybrid host) and the v1 freezer under
// cgroupRoot ("/sys/fs/cgroup" when empty), and fails when neither is
// there and writable: without a freezer the host pauses nothing.
func Detect(o Options, cgroupRoot string) (*Pauser, error) {
	if cgroupRoot == "" {
		cgroupRoot = "/sys/fs/cgroup"
	}
	for _, d := range []string{cgroupRoot, filepath.Join(cgroupRoot, "unified")} {
		if _, err := os.Stat(filepath.Join(d, "cgroup.controllers")); err == nil && writable(d) {
			o.CgroupV2Root = d
			break
		}
	}
	if d := filepath.Join(cgroupRoot, "freezer"); writable(d) {
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
			o.CgroupV1Freezer = d
		}
	}
	if o.CgroupV2Root == "" && o.CgroupV1Freezer == "" {
		return nil, fmt.Errorf("no writable cgroup freezer under %s (cgroup v2 with cgroup.freeze, or the v1 freezer): %w", cgroupRoot, gpu.ErrNotSupported)
	}
	return New(o)
}

func writable(dir string) bool { return syscall.Access(dir, 2 /* W_OK */) == nil }

// SetPauseDuty implements gpu.PauseActuator.
func (p *Pauser) SetPauseDuty(ctx context.Context, uuid, tenant string, pids []uint32, duty float64) error {
	if math.IsNaN(duty) || duty < 0 || duty > p.o.MaxDuty {
		return fmt.Errorf("pause duty %v outside [0, %v]", duty, p.o.MaxDuty)
	}
	if tenant == "" {
		return errors.New("pause: no tenant named")
	}
	groups, err := p.groupsOf(pids)
	if err != nil && duty > 0 {
		return fmt.Errorf("tenant %s not paused (all its processes or none): %w", tenant, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pl := p.tenants[tenant]
	if pl == nil {
		pl = &pulse{duties: map[string]float64{}, groups: map[string][]group{}}
	}
	// An error means the call changed nothing: the duty and groups of
	// uuid are put back as they were.
	pl.act.Lock()
	pl.mu.Lock()
	before := pl.unionLocked()
	prevDuty, hadDuty := pl.duties[uuid]
	prevGroups, hadGroups := pl.groups[uuid]
	pl.duties[uuid] = duty
	var named []group // what a duty of 0 names, to be thawed
	switch {
	case duty == 0:
		delete(pl.groups, uuid)
		named = groups
	case len(groups) > 0:
		pl.groups[uuid] = groups
	}
	after := pl.unionLocked()
	eff := pl.dutyLocked()
	running := pl.stop != nil
	pl.mu.Unlock()
	undo := func() {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		delete(pl.duties, uuid)
		delete(pl.groups, uuid)
		if hadDuty {
			pl.duties[uuid] = prevDuty
		}
		if hadGroups {
			pl.groups[uuid] = prevGroups
		}
	}
	// the groups it came to: frozen with the others in the pause under
	// way, else checked (the next period freezes them with the others,
	// as a whole: one that cannot be frozen would leave it running)
	if added := without(after, before); running && eff > 0 && len(added) > 0 {
		var err error
		if pl.frozen {
			err = p.freezeAdded(tenant, pl, added)
		} else {
			err = checkAll(added)
		}
		if err != nil {
			undo()
			pl.act.Unlock()
			return fmt.Errorf("tenant %s: its pause is not set on those processes (it stays as it was): %w", tenant, err)
		}
	}
	// the groups the tenant's processes left, and those a duty of 0
	// names, that no GPU pauses now (they may be frozen); what fails to
	// thaw is retried (leftover) and, where the tenant stays paused,
	// logged: the pause asked for is in force
	dropped := without(before, after)
	var errs []error
	if gs := append(dropped, without(without(named, after), dropped)...); len(gs) > 0 {
		errs = append(errs, p.thawLeft(tenant, gs))
	}
	leftErr := p.retryLeft(tenant, after)
	pl.act.Unlock()
	if eff == 0 {
		// an error only where the tenant's own groups stay frozen
		delete(p.tenants, tenant)
		if leftErr != nil {
			level.Error(p.o.Logger).Log("msg", "pause: a group the tenant left is still frozen; tried again at every call and at exit", "tenant", tenant, "err", leftErr)
		}
		return errors.Join(append(errs, p.end(tenant, pl))...)
	}
	if err := errors.Join(append(errs, leftErr)...); err != nil {
		level.Error(p.o.Logger).Log("msg", "pause: a group the tenant left is still frozen; tried again at every call and thaw", "tenant", tenant, "err", err)
	}
	if running {
		return nil
	}
	on := p.onTime(pl)
	until, leaseUntil, err := p.freeze(tenant, pl, on)
	if err != nil {
		return fmt.Errorf("tenant %s not paused: %w", tenant, err)
	}
	pl.frozen, pl.onUntil, pl.leaseUntil = true, until, leaseUntil
	pl.stop, pl.done = make(chan struct{}), make(chan struct{})
	p.tenants[tenant] = pl
	go p.run(tenant, pl, on, pl.onUntil, pl.stop, pl.done)
	return nil
}

// Close stops every pulse and thaws every tenant, and what tenants left
// whose thaw failed.
func (p *Pauser) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for name, pl := range p.tenants {
		errs = append(errs, p.end(name, pl))
		delete(p.tenants, name)
	}
	p.leftMu.Lock()
	names := slices.Sorted(maps.Keys(p.leftover))
	p.leftMu.Unlock()
	for _, name := range names {
		errs = append(errs, p.retryLeft(name, nil))
	}
	return errors.Join(append(errs, p.wd.close())...)
}

// end stops a tenant's loop (if any) and thaws its groups (those whose
// thaw fails are kept as its leftover), and its leftover.
func (p *Pauser) end(tenant string, pl *pulse) error {
	if pl.stop != nil {
		close(pl.stop)
		<-pl.done
		pl.stop = nil
	}
	pl.act.Lock()
	defer pl.act.Unlock()
	err := p.thawLeft(tenant, pl.snapshot())
	if lerr := p.retryLeft(tenant, nil); lerr != nil {
		level.Error(p.o.Logger).Log("msg", "pause: a group the tenant left is still frozen; tried again at every call and at exit", "tenant", tenant, "err", lerr)
	}
	return err
}

// thawTold thaws gs and tells the watchdog of those thawed (or gone): a
// group whose thaw fails keeps its lease, which ends its freeze should
// nothing else. err is the thaws' alone: a watchdog gone is logged as
// such, the thaw standing.
func (p *Pauser) thawTold(gs []group) (failed []group, err error) {
	var errs []error
	var thawed []group
	for _, g := range gs {
		if err := g.Thaw(); err != nil && !kube.ProcessGone(err) {
			errs = append(errs, fmt.Errorf("thaw %s: %w", g.Key(), err))
			failed = append(failed, g)
			continue
		}
		thawed = append(thawed, g)
	}
	p.wd.thawed(thawed)
	return failed, errors.Join(errs...)
}

// thawLeft thaws gs, groups the tenant no longer holds (or holds no
// more once its pulse ends); those whose thaw fails become its leftover.
func (p *Pauser) thawLeft(tenant string, gs []group) error {
	failed, err := p.thawTold(gs)
	p.keepLeft(tenant, failed)
	return err
}

// keepLeft adds gs to the tenant's leftover.
func (p *Pauser) keepLeft(tenant string, gs []group) {
	if len(gs) == 0 {
		return
	}
	p.leftMu.Lock()
	defer p.leftMu.Unlock()
	if p.leftover == nil {
		p.leftover = map[string][]group{}
	}
	p.leftover[tenant] = appendNew(p.leftover[tenant], gs...)
}

// retryLeft thaws the tenant's leftover again, less the groups of its set
// now (set: its pulse thaws those), keeping those that fail again; an
// error while one stays frozen.
func (p *Pauser) retryLeft(tenant string, set []group) error {
	p.leftMu.Lock()
	all := p.leftover[tenant]
	gs := without(all, set)
	kept := without(all, gs) // in the set: kept, for should the set leave them
	if len(kept) > 0 {
		p.leftover[tenant] = kept
	} else {
		delete(p.leftover, tenant)
	}
	p.leftMu.Unlock()
	if len(gs) == 0 {
		return nil
	}
	if err := p.thawLeft(tenant, gs); err != nil {
		return fmt.Errorf("tenant %s: a group it left is still frozen: %w", tenant, err)
	}
	return nil
}

// freezeAdded freezes, under pl.act, the groups gs the tenant came to
// while the others are frozen, for what is left of their freeze; the
// watchdog's lease ends where theirs does (past the thaw, never at or
// before now). Where that freeze ends first (onUntil: the lease took the
// rest, or they had not settled by then), the thaw is due: they are
// checked, and the next period freezes them with the others (freezeAll
// thawed them). So are they where the watchdog is gone and cannot be
// started again before the next period (errWatchdogWait): not frozen
// without a lease, they run to the thaw. Groups gone already are no
// error.
func (p *Pauser) freezeAdded(tenant string, pl *pulse, gs []group) error {
	now := p.o.Clock.Now()
	if !now.Before(pl.onUntil) {
		return checkAll(gs) // the thaw is due: the next period freezes them
	}
	lease := max(pl.leaseUntil.Sub(now), pl.onUntil.Sub(now)+time.Millisecond)
	if err := p.wd.leased(gs, lease, false); errors.Is(err, errWatchdogWait) {
		return checkAll(gs)
	} else if err != nil {
		return err
	}
	if !p.o.Clock.Now().Before(pl.onUntil) {
		return checkAll(gs) // (a watchdog started; the lease runs out)
	}
	stuck, err := p.freezeLeased(tenant, pl, gs, pl.onUntil)
	var u unsettled
	switch {
	case err == nil, errors.Is(err, errNoneLeft):
		return nil
	case len(stuck) == 0 && errors.As(err, &u) && u.ended:
		return checkAll(gs)
	}
	return err
}

// groupsOf resolves the groups of pids; the error names each PID that has
// none.
func (p *Pauser) groupsOf(pids []uint32) ([]group, error) {
	if len(pids) == 0 {
		return nil, errors.New("no processes")
	}
	var out []group
	var errs []error
	for _, pid := range pids {
		g, err := p.r.resolve(pid)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = appendNew(out, g)
	}
	return out, errors.Join(errs...)
}

// run is a tenant's pulse loop; it starts frozen for on, until until. The
// thaw comes at until, on after the freeze was written, however long the
// freeze took to settle: its tasks are stopped from the write on.
func (p *Pauser) run(tenant string, pl *pulse, on time.Duration, until time.Time, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-p.o.Clock.After(until.Sub(p.o.Clock.Now())):
		case <-stop:
			return // end thaws
		}
		pl.act.Lock()
		gs := pl.snapshot()
		// (a group whose thaw fails keeps its lease, and is thawed again
		// at the next thaw)
		if _, err := p.thawTold(gs); err != nil {
			level.Error(p.o.Logger).Log("msg", "pause: thaw failed", "tenant", tenant, "err", err)
		}
		if err := p.retryLeft(tenant, gs); err != nil {
			level.Error(p.o.Logger).Log("msg", "pause: a group the tenant left is still not thawed", "tenant", tenant, "err", err)
		}
		pl.frozen = false
		pl.act.Unlock()
		select {
		case <-p.o.Clock.After(p.o.Period - on):
		case <-stop:
			return
		}
		pl.act.Lock() // (the duty read under act: a call that fails changes nothing)
		on = p.onTime(pl)
		var leaseUntil time.Time
		var err error
		until, leaseUntil, err = p.freeze(tenant, pl, on)
		// none of its processes left (they exited; the tuner ends the
		// pause once it sees them gone) is no failure: nothing runs, and
		// nothing is paused (none)
		none := errors.Is(err, errNoneLeft)
		failed := err != nil && !none
		switch {
		case failed:
			level.Warn(p.o.Logger).Log("msg", "pause: freeze failed; thawed, the tenant runs the rest of this period", "tenant", tenant, "err", err)
			p.countFailure(tenant)
		case err != nil:
			level.Debug(p.o.Logger).Log("msg", "pause: none of the tenant's processes is left to freeze", "tenant", tenant)
		}
		pl.failed.Store(failed)
		pl.none.Store(none)
		pl.frozen, pl.onUntil, pl.leaseUntil = err == nil, until, leaseUntil
		pl.act.Unlock()
	}
}

// freeze freezes the tenant's groups gs as a whole for on, after giving
// the watchdog their lease: on and half the rest of the period, so a
// freeze the pulse does not end (this process hangs) ends before the next
// period would begin. The pause starts once the lease is given (a
// watchdog started on the way takes none of it) and ends at until, when
// a freeze not settled by then (nor within FreezeTimeout) fails: its
// pause would run past on, and MaxPause with it. leaseUntil is when the
// lease ends; one whose giving took more than half the rest of the period
// (a watchdog started) would end before the thaw, and is given again to
// the watchdog now running (one line), none started for it: where that
// one is gone already, the pause ends with the first lease instead (until
// is never past leaseUntil).
func (p *Pauser) freeze(tenant string, pl *pulse, on time.Duration) (until, leaseUntil time.Time, err error) {
	gs := pl.snapshot()
	lease := p.lease(on)
	given := p.o.Clock.Now()
	err = p.wd.leased(gs, lease, false)
	start := p.o.Clock.Now()
	if err == nil && start.Add(on).After(given.Add(lease)) && p.wd.leased(gs, lease, true) == nil {
		given = start
	}
	until, leaseUntil = start.Add(on), given.Add(lease)
	if leaseUntil.Before(until) {
		until = leaseUntil
	}
	if err == nil {
		_, err = p.freezeLeased(tenant, pl, gs, until)
	}
	return until, leaseUntil, err
}

// lease is the watchdog's lease of a freeze for on.
func (p *Pauser) lease(on time.Duration) time.Duration { return on + (p.o.Period-on)/2 }

// freezeLeased freezes gs, whose lease the watchdog holds, as a whole for
// a pause that ends at until; where that fails, the watchdog is told of
// those thawed again (or never frozen), and one whose thaw failed (stuck)
// keeps its lease and becomes the tenant's leftover. Those found gone
// leave the tenant's set and the watchdog's leases (dropGone).
func (p *Pauser) freezeLeased(tenant string, pl *pulse, gs []group, until time.Time) (stuck []group, err error) {
	gone, stuck, err := freezeAll(gs, until)
	p.dropGone(tenant, pl, gone)
	if err != nil {
		p.keepLeft(tenant, stuck)
		p.wd.thawed(without(gs, stuck))
		return stuck, err
	}
	p.wd.thawed(groupsOfGone(gone))
	return nil, nil
}

// onTime is how long the tenant stays paused this period.
func (p *Pauser) onTime(pl *pulse) time.Duration {
	pl.mu.Lock()
	d := pl.dutyLocked()
	pl.mu.Unlock()
	return min(time.Duration(d*float64(p.o.Period)), p.o.MaxPause)
}

// dutyLocked is the largest duty any GPU asks for.
func (pl *pulse) dutyLocked() float64 {
	d := 0.0
	for _, v := range pl.duties {
		d = max(d, v)
	}
	return d
}

// snapshot is the tenant's groups, every GPU's (each once).
func (pl *pulse) snapshot() []group {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.unionLocked()
}

// unionLocked is every GPU's groups, each once, in the order of the GPUs'
// UUIDs.
func (pl *pulse) unionLocked() []group {
	var out []group
	for _, uuid := range slices.Sorted(maps.Keys(pl.groups)) {
		out = appendNew(out, pl.groups[uuid]...)
	}
	return out
}

// without is the groups of gs not in keep.
func without(gs, keep []group) []group {
	var out []group
	for _, g := range gs {
		if !hasGroup(keep, g) {
			out = append(out, g)
		}
	}
	return out
}

// hasGroup says whether gs holds g (by key).
func hasGroup(gs []group, g group) bool {
	return slices.ContainsFunc(gs, func(h group) bool { return h.Key() == g.Key() })
}

// appendNew appends to gs those of more it does not hold yet, each once;
// a process group it holds already takes the members of more's (merged),
// in a copy of gs.
func appendNew(gs []group, more ...group) []group {
	for _, g := range more {
		i := slices.IndexFunc(gs, func(h group) bool { return h.Key() == g.Key() })
		if i < 0 {
			gs = append(gs, g)
			continue
		}
		gs = slices.Clone(gs)
		gs[i] = merged(gs[i], g)
	}
	return gs
}
