package simrun

import (
	"strings"
	"testing"
	"time"
)

// A knob or an autotune parameter named twice is refused before the run,
// naming the flag: the settings line listed both, and of two values of a
// parameter only the last held. A knob and a parameter given once each
// are taken.
func TestGivenTwiceRefused(t *testing.T) {
	base := Config{Scenario: "noisy-neighbour", Policy: "autotune", Duration: 10 * time.Second, Step: time.Second}
	for _, c := range []struct {
		name                      string
		disabled, enabled, params []string
		want                      string
	}{
		{"disabled knob", []string{"power_limit", "power_limit"}, nil, nil, "--disable-knob: power_limit given twice"},
		{"enabled knob", nil, []string{"pause_duty", "pause_duty"}, nil, "--enable-knob: pause_duty given twice"},
		{"parameter", nil, nil, []string{"gain=1", " gain = 2"}, "--autotune.param: gain given twice"},
		{"once each", []string{"power_limit", "locked_clocks"}, []string{"pause_duty"}, []string{"gain=1", "pause_max=0.5"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			cfg.DisabledKnobs, cfg.EnabledKnobs, cfg.AutotuneParams = c.disabled, c.enabled, c.params
			err := cfg.Check()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%v, want %q", err, c.want)
			}
		})
	}
}
