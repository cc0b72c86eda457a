package dcgmexp

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// One limiter a kind bounded the warnings that name a GPU: GPU A's
// refused energy reading held back GPU B's for a minute, a page lacking A
// the warning that it then lacked B. Each GPU's warning of a kind is now
// bounded apart from the others': both GPUs' are logged, a second of the
// same GPU within the minute is not.
func TestWarningsPerGPU(t *testing.T) {
	const s, w = 777_600_000_000, 300_000 // mJ; mJ a second at 300 W
	energy := func(a, b int64) string {
		return fmt.Sprintf("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{UUID=%q} %d\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{UUID=%q} %d\n", uuidA, a, uuidB, b)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	active := func(uuid string, age time.Duration) string {
		return fmt.Sprintf("DCGM_FI_PROF_SM_ACTIVE{UUID=%q} 0.5 %d\n", uuid, t0.Add(-age).UnixMilli())
	}
	for _, tc := range []struct {
		name  string
		pages []string // one a second
		msg   string   // the warning's
		per   func(uuid string) string
	}{
		{"energy refused", []string{energy(s, s), energy(0, s+w), energy(s+2*w, 0), energy(0, 0)}, "energy counter refused",
			func(u string) string { return "uuid=" + u }},
		{"GPUs missing", []string{active(uuidB, 0), active(uuidA, 0), active(uuidB, 0), active(uuidA, 0)}, "no current DCGM fields",
			func(u string) string { return "missing=" + u }},
		// the series of A, then of B, older than the maximum age
		{"stale series", []string{active(uuidA, time.Hour) + active(uuidB, 0), active(uuidA, 0) + active(uuidB, time.Hour),
			active(uuidA, time.Hour) + active(uuidB, 0)}, "older than the maximum age",
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := gpu.NewManualClock(t0)
			var logs bytes.Buffer
			inner := &fakeSource{}
			src := newSource(t, inner, Options{URL: pages(t, tc.pages...).URL, Clock: clock, Logger: log.NewLogfmtLogger(&logs)})
			for range tc.pages {
				inner.rd = &gpu.Readings{Time: clock.Now(), Devices: []gpu.Device{{UUID: uuidA, Up: true}, {UUID: uuidB, Up: true}}}
				sampleOnce(t, src)
				clock.Advance(time.Second)
			}
			var lines []string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, tc.msg) {
					lines = append(lines, l)
				}
			}
			if len(lines) != 2 {
				t.Fatalf("%d warnings, want 2, one a GPU; log:\n%s", len(lines), logs.String())
			}
			if tc.per != nil {
				for i, u := range []string{uuidA, uuidB} {
					if !strings.Contains(lines[i], tc.per(u)) {
						t.Errorf("warning %d: %s; want it naming %s", i, lines[i], tc.per(u))
					}
				}
			}
		})
	}
}
