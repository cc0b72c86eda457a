package latency

import (
	"fmt"
	"testing"
	"time"
)

// TestGapSpreadOverWindow: a source serving 30 requests a second is
// unreachable for 60 s (the window is 30 s) while it keeps counting. The
// counters get every request; the window only the part of the gap inside
// it, at the gap's steady rate, and that part leaves the window as time
// passes: the window's requests over its length stay the rate.
func TestGapSpreadOverWindow(t *testing.T) {
	src := &Source{URL: "sim://chat", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
	tr := newSLOTracker(Spec{Name: "chat", Source: src, Objective: &Objective{Quantile: 0.5, Target: time.Second}, Window: 30 * time.Second})
	tr.setInterval(time.Second)
	t0 := time.Unix(1000, 0)
	scrape := func(sec int) {
		observeText(t, tr, t0.Add(time.Duration(sec)*time.Second), vllmModels("a", 30*sec, 0))
	}
	check := func(step string, total, window float64) {
		t.Helper()
		st := tr.Status()
		if !near(st.RequestsTotal, total) || !near(st.WindowRequests, window) || st.Attainment == nil || !near(*st.Attainment, 1) {
			t.Errorf("%s: requests %v window %v attainment %v; want %v %v 1", step, st.RequestsTotal, st.WindowRequests, st.Attainment, total, window)
		}
	}
	for sec := 0; sec <= 40; sec++ {
		scrape(sec)
	}
	check("steady", 1200, 900)
	for sec := 41; sec < 100; sec++ {
		tr.fail(t0.Add(time.Duration(sec)*time.Second), fmt.Errorf("connection refused"))
	}
	scrape(100)
	check("back after 60 s", 3000, 900)
	for sec := 101; sec <= 115; sec++ {
		scrape(sec)
	}
	check("15 s later", 3450, 900)
	for sec := 116; sec <= 140; sec++ {
		scrape(sec)
	}
	check("a window later", 4200, 900)

	// A gap shorter than the window: all of it is in the window, and it
	// leaves as it ages.
	for sec := 141; sec < 150; sec++ {
		tr.fail(t0.Add(time.Duration(sec)*time.Second), fmt.Errorf("connection refused"))
	}
	scrape(150)
	check("back after 10 s", 4500, 900)
	for sec := 151; sec <= 175; sec++ {
		scrape(sec)
	}
	check("25 s later", 5250, 900)
}
