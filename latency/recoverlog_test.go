package latency

import (
	"context"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// A source whose failure was logged logs its recovery when it answers
// again, whichever tracker logged the failure: a reload that restarts its
// counters (another Key, the same URL) gives it a new tracker, which took
// it for a source that had never failed and logged nothing when it came
// back. A source of another URL under the name is another source, and one
// the tenants file dropped is forgotten: neither logs a recovery of the
// failure logged before.
func TestRecoveryLoggedAcrossTrackers(t *testing.T) {
	spec := func(key, url string) Spec {
		return Spec{Name: "a", Key: key, Source: &Source{URL: url, Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}, Window: time.Minute}
	}
	for _, tc := range []struct {
		name      string
		then      [][]Spec // the Sets after the failure was logged
		recovered int
	}{
		{"the same tracker", nil, 1},
		{"counters restarted", [][]Spec{{spec("a2", "sim://a")}}, 1},
		{"counters restarted twice", [][]Spec{{spec("a2", "sim://a")}, {spec("a3", "sim://a")}}, 1},
		{"another URL", [][]Spec{{spec("a2", "sim://b")}}, 0},
		{"dropped, then back", [][]Spec{nil, {spec("a", "sim://a")}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logLines{}
			clock := gpu.NewManualClock(time.Unix(0, 0))
			app := &testutil.FakeApp{Body: map[string][]byte{"a": []byte("garbage"), "b": []byte(vllmText("1"))}}
			p := NewPool(Options{Clock: clock, AppMetrics: app, Logger: logs})
			p.Set([]Spec{spec("a", "sim://a")}, 15*time.Second)
			p.Refresh(context.Background()) // fails: logged
			for _, specs := range tc.then {
				clock.Advance(15 * time.Second)
				p.Set(specs, 15*time.Second)
			}
			app.Body["a"] = []byte(vllmText("1"))
			for range 2 {
				clock.Advance(15 * time.Second)
				p.Refresh(context.Background())
			}
			logs.mu.Lock()
			defer logs.mu.Unlock()
			failed, recovered := 0, 0
			for _, l := range logs.lines {
				switch l["msg"] {
				case "latency source failed":
					failed++
				case "latency source recovered":
					recovered++
					if l["tenant"] != "a" {
						t.Errorf("recovery logged of tenant %v, want a", l["tenant"])
					}
				}
			}
			if failed != 1 || recovered != tc.recovered {
				t.Errorf("%d failure and %d recovery lines, want 1 and %d: %v", failed, recovered, tc.recovered, logs.lines)
			}
			if st, _ := p.Status("a"); !st.SourceUp {
				t.Errorf("source down after it answered: %+v", st)
			}
			p.logMu.Lock()
			defer p.logMu.Unlock()
			if len(p.failLogged) != 0 {
				t.Errorf("failures noted of sources up or gone: %v", p.failLogged)
			}
		})
	}
}
