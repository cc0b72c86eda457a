package dcgmexp

import (
	"fmt"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A series repeated on the page (two pods, or two sources behind a
// proxy) kept its first copy and that copy's timestamp: a stale first
// copy dropped the GPU though a fresh one followed. The newest copy is
// now kept where they carry timestamps; without, the first as before.
func TestRepeatedSeriesNewestKept(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	line := func(v float64, age time.Duration) string {
		ts := ""
		if age >= 0 {
			ts = fmt.Sprint(" ", now.Add(-age).UnixMilli())
		}
		return fmt.Sprintf("DCGM_FI_PROF_SM_ACTIVE{UUID=%q} %g%s\n", uuidA, v, ts)
	}
	const none = -1
	for _, tc := range []struct {
		name string
		page string
		want float64 // -1: left out
	}{
		{"stale, then fresh", line(0.1, 2*time.Minute) + line(0.7, time.Second), 0.7},
		{"fresh, then stale", line(0.7, time.Second) + line(0.1, 2*time.Minute), 0.7},
		{"both stale", line(0.1, 2*time.Minute) + line(0.7, 3*time.Minute), none},
		{"without timestamps: the first", line(0.1, none) + line(0.7, none), 0.1},
		{"stale, then without a timestamp", line(0.1, 2*time.Minute) + line(0.7, none), 0.7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &fakeSource{rd: &gpu.Readings{Devices: []gpu.Device{{UUID: uuidA, Up: true}}}}
			s := newSource(t, inner, Options{URL: serve(t, []byte(tc.page), nil).URL, Clock: gpu.NewManualClock(now)})
			rd := sampleOnce(t, s)
			got := rd.Devices[0].Activity.SMActive
			switch {
			case tc.want == none && got != nil:
				t.Errorf("SM active %g; want left out", *got)
			case tc.want != none && (got == nil || *got != tc.want):
				t.Errorf("SM active %s; want %g", show(got), tc.want)
			}
		})
	}
}
