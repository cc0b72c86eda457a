package rebalance

import (
	"fmt"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

func TestTimingsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Timings
		want string
	}{
		{"defaults", DefaultTimings(), "[]"},
		{"zero", Timings{}, "[every must be positive, got 0s dwell must be positive, got 0s cool-down must be positive, got 0s hold must be positive, got 0s]"},
		{"a negative hold", Timings{Every: time.Second, Dwell: time.Second, CoolDown: time.Second, Hold: -time.Second},
			"[hold must be positive, got -1s]"},
	} {
		if got := fmt.Sprint(tc.t.Validate()); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// otherPlanner is a slow loop that is not the Planner.
type otherPlanner struct{ tuner.RebalancePlanner }

func TestTimingsApply(t *testing.T) {
	short := Timings{Every: 5 * time.Second, Dwell: 30 * time.Second, CoolDown: 90 * time.Second, Hold: 2 * time.Minute}
	want := *Default()
	want.Every, want.Dwell, want.CoolDown, want.Hold = short.Every, short.Dwell, short.CoolDown, short.Hold
	for _, tc := range []struct {
		name string
		t    Timings
		want Planner
	}{
		{"defaults", DefaultTimings(), *Default()},
		{"shortened", short, want},
	} {
		p := Default()
		tc.t.Apply(p)
		if *p != tc.want {
			t.Errorf("%s: planner %+v, want %+v", tc.name, *p, tc.want)
		}
	}
	// A slow loop of another kind, or none, is left as it is.
	short.Apply(nil)
	short.Apply(otherPlanner{})
}
