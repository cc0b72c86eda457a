package tuner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Clocks and power: the nearest value a GPU accepts for an original it no
// longer does (the call itself is the executor's: applyClockPower).
//
// An original the GPU no longer accepts (a driver or firmware update
// narrowed the power limit's range, or lowered the SM clock's maximum,
// since it was read) is set back as near as the GPU allows: the nearest
// value of the range the backend refused it with (gpu.RangeError), and
// the original closed, its restored record saying so. Kept open, its
// restore would fail at every start and exit for good, and a policy would
// go on asking for a revert that cannot be made (autotune gives a lowered
// power limit back before it locks the clock against DVFS or lowers it
// for energy). A change that is not a revert is refused as before.

// applyReachable is apply of a, but where a is a revert (a restore's, a
// round's) whose value the GPU refuses as out of its range: the nearest
// value in that range is applied instead, and returned as a's Want, with
// why, the words its decision and restored record add ("" where a was
// applied, or failed, as asked).
func (t *Tuner) applyReachable(ctx context.Context, a Action) (Action, string, error) {
	err := t.apply(ctx, a)
	var re *gpu.RangeError
	if !a.Revert || a.Plan != nil || !errors.As(err, &re) {
		return a, "", err
	}
	near, ok := nearestIn(a.Want, re)
	if !ok {
		return a, "", err
	}
	asked := a.Want
	a.Want = near
	if nerr := t.apply(ctx, a); nerr != nil {
		return a, "", fmt.Errorf("%w; the nearest value it accepts, %s, failed too: %w", err, near, nerr)
	}
	why := fmt.Sprintf("%s is outside what the GPU accepts now (%s): set to %s, the nearest it accepts, and the original closed", asked, rangeText(re), near)
	level.Warn(t.o.Logger).Log("msg", "tuner set back the nearest value the GPU accepts: it no longer accepts the original", "target", a.Target.String(), "original", asked.String(), "set", near.String(), "err", err)
	return a, why, nil
}

// nearestIn is the value nearest v within the range re names, and false
// where there is none other than v (the default limit and an unlocked
// clock are never out of range).
func nearestIn(v Value, re *gpu.RangeError) (Value, bool) {
	if re.Max <= 0 || re.Min > re.Max {
		return nil, false
	}
	clamp := func(x float64) float64 { return min(max(x, re.Min), re.Max) }
	var near Value
	switch v := v.(type) {
	case Watts:
		if v > 0 {
			near = Watts(clamp(float64(v)))
		}
	case ClockRange:
		if v != (ClockRange{}) {
			hi := clamp(float64(v.MaxMHz))
			near = ClockRange{MinMHz: uint32(min(clamp(float64(v.MinMHz)), hi)), MaxMHz: uint32(hi)}
		}
	}
	return near, near != nil && near != v
}

// rangeText is the range re names, as a reason says it.
func rangeText(re *gpu.RangeError) string {
	if re.Min == 0 {
		return fmt.Sprintf("at most %.0f %s", re.Max, re.Unit)
	}
	return fmt.Sprintf("%.0f-%.0f %s", re.Min, re.Max, re.Unit)
}

// closeUnreachable closes the original k, where it is asked, the value a
// revert asked for and the GPU no longer accepts: the revert set the
// nearest value it does (applyReachable, why), and nothing nearer is left
// to set back.
func (t *Tuner) closeUnreachable(k string, asked Value, why string, now time.Time) {
	if o, open := t.originals[k]; open && o.Value == asked {
		t.closeOriginal(k, now, why)
	}
}
