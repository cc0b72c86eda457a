package tuner

import (
	"context"
	"sync"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// DefaultInterval is how often the tuner runs by default (as the tenants
// file's default latency scrape interval: the SLO counters move no faster).
const DefaultInterval = 15 * time.Second

// DefaultOptions fills the options the exporter and vgpusim share: the
// default guard chain (with kill, when given), reverts judged after two
// fast windows and held for ten minutes.
func DefaultOptions(o Options, kill *KillSwitch) Options {
	if o.FastWindow <= 0 {
		o.FastWindow = time.Minute
	}
	if o.Hold == nil {
		o.Hold = &RevertHold{Hold: 10 * time.Minute}
	}
	if o.RevertAfter == 0 {
		o.RevertAfter = 2 * o.FastWindow
	}
	if o.Guards == nil {
		o.Guards = DefaultGuards(kill, o.Hold)
	}
	return o
}

// snapClock is a clock that reads the time of the latest snapshot, so that
// a policy run by vgpusim lives in the simulator's virtual time.
type snapClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *snapClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *snapClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- c.Now().Add(d)
	return ch
}

func (c *snapClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// TunerPolicy runs a Decider through a Tuner in enforce mode behind the
// Policy interface vgpusim drives: the same loop, guards and executor as
// the exporter's. Autotune runs every Interval of snapshot time with the
// default guards and slow loop; the baselines (package baseline) at every
// snapshot with their own chain.
type TunerPolicy struct {
	Decider Decider
	// Interval is the snapshot time between rounds; 0: every snapshot.
	Interval time.Duration
	// Disabled knobs are never changed (Options.Disabled); Enabled are
	// the opt-in knobs it may change (Options.Enabled).
	Disabled []gpu.Knob
	Enabled  []gpu.Knob
	// configure completes the tuner's options (guards with kill first
	// when given, slow loop) once the policy, actuators, clock and mode
	// are set.
	configure func(Options, *KillSwitch) Options
	// initRound: Init runs a first round on its snapshot; its decisions
	// are returned by the next Observe.
	initRound bool
	// fixed: the policy decides fixed settings (EverySnapshot), behind its
	// own chain alone in vgpusim and the bounds and budgets too on a host
	// (ConfigureHost).
	fixed   bool
	initial []Decision
	clock   snapClock
	t       *Tuner
	last    time.Time
}

// NewTunerPolicy returns the policy running d every DefaultInterval with
// the default options (DefaultOptions) and r as its slow loop (nil: none).
func NewTunerPolicy(d Decider, r RebalancePlanner) *TunerPolicy {
	return &TunerPolicy{Decider: d, Interval: DefaultInterval, configure: func(o Options, kill *KillSwitch) Options {
		o = DefaultOptions(o, kill)
		if o.Rebalance == nil {
			o.Rebalance = r
		}
		return o
	}}
}

// Name returns the decider's name.
func (p *TunerPolicy) Name() string { return p.Decider.Name() }

// Tuner returns the tuner after Init (nil before): Unwatched, it keeps no
// Status of its rounds.
func (p *TunerPolicy) Tuner() *Tuner { return p.t }

// Init builds the tuner on the host's actuators (and, for a policy that
// starts at once, runs its first round on snap).
func (p *TunerPolicy) Init(ctx context.Context, act Actuators, snap *tenant.Snapshot) error {
	if snap != nil {
		p.clock.set(snap.Time)
	}
	t, err := New(p.Configure(Options{Actuators: act, Clock: &p.clock, Mode: ModeEnforce, Disabled: p.Disabled, Enabled: p.Enabled, Unwatched: true}, nil))
	p.t = t
	if err != nil || !p.initRound || snap == nil {
		return err
	}
	p.last = snap.Time
	p.initial, err = t.RunOnce(ctx, snap)
	return err
}

// Configure returns the options that run the policy's decider on a
// Tuner: o with the decider as its policy and the policy's guards (after
// kill, when given) and slow loop. The exporter builds its tuner so.
func (p *TunerPolicy) Configure(o Options, kill *KillSwitch) Options {
	o.Policy = p.Decider
	if p.configure != nil {
		o = p.configure(o, kill)
	}
	return o
}

// Fixed reports whether the policy decides fixed settings (EverySnapshot:
// the baselines, a schedule planned ahead) rather than tuning them to the
// tenants' objectives.
func (p *TunerPolicy) Fixed() bool { return p.fixed }

// ConfigureHost is Configure for the exporter's tuner, which acts on a
// host's GPUs: a policy of fixed settings (the baselines) runs there
// behind the tenants' bounds and the change budgets (budgets: the
// per-round cap and the rate) after its own chain, as every change on a
// host does. The guards that damp a feedback loop (dead band, back-off,
// dwell, hysteresis, the revert hold) are left out: a fixed setting is
// asked for once and never tuned. vgpusim judges the baselines behind
// their own chain alone, as they have always run. (On an 8-GPU host,
// static-equal caps 32 MPS clients, one restart each: the budgets spread
// them over minutes instead of one round.)
func (p *TunerPolicy) ConfigureHost(o Options, kill *KillSwitch) Options {
	o = p.Configure(o, kill)
	if p.fixed {
		o.Guards = append(append(o.Guards, Bounds{}), budgets()...)
	}
	return o
}

// Observe runs the tuner on snap once Interval has passed since its last
// run, acting through act: the actuators of the call are the ones used
// (a policy observed without Init is built on them).
func (p *TunerPolicy) Observe(ctx context.Context, act Actuators, snap *tenant.Snapshot) ([]Decision, error) {
	if snap == nil {
		return nil, ctx.Err()
	}
	if p.t == nil {
		if err := p.Init(ctx, act, nil); err != nil {
			return nil, err
		}
	}
	p.t.bind(act)
	p.clock.set(snap.Time)
	// Between rounds, what the tuner has under way (a MIG relayout
	// waiting for its instances to drain) goes on at every snapshot.
	done := append(p.initial, p.t.Progress(ctx)...)
	p.initial = nil
	if p.Interval > 0 && !p.last.IsZero() && snap.Time.Sub(p.last) < p.Interval {
		return done, ctx.Err()
	}
	p.last = snap.Time
	out, err := p.t.RunOnce(ctx, snap)
	return append(done, out...), err
}

// EverySnapshot runs d at every snapshot, starting with Init's, in
// enforce mode, behind the guards guards returns (then the kill switch
// where there is one; none when guards is nil) and with no slow loop: the
// shape of a policy that decides fixed settings rather than tuning them
// (the baselines, a schedule planned ahead). Such a policy asks for its
// settings again at every snapshot: its own guards (the baselines' Retry)
// come first, so that while the kill switch is engaged it counts a
// change once, when asked for, not once a round for as long as the switch
// stays (the switch shows what the tuner would have done, not how often).
func EverySnapshot(d Decider, guards func() []Guard) *TunerPolicy {
	return &TunerPolicy{Decider: d, initRound: true, fixed: true, configure: func(o Options, kill *KillSwitch) Options {
		o.Guards = []Guard{}
		if guards != nil {
			o.Guards = append(o.Guards, guards()...)
		}
		if kill != nil {
			o.Guards = append(o.Guards, kill)
		}
		return o
	}}
}
