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
	// a quantile finer than 0.1% carries its digits: 0.99995 at p99.95
	// is not 99.9% beside MET yes; on a tenth (or none) as FloorPercent
	for _, c := range []struct {
		v, q float64
		want string
	}{
		{0.99995, 0.9995, "99.99%"}, {0.99949, 0.9995, "99.94%"}, {0.9995, 0.9995, "99.95%"},
		{0.999949, 0.99995, "99.994%"}, {0.999999, 0.999999, "99.9999%"}, {0.9999999, 0.99999999, "99.9999%"},
		{0.989999, 0.99, "98.9%"}, {0.99995, 0.999, "99.9%"}, {0.29, 0.9, "29.0%"}, {0.57, 0, "57.0%"},
	} {
		if got := FloorPercentFor(c.v, c.q); got != c.want {
			t.Errorf("FloorPercentFor(%v, %v) = %q, want %q", c.v, c.q, got, c.want)
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
	// 2,499,875 good of 2,500,000 at p99.995 (0.99995): met, at 99.995%
	r = NewRecorder(Meta{Start: start})
	r.Add(WindowStats{Start: start, End: start.Add(time.Second), Tenants: []TenantWindow{{
		Tenant: "chat", GPU: "GPU-a", SLOQuantile: 0.99995, SLOTarget: time.Second,
		Completed: 2_500_000, Good: 2_499_875, Latencies: ms(1)}}})
	text.Reset()
	if err := WriteSummaryText(&text, r.Summary()); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`chat .* 99\.995% +yes `).Match(text.Bytes()) {
		t.Errorf("summary:\n%s\nwant chat at 99.995%%, met", &text)
	}
}
