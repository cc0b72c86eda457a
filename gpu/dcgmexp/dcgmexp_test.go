package dcgmexp

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

const (
	uuidA = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
	uuidB = "GPU-bbbbbbbb-0000-0000-0000-000000000000"
	uuidC = "GPU-cccccccc-0000-0000-0000-000000000000"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func val(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		file     string
		wantErr  string
		warnings int
		check    func(t *testing.T, f Fields)
	}{
		{"dcgm-k8s.prom", "", 0, func(t *testing.T, f Fields) {
			a := f[Key{UUID: uuidA, GI: -1}]
			if a == nil {
				t.Fatal("GPU A missing")
			}
			for name, got := range map[string]float64{
				"SMActive": val(a.SMActive), "SMOccupancy": val(a.SMOccupancy), "DRAMActive": val(a.DRAMActive),
				"TensorActive": val(a.TensorActive), "GPUUtil": val(a.GPUUtil), "MemCopyUtil": val(a.MemCopyUtil),
				"SMClockHz": val(a.SMClockHz), "MemClockHz": val(a.MemClockHz), "PowerWatts": val(a.PowerWatts),
				"TemperatureC": val(a.TemperatureC), "EnergyJoules": val(a.EnergyJoules), "FBUsedBytes": val(a.FBUsedBytes),
			} {
				want := map[string]float64{"SMActive": 0.812, "SMOccupancy": 0.254, "DRAMActive": 0.61, "TensorActive": 0.333,
					"GPUUtil": 0.87, "MemCopyUtil": 0.35, "SMClockHz": 1410e6, "MemClockHz": 1215e6, "PowerWatts": 312.5,
					"TemperatureC": 41, "EnergyJoules": 7654.321, "FBUsedBytes": 10536 << 20}[name]
				if diff := got - want; diff > 1e-9 || diff < -1e-9 {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
			b := f[Key{UUID: uuidB, GI: -1}]
			if b == nil || val(b.SMActive) != 0 || val(b.SMClockHz) != 210e6 || b.SMOccupancy != nil {
				t.Errorf("GPU B %+v", b)
			}
			if len(f) != 2 {
				t.Errorf("%d keys, want 2", len(f))
			}
		}},
		{"dcgm-mig.prom", "", 0, func(t *testing.T, f Fields) {
			g1, g2 := f[Key{UUID: uuidC, GI: 1}], f[Key{UUID: uuidC, GI: 2}]
			if g1 == nil || g2 == nil || val(g1.SMActive) != 0.5 || val(g1.DRAMActive) != 0.4 || val(g2.SMActive) != 0.25 || g2.DRAMActive != nil {
				t.Errorf("MIG fields %+v %+v", g1, g2)
			}
			if f[Key{UUID: uuidC, GI: -1}] != nil {
				t.Errorf("MIG series attributed to the whole GPU")
			}
		}},
		{"malformed-labels.prom", "", 5, func(t *testing.T, f Fields) {
			if len(f) != 1 {
				t.Errorf("kept %d keys, want 1", len(f))
			}
			// a ratio above 1 by rounding is clamped, one of 7 skipped
			if v := f[Key{UUID: "GPU-99999999-0000-0000-0000-000000000000", GI: -1}]; v == nil || val(v.SMActive) != 1 {
				t.Errorf("clamped value %+v", v)
			}
		}},
		{"malformed-syntax.prom", "line 3", 0, nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, warnings, err := Parse(bytes.NewReader(readFixture(t, tc.file)))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != tc.warnings {
				t.Errorf("warnings = %q, want %d", warnings, tc.warnings)
			}
			tc.check(t, f)
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"dcgm-k8s.prom", "dcgm-mig.prom", "dcgm-mixed.prom", "malformed-labels.prom", "malformed-syntax.prom"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fields, _, err := Parse(bytes.NewReader(data))
		if err == nil {
			checkFields(t, fields)
		}
	})
}

// checkFields fails t when fields hold a bad key or an unusable value.
func checkFields(t *testing.T, fields Fields) {
	t.Helper()
	for k, v := range fields {
		if k.UUID == "" || k.GI < -1 {
			t.Fatalf("bad key %+v", k)
		}
		for _, p := range []*float64{v.SMActive, v.SMOccupancy, v.DRAMActive, v.TensorActive, v.GPUUtil, v.MemCopyUtil} {
			if p != nil && (*p < 0 || *p > 1) {
				t.Fatalf("ratio out of range: %v", *p)
			}
		}
		for _, p := range []*float64{v.SMClockHz, v.MemClockHz, v.PowerWatts, v.TemperatureC, v.EnergyJoules, v.FBUsedBytes, v.FBFreeBytes} {
			if p != nil && (*p < 0 || math.IsNaN(*p) || math.IsInf(*p, 0)) {
				t.Fatalf("unusable value kept: %v", *p)
			}
		}
	}
}

// fakeSource is an inner gpu.Source with fixed readings.
type fakeSource struct {
	rd     *gpu.Readings
	err    error
	closed bool
}

func (f *fakeSource) Name() string { return "nvml" }
func (f *fakeSource) Sample(context.Context) (*gpu.Readings, error) {
	return f.rd, f.err
}
func (f *fakeSource) Close() error { f.closed = true; return nil }

func innerReadings() *gpu.Readings {
	return &gpu.Readings{Backend: "nvml", Devices: []gpu.Device{
		// A: pre-Hopper, no GPM, no SM clock from NVML
		{Index: 0, UUID: uuidA, Up: true, MemoryTotalBytes: 40 << 30, PowerWatts: gpu.Float(300)},
		// B: has its own GPM figures: kept
		{Index: 1, UUID: uuidB, Up: true, Activity: gpu.Activity{SMActive: gpu.Float(0.9), Source: "gpm"}},
		// C: MIG without GPM per instance
		{Index: 2, UUID: uuidC, Up: true, MIGEnabled: true, MIG: []gpu.MIGInstance{
			{GPUInstanceID: 1, Profile: "3g.71gb"}, {GPUInstanceID: 2, Profile: "4g.71gb", MemoryTotalBytes: 71 << 30}}},
		// D: down: untouched
		{Index: 3, UUID: "GPU-dead", Up: false, Err: "lost"},
		// A in MIG mode with an instance whose ID NVML did not give: it
		// must not take the whole GPU's series.
		{Index: 4, UUID: uuidA, Up: true, MIGEnabled: true, Activity: gpu.Activity{SMActive: gpu.Float(0.1), Source: "gpm"},
			MIG: []gpu.MIGInstance{{GPUInstanceID: -1}}},
	}}
}

func serve(t *testing.T, body []byte, hits *atomic.Int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits != nil {
			hits.Add(1)
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSourceMerges(t *testing.T) {
	body := readFixture(t, "dcgm-mixed.prom") // the two other fixtures, families merged
	srv := serve(t, body, nil)
	inner := &fakeSource{rd: innerReadings()}
	before := innerReadings()
	s, err := New(inner, Options{URL: srv.URL + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Inner() != gpu.Source(inner) {
		t.Errorf("Inner is not the wrapped source")
	}
	if s.Name() != "nvml+dcgm-exporter" {
		t.Errorf("Name = %q", s.Name())
	}
	rd, err := s.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !s.Up() || s.ScrapeErrorsTotal() != 0 || rd.Backend != "nvml+dcgm-exporter" {
		t.Errorf("up %v errors %d backend %q", s.Up(), s.ScrapeErrorsTotal(), rd.Backend)
	}
	if h := rd.DCGMExporter; h == nil || !h.Up || h.ScrapeErrorsTotal != 0 {
		t.Errorf("readings carry health %+v, want up with 0 errors", h)
	}
	a := rd.Devices[0]
	if a.Activity.Source != "dcgm" || val(a.Activity.SMActive) != 0.812 || val(a.Activity.TensorActive) != 0.333 {
		t.Errorf("A activity %+v", a.Activity)
	}
	if val(a.SMClockHz) != 1410e6 || val(a.PowerWatts) != 300 || val(a.GPUUtil) != 0.87 {
		t.Errorf("A fields: SM clock %v, power %v (NVML's kept), util %v", val(a.SMClockHz), val(a.PowerWatts), val(a.GPUUtil))
	}
	if a.MemoryTotalBytes != 40<<30 {
		t.Errorf("A memory overwritten: %d", a.MemoryTotalBytes)
	}
	if b := rd.Devices[1]; b.Activity.Source != "gpm" || val(b.Activity.SMActive) != 0.9 {
		t.Errorf("B's own GPM replaced: %+v", b.Activity)
	}
	c := rd.Devices[2]
	if c.MIG[0].Activity.Source != "dcgm" || val(c.MIG[0].Activity.SMActive) != 0.5 || val(c.MIG[0].Activity.DRAMActive) != 0.4 ||
		c.MIG[0].MemoryUsedBytes != 2048<<20 || c.MIG[0].MemoryTotalBytes != (2048+70656)<<20 {
		t.Errorf("MIG 1 %+v", c.MIG[0])
	}
	if val(c.MIG[1].Activity.SMActive) != 0.25 || c.MIG[1].MemoryTotalBytes != 71<<30 {
		t.Errorf("MIG 2 %+v", c.MIG[1])
	}
	if c.Activity.Source != ActivityDCGM || c.Activity.SMActive != nil || c.Activity.DRAMActive != nil {
		t.Errorf("MIG GPU activity %+v: want no whole-GPU ratios from instance series, Source naming the instances'", c.Activity)
	}
	if d := rd.Devices[3]; d.Up || d.Activity.Source != "" {
		t.Errorf("down GPU changed")
	}
	if m := rd.Devices[4].MIG[0]; m.Activity.Source != "" || m.MemoryTotalBytes != 0 {
		t.Errorf("MIG instance without an ID took the whole GPU's series: %+v", m)
	}
	// The inner readings are not modified.
	in := inner.rd
	if in.Devices[0].Activity.Source != "" || in.Devices[2].MIG[0].Activity.Source != "" || in.Backend != before.Backend {
		t.Errorf("inner readings modified")
	}
	if err := s.Close(); err != nil || !inner.closed {
		t.Errorf("Close did not close the inner source")
	}
}

func TestSourceFailures(t *testing.T) {
	big := bytes.Repeat([]byte("# padding comment line\n"), 1000)
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		opts    Options
		wantLog string
	}{
		{"status 500", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }, Options{}, "500"},
		{"too large", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(big) }, Options{MaxBytes: 1000}, "larger than 1000 bytes"},
		{"malformed", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("DCGM_FI_PROF_SM_ACTIVE{UUID=\"x\" 1\n"))
		}, Options{}, "line 1"},
		{"timeout", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}, Options{Timeout: 20 * time.Millisecond}, "deadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			var logs bytes.Buffer
			opts := tc.opts
			opts.URL = srv.URL + "/metrics"
			opts.Logger = log.NewLogfmtLogger(log.NewSyncWriter(&logs))
			inner := &fakeSource{rd: innerReadings()}
			s, err := New(inner, opts)
			if err != nil {
				t.Fatal(err)
			}
			for k := 1; k <= 3; k++ {
				rd, err := s.Sample(context.Background())
				if err != nil || rd == nil || &rd.Devices[0] != &inner.rd.Devices[0] {
					t.Fatalf("readings not passed through on a failed scrape: %v", err)
				}
				// the backend's name is the configuration's, whatever the
				// scrape's outcome: vgpu_backend_info{backend} must not
				// change with dcgm-exporter's health
				if rd.Backend != "nvml+dcgm-exporter" {
					t.Errorf("backend %q on a failed scrape, want nvml+dcgm-exporter", rd.Backend)
				}
				// after a timeout the scrapes run off the sampling path
				// (TestHangingExporterOffTheSamplingPath), each counted as
				// it ends: at least the first by now, at most one a sample
				lo, hi := uint64(k), uint64(k)
				if tc.name == "timeout" {
					lo = 1
				}
				if n := s.ScrapeErrorsTotal(); s.Up() || n < lo || n > hi {
					t.Errorf("up %v errors %d, want down with %d to %d", s.Up(), n, lo, hi)
				}
				if h := rd.DCGMExporter; h == nil || h.Up || h.ScrapeErrorsTotal < lo || h.ScrapeErrorsTotal > hi {
					t.Errorf("readings carry health %+v, want down with %d to %d errors", h, lo, hi)
				}
				if inner.rd.DCGMExporter != nil {
					t.Errorf("inner readings modified")
				}
			}
			if n := strings.Count(logs.String(), "scraping dcgm-exporter failed"); n != 1 || !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("log (%d lines) = %s", n, logs.String())
			}
		})
	}
}

func TestSourceRecovers(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	body := readFixture(t, "dcgm-k8s.prom")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	s, err := New(&fakeSource{rd: innerReadings()}, Options{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	rd, _ := s.Sample(context.Background())
	if rd.Devices[0].Activity.Source != "" || s.Up() {
		t.Fatal("activity while dcgm-exporter down")
	}
	fail.Store(false)
	rd, _ = s.Sample(context.Background())
	if rd.Devices[0].Activity.Source != "dcgm" || !s.Up() || s.ScrapeErrorsTotal() != 1 {
		t.Errorf("no recovery: up %v errors %d", s.Up(), s.ScrapeErrorsTotal())
	}
}

func TestInnerErrorPassesThrough(t *testing.T) {
	var hits atomic.Int64
	srv := serve(t, readFixture(t, "dcgm-k8s.prom"), &hits)
	want := errors.New("nvml gone")
	s, _ := New(&fakeSource{err: want}, Options{URL: srv.URL})
	if _, err := s.Sample(context.Background()); !errors.Is(err, want) {
		t.Fatalf("err = %v", err)
	}
	if hits.Load() != 0 {
		t.Errorf("scraped although the inner source failed")
	}
}

func TestNewValidates(t *testing.T) {
	inner := &fakeSource{}
	for _, tc := range []struct {
		inner gpu.Source
		opts  Options
		want  string
	}{
		{nil, Options{URL: "http://x:9400/metrics"}, "no inner source"},
		{inner, Options{URL: "localhost:9400"}, "want http(s)"},
		{inner, Options{URL: "ftp://x/metrics"}, "want http(s)"},
		{inner, Options{URL: "http://%zz"}, "dcgm-exporter URL"},
		{inner, Options{URL: "http://x:9400/metrics", Timeout: -1}, "negative"},
	} {
		if _, err := New(tc.inner, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want %q", tc.opts, err, tc.want)
		}
	}
}

// TestGREngineFallback: a page without DCGM_FI_PROF_SM_ACTIVE gives SM
// activity from DCGM_FI_PROF_GR_ENGINE_ACTIVE, named as such; a page with
// both uses SM_ACTIVE.
func TestGREngineFallback(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		wantSM     float64
		wantSource string
	}{
		{"graphics engine only", string(readFixture(t, "dcgm-default-counters.prom")), 0.875, ActivityDCGMGREngine},
		{"both: SM active wins", string(readFixture(t, "dcgm-default-counters.prom")) +
			"DCGM_FI_PROF_SM_ACTIVE{UUID=\"" + uuidA + "\"} 0.625\n", 0.625, ActivityDCGM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, []byte(tc.body), nil)
			s, err := New(&fakeSource{rd: innerReadings()}, Options{URL: srv.URL + "/metrics"})
			if err != nil {
				t.Fatal(err)
			}
			rd, err := s.Sample(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			a := rd.Devices[0].Activity
			if a.Source != tc.wantSource || val(a.SMActive) != tc.wantSM || val(a.DRAMActive) != 0.375 || val(a.TensorActive) != 0.25 || a.SMOccupancy != nil {
				t.Errorf("GPU A activity %+v (SM %v), want SM %v from %q", a, val(a.SMActive), tc.wantSM, tc.wantSource)
			}
			if m := rd.Devices[2].MIG[0].Activity; m.Source != ActivityDCGMGREngine || val(m.SMActive) != 0.5 {
				t.Errorf("MIG instance activity %+v, want SM 0.5 from %q", m, ActivityDCGMGREngine)
			}
		})
	}
}
