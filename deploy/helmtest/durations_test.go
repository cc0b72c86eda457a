package helmtest

import (
	"testing"
)

// TestDurationBounds: durations at the exporter's bounds, or in another
// unit than the one they are compared with, render (the refusals past
// them are TestRejectsBadCombinations' rows).
func TestDurationBounds(t *testing.T) {
	c := loadChart(t)
	for _, vals := range []map[string]any{
		{"sampleInterval": "100ms"},
		{"sampleInterval": "1m"},
		{"tuner": map[string]any{"interval": "0s"}}, // the tuner off: not given
		{"tuner": map[string]any{"mode": "recommend", "interval": "100ms"}},
		{"sampleInterval": "100ms", "tuner": map[string]any{"mode": "recommend", "interval": "100ms"}},
		{"sampleInterval": "1m", "tuner": map[string]any{"mode": "recommend", "interval": "15s"}},
		{"tuner": map[string]any{"mode": "recommend", "restoreTimeout": "1000ms"}},
		{"tuner": map[string]any{"restoreTimeout": "0s"}}, // the tuner off: not given
		{"tuner": map[string]any{"mode": "recommend", "pause": map[string]any{"enabled": true, "period": "1s", "max": "1000ms"}}},
		{"tuner": map[string]any{"mode": "recommend", "pause": map[string]any{"enabled": true, "period": "1m", "max": "59s999ms"}}},
		{"tuner": map[string]any{"mode": "recommend", "pause": map[string]any{"period": "0s", "max": "1h"}}}, // the pause off
		{"serviceMonitor": map[string]any{"interval": "10s", "scrapeTimeout": "10000ms"}},
		{"serviceMonitor": map[string]any{"interval": "1h", "scrapeTimeout": "59m"}},
		{"serviceMonitor": map[string]any{"enabled": false, "interval": "5s"}},
		// the longest a Go duration holds, in hours and in milliseconds
		{"tuner": map[string]any{"mode": "recommend", "restoreTimeout": "2562047h47m16s854ms"}},
		{"tuner": map[string]any{"mode": "recommend", "restoreTimeout": "9223372036854ms"}},
	} {
		if _, err := render(c, vals); err != nil {
			t.Errorf("values %v: %v", vals, err)
		}
	}
}

// TestDurationTooLong: a duration longer than a Go duration holds is
// refused naming its value, as the exporter and Prometheus would refuse
// it, before its milliseconds could overflow (into a negative grace
// period, or a comparison of two wrapped numbers).
func TestDurationTooLong(t *testing.T) {
	enforce := func(d string) map[string]any {
		return map[string]any{"securityContext": map[string]any{"runAsUser": 0},
			"tuner": map[string]any{"mode": "enforce", "journal": map[string]any{"hostPath": "/var/lib/vgpu_exporter"}, "restoreTimeout": d}}
	}
	checkCases(t, []valuesCase{
		{enforce("9000000000000000h"), "the release: tuner.restoreTimeout=9000000000000000h is longer than a duration can be"},
		{enforce("99999999999999999999h"), "the release: tuner.restoreTimeout=99999999999999999999h is longer"},
		{enforce("2562048h"), "tuner.restoreTimeout=2562048h is longer"},
		{enforce("9223372036855ms"), "tuner.restoreTimeout=9223372036855ms is longer"},
		// each term fits, their sum does not
		{enforce("2562047h2562047h"), "tuner.restoreTimeout=2562047h2562047h is longer"},
		{map[string]any{"sampleInterval": "3000000h"}, "sampleInterval=3000000h is longer"},
		{map[string]any{"tuner": map[string]any{"mode": "recommend", "interval": "3000000h"}}, "the release: tuner.interval=3000000h is longer"},
		{map[string]any{"nodePools": []any{map[string]any{"name": "a", "tuner": map[string]any{"mode": "recommend",
			"pause": map[string]any{"enabled": true, "period": "3000000h"}}}}}, "nodePools a: tuner.pause.period=3000000h is longer"},
		{map[string]any{"serviceMonitor": map[string]any{"interval": "3000000h"}}, "serviceMonitor.interval=3000000h is longer"},
	}, nil)
}
