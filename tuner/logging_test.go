package tuner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A guard's refusal is logged at info the first time, at debug while the
// same refusal repeats; the kill switch says when it engages and when it
// is released, once each.
func TestRefusalAndKillSwitchLogging(t *testing.T) {
	var buf strings.Builder
	logger := level.NewFilter(log.NewLogfmtLogger(log.NewSyncWriter(&buf)), level.AllowInfo())
	kill := &KillSwitch{}
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: fixed{mpsAction(7, 1, 0.4)}, Guards: []Guard{kill}, Actuators: ActuatorsOf(&recorder{}),
		Clock: clk, Mode: ModeEnforce, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	round := func() string {
		t.Helper()
		buf.Reset()
		clk.Advance(15 * time.Second)
		if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	kill.Engaged.Store(true)
	steps := []struct {
		name       string
		engaged    bool
		want, none []string
	}{
		{"engaged", true, []string{"level=warn", "kill switch engaged", "outcome=guarded", "guard=kill_switch"}, nil},
		{"still engaged", true, nil, []string{"kill switch", "outcome=guarded"}},
		{"released", false, []string{"kill switch released", "outcome=applied"}, []string{"outcome=guarded"}},
	}
	for _, s := range steps {
		kill.Engaged.Store(s.engaged)
		out := round()
		for _, w := range s.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: log lacks %q:\n%s", s.name, w, out)
			}
		}
		for _, n := range s.none {
			if strings.Contains(out, n) {
				t.Errorf("%s: log has %q at info:\n%s", s.name, n, out)
			}
		}
	}
	if tu.Status().KillSwitch {
		t.Error("status says the kill switch is on after its release")
	}
}
