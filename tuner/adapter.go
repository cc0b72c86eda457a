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
// fast windows and held for ten minutes, and the default slow loop
// (rebalancing).
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
	if o.Rebalance == nil {
		o.Rebalance = DefaultRebalance()
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

// TunerPolicy runs a Decider through a Tuner in enforce mode, every
// Interval of snapshot time, behind the Policy interface vgpusim drives:
// the same loop, guards and actuator calls as the exporter's.
type TunerPolicy struct {
	Decider  Decider
	Interval time.Duration
	// Disabled knobs are never changed (Options.Disabled).
	Disabled []gpu.Knob
	clock    snapClock
	t        *Tuner
	last     time.Time
}

// NewTunerPolicy returns the policy running d.
func NewTunerPolicy(d Decider) *TunerPolicy {
	return &TunerPolicy{Decider: d, Interval: DefaultInterval}
}

// Name returns the decider's name.
func (p *TunerPolicy) Name() string { return p.Decider.Name() }

// Tuner returns the tuner after Init (nil before).
func (p *TunerPolicy) Tuner() *Tuner { return p.t }

// Init builds the tuner on the host's actuators.
func (p *TunerPolicy) Init(_ context.Context, act Actuators, snap *tenant.Snapshot) error {
	if snap != nil {
		p.clock.set(snap.Time)
	}
	t, err := New(DefaultOptions(Options{Policy: p.Decider, Actuators: act, Clock: &p.clock, Mode: ModeEnforce, Disabled: p.Disabled}, nil))
	p.t = t
	return err
}

// Observe runs the tuner once an interval has passed since its last run.
func (p *TunerPolicy) Observe(ctx context.Context, _ Actuators, snap *tenant.Snapshot) ([]Decision, error) {
	if snap == nil || p.t == nil {
		return nil, ctx.Err()
	}
	p.clock.set(snap.Time)
	// Between rounds, what the tuner has under way (a MIG relayout
	// waiting for its instances to drain) goes on at every snapshot.
	done := p.t.Progress(ctx)
	if !p.last.IsZero() && snap.Time.Sub(p.last) < p.Interval {
		return done, ctx.Err()
	}
	p.last = snap.Time
	out, err := p.t.RunOnce(ctx, snap)
	return append(done, out...), err
}
