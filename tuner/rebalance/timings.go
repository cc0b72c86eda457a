package rebalance

import (
	"fmt"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// Timings are the planner's timings a host sets (the exporter's
// --tuner.slow-loop.* flags): Planner.Every, Dwell, CoolDown and Hold.
type Timings struct {
	Every, Dwell, CoolDown, Hold time.Duration
}

// DefaultTimings returns the timings of Default.
func DefaultTimings() Timings {
	d := Default()
	return Timings{Every: d.Every, Dwell: d.Dwell, CoolDown: d.CoolDown, Hold: d.Hold}
}

// Validate returns one error per timing that is not positive, each
// starting with the timing's name as the flags spell it (every, dwell,
// cool-down, hold).
func (t Timings) Validate() []error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"every", t.Every}, {"dwell", t.Dwell}, {"cool-down", t.CoolDown}, {"hold", t.Hold},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.name, d.v))
		}
	}
	return errs
}

// Apply sets the timings of the policy's slow loop r when it is the
// planner (the autotune policy's); any other, such as the baselines' nil,
// is left as it is.
func (t Timings) Apply(r tuner.RebalancePlanner) {
	p, ok := r.(*Planner)
	if !ok {
		return
	}
	p.Every, p.Dwell, p.CoolDown, p.Hold = t.Every, t.Dwell, t.CoolDown, t.Hold
}
