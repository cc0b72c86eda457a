package helmtest

import "testing"

// TestDurationBounds: durations at the exporter's bounds, or in another
// unit than the one they are compared with, render (the refusals past
// them are TestRejectsBadCombinations' rows).
func TestDurationBounds(t *testing.T) {
	c := loadChart(t)
	for _, vals := range []map[string]any{
		{"sampleInterval": "100ms"},
		{"sampleInterval": "1m"},
		{"tuner": map[string]any{"interval": "0s"}}, // the tuner off: not given
		{"tuner": map[string]any{"mode": "recommend", "interval": "1ms"}},
		{"tuner": map[string]any{"mode": "recommend", "restoreTimeout": "1ms"}},
		{"tuner": map[string]any{"restoreTimeout": "0s"}}, // the tuner off: not given
		{"tuner": map[string]any{"mode": "recommend", "pause": map[string]any{"enabled": true, "period": "1s", "max": "1000ms"}}},
		{"tuner": map[string]any{"mode": "recommend", "pause": map[string]any{"enabled": true, "period": "1m", "max": "59s999ms"}}},
		{"tuner": map[string]any{"mode": "recommend", "pause": map[string]any{"period": "0s", "max": "1h"}}}, // the pause off
		{"serviceMonitor": map[string]any{"interval": "10s", "scrapeTimeout": "10000ms"}},
		{"serviceMonitor": map[string]any{"interval": "1h", "scrapeTimeout": "59m"}},
		{"serviceMonitor": map[string]any{"enabled": false, "interval": "5s"}},
	} {
		if _, err := render(c, vals); err != nil {
			t.Errorf("values %v: %v", vals, err)
		}
	}
}
