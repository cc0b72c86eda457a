package dcgmexp

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A line's timestamp (Prometheus text: integer milliseconds) is kept with
// the series: the oldest of a GPU's kept lines.
func TestParseTimestamps(t *testing.T) {
	for _, tc := range []struct {
		name, page string
		want       time.Time
	}{
		{"none", `DCGM_FI_PROF_SM_ACTIVE{UUID="GPU-1"} 0.5`, time.Time{}},
		{"milliseconds", `DCGM_FI_PROF_SM_ACTIVE{UUID="GPU-1"} 0.5 1764900000123`, time.UnixMilli(1764900000123)},
		{"the oldest of a GPU's lines", `DCGM_FI_PROF_SM_ACTIVE{UUID="GPU-1"} 0.5 1764900000123
DCGM_FI_PROF_DRAM_ACTIVE{UUID="GPU-1"} 0.5 1764800000000
DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1"} 40`, time.UnixMilli(1764800000000)},
		{"1970", `DCGM_FI_PROF_SM_ACTIVE{UUID="GPU-1"} 0.5 1000`, time.UnixMilli(1000)},
		{"before 1970", `DCGM_FI_PROF_SM_ACTIVE{UUID="GPU-1"} 0.5 -62135596800000`, time.UnixMilli(0)},
		{"a repeated series' timestamp is not kept", `DCGM_FI_PROF_SM_ACTIVE{UUID="GPU-1",pod="a"} 0.5 1764900000000
DCGM_FI_PROF_SM_ACTIVE{UUID="GPU-1",pod="b"} 0.5 1000`, time.UnixMilli(1764900000000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, err := Parse(strings.NewReader(tc.page + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			v := f[Key{UUID: "GPU-1", GI: -1}]
			if v == nil || !v.Time.Equal(tc.want) || v.Time.IsZero() != tc.want.IsZero() {
				t.Errorf("fields %+v, want time %v", v, tc.want)
			}
		})
	}
}

// A series whose timestamp is older than the maximum age is stale: left
// out of the readings, logged with the URL; the page's age is served
// where its lines carry timestamps.
func TestStaleSeriesLeftOut(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	line := func(uuid string, age time.Duration) string {
		return fmt.Sprintf("DCGM_FI_PROF_SM_ACTIVE{UUID=%q} 0.5 %d\n", uuid, now.Add(-age).UnixMilli())
	}
	for _, tc := range []struct {
		name     string
		page     string
		maxAge   time.Duration
		wantA    bool    // GPU A gets its activity
		wantAge  float64 // -1: no age
		wantWarn bool
	}{
		{"no timestamps", "DCGM_FI_PROF_SM_ACTIVE{UUID=\"" + uuidA + "\"} 0.5\n", 0, true, -1, false},
		{"fresh", line(uuidA, 5*time.Second), 0, true, 5, false},
		{"1970", "DCGM_FI_PROF_SM_ACTIVE{UUID=\"" + uuidA + "\"} 0.5 0\n", 0, false, float64(now.Unix()), true},
		{"older than the default minute", line(uuidA, 61*time.Second), 0, false, 61, true},
		{"within a longer max age", line(uuidA, 61*time.Second), 2 * time.Minute, true, 61, false},
		{"only the stale GPU left out", line(uuidA, 10*time.Second) + line(uuidB, time.Hour), 0, true, 3600, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, []byte(tc.page), nil)
			var logs bytes.Buffer
			s, err := New(&fakeSource{rd: innerReadings()}, Options{URL: srv.URL + "/metrics", MaxAge: tc.maxAge,
				Clock: gpu.NewManualClock(now), Logger: log.NewLogfmtLogger(&logs)})
			if err != nil {
				t.Fatal(err)
			}
			rd, err := s.Sample(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := rd.Devices[0].Activity.Source == ActivityDCGM; got != tc.wantA {
				t.Errorf("GPU A activity %+v, want it served: %v", rd.Devices[0].Activity, tc.wantA)
			}
			if h := rd.DCGMExporter; h == nil || !h.Up || val(h.PageAgeSeconds) != tc.wantAge {
				t.Errorf("health %+v (age %v), want up, age %v", h, val(h.PageAgeSeconds), tc.wantAge)
			}
			warned := strings.Contains(logs.String(), "older than the maximum age") && strings.Contains(logs.String(), srv.URL)
			if warned != tc.wantWarn {
				t.Errorf("log %q, want a warning naming the URL: %v", logs.String(), tc.wantWarn)
			}
		})
	}
}
