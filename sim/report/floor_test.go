package report

import (
	"bytes"
	"regexp"
	"testing"
	"time"
)

// TestAttainmentShownRoundedDown: an attainment short of its quantile
// never prints as reaching it, in the summary's text or its JSON.
func TestAttainmentShownRoundedDown(t *testing.T) {
	for v, want := range map[float64]string{0: "0.0%", 0.07: "7.0%", 0.29: "29.0%", 0.5: "50.0%", 0.989999: "98.9%",
		0.99: "99.0%", 0.9999: "99.9%", 0.999999: "99.9%", 1: "100.0%", (0.99 + 0.989999) / 2: "98.9%"} {
		if got := FloorPercent(v); got != want {
			t.Errorf("FloorPercent(%v) = %q, want %q", v, got, want)
		}
	}
	// 2,474,999 good of 2,500,000 at p99: not met
	r := NewRecorder(Meta{Start: start})
	r.Add(WindowStats{Start: start, End: start.Add(time.Second), Tenants: []TenantWindow{{
		Tenant: "chat", GPU: "GPU-a", SLOQuantile: 0.99, SLOTarget: time.Second,
		Completed: 2_500_000, Good: 2_474_999, Latencies: ms(1)}}})
	s := r.Summary()
	var text, js bytes.Buffer
	if err := WriteSummaryText(&text, s); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`chat .* 98\.9% +no `).Match(text.Bytes()) {
		t.Errorf("summary:\n%s\nwant chat at 98.9%%, not met", &text)
	}
	if !bytes.Contains(js.Bytes(), []byte(`"attainment":0.989999,"slo_quantile":0.99`)) {
		t.Errorf("JSON:\n%s\nwant the attainment 0.989999", &js)
	}
}
