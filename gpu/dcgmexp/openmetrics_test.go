package dcgmexp

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

func TestFormatOf(t *testing.T) {
	for ct, want := range map[string]Format{
		"":                             FormatText,
		"text/plain; version=0.0.4":    FormatText,
		"application/openmetrics-text": FormatOpenMetrics,
		"application/openmetrics-text; version=1.0.0; charset=utf-8": FormatOpenMetrics,
		"Application/OpenMetrics-Text":                               FormatOpenMetrics,
		"application/openmetrics-textual":                            FormatText,
	} {
		if got := FormatOf(ct); got != want {
			t.Errorf("FormatOf(%q) = %v, want %v", ct, got, want)
		}
	}
}

// OpenMetrics timestamps are seconds and may be fractional; text format
// timestamps are integer milliseconds. A sample's exemplar is ignored in
// OpenMetrics.
func TestParseTimestampUnits(t *testing.T) {
	const series = `DCGM_FI_PROF_SM_ACTIVE{UUID="GPU-1"} 0.41 `
	for _, tc := range []struct {
		name    string
		format  Format
		ts      string
		want    time.Time
		wantErr string
	}{
		{"OpenMetrics fractional seconds", FormatOpenMetrics, "1764900000.123", time.UnixMilli(1764900000123), ""},
		{"OpenMetrics integer seconds", FormatOpenMetrics, "1764900000", time.UnixMilli(1764900000000), ""},
		{"OpenMetrics exponent", FormatOpenMetrics, "1.7649e9", time.UnixMilli(1764900000000), ""},
		{"OpenMetrics exemplar", FormatOpenMetrics, `1764900000 # {trace_id="a"} 1 1764900000`, time.UnixMilli(1764900000000), ""},
		{"OpenMetrics NaN", FormatOpenMetrics, "NaN", time.Time{}, "invalid timestamp"},
		{"OpenMetrics past int64 milliseconds", FormatOpenMetrics, "1e16", time.Time{}, "invalid timestamp"},
		{"text milliseconds", FormatText, "1764900000123", time.UnixMilli(1764900000123), ""},
		{"text fractional", FormatText, "1764900000.123", time.Time{}, "invalid timestamp"},
		{"text exemplar", FormatText, `1764900000 # {trace_id="a"} 1`, time.Time{}, "want a value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, err := ParseFormat(context.Background(), strings.NewReader(series+tc.ts+"\n# EOF\n"), tc.format)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "line 1") {
					t.Fatalf("err = %v, want %q naming line 1", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v := f[Key{UUID: "GPU-1", GI: -1}]; v == nil || val(v.SMActive) != 0.41 || !v.Time.Equal(tc.want) {
				t.Errorf("fields %+v, want 0.41 at %v", v, tc.want)
			}
		})
	}
}

// A dcgm-exporter (or a proxy) answering in OpenMetrics with fractional
// timestamps is read by its Content-Type: the page is not refused.
func TestSourceReadsOpenMetrics(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	page := fmt.Sprintf("DCGM_FI_PROF_SM_ACTIVE{UUID=%q} 0.41 %d.5\n# EOF\n", uuidA, now.Unix()-3) // 2.5 s old
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
		_, _ = w.Write([]byte(page))
	}))
	defer srv.Close()
	s, err := New(&fakeSource{rd: innerReadings()}, Options{URL: srv.URL, Clock: gpu.NewManualClock(now)})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := s.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h := rd.DCGMExporter; !h.Up || val(h.PageAgeSeconds) != 2.5 || val(rd.Devices[0].Activity.SMActive) != 0.41 {
		t.Errorf("health %+v (age %v), SM active %v: want up, 2.5 s old, 0.41", h, val(h.PageAgeSeconds), val(rd.Devices[0].Activity.SMActive))
	}
}

func FuzzParseOpenMetrics(f *testing.F) {
	for _, name := range []string{"dcgm-k8s.prom", "dcgm-mig.prom"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("DCGM_FI_PROF_SM_ACTIVE{UUID=\"GPU-1\"} 0.41 1764900000.123 # {a=\"b\"} 1\n# EOF\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fields, _, err := ParseFormat(context.Background(), bytes.NewReader(data), FormatOpenMetrics)
		if err == nil {
			checkFields(t, fields)
		}
	})
}
