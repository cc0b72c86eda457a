package collector

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// builtin are the collectors this package ships.
var builtin = []string{"exporter", "gpu", "mig", "tenant", "vgpu"}

func static(s *tenant.Snapshot) func() *tenant.Snapshot {
	return func() *tenant.Snapshot { return s }
}

// withoutDurations gathers e through a pedantic registry (which checks
// every metric against its descriptor) and drops the scrape duration, the
// one value that differs from run to run.
func withoutDurations(t testing.TB, e *Exporter) prometheus.Gatherer {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(e); err != nil {
		t.Fatalf("register: %v", err)
	}
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := reg.Gather()
		return slices.DeleteFunc(mfs, func(mf *dto.MetricFamily) bool {
			return mf.GetName() == "vgpu_scrape_collector_duration_seconds"
		}), err
	})
}

func newExporter(t testing.TB, s *tenant.Snapshot, filters ...string) *Exporter {
	t.Helper()
	e, err := NewExporter(static(s), log.NewNopLogger(), filters...)
	if err != nil {
		t.Fatalf("NewExporter(%v): %v", filters, err)
	}
	return e
}

// format renders everything g gathers in the text exposition format.
func format(t testing.TB, g prometheus.Gatherer) []byte {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatalf("encode: %v", err)
		}
	}
	return buf.Bytes()
}

// sampleLines renders a gatherer's samples as exposition lines without
// HELP/TYPE, for substring assertions.
func sampleLines(t testing.TB, g prometheus.Gatherer) string {
	t.Helper()
	b := format(t, g)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n") + "\n"
}

func TestCollectors(t *testing.T) {
	got := Collectors()
	for _, n := range builtin {
		if !slices.Contains(got, n) {
			t.Errorf("Collectors() = %v, missing %q", got, n)
		}
	}
	if !sort.StringsAreSorted(got) {
		t.Errorf("Collectors() = %v, not sorted", got)
	}
}

// TestGolden compares each collector's output for representative
// snapshots with testdata/<name>.prom (regenerate with -update and review
// the diff).
func TestGolden(t *testing.T) {
	tests := []struct {
		name      string
		collector string
		snap      *tenant.Snapshot
	}{
		{"gpu_mig_device", "gpu", &tenant.Snapshot{Readings: readings(migDevice()), Events: richSnapshot().Events[:1]}},
		{"gpu_time_sliced_device", "gpu", &tenant.Snapshot{Readings: readings(timeSlicedDevice())}},
		{"gpu_down_device", "gpu", &tenant.Snapshot{Readings: readings(downDevice())}},
		{"gpu_nil_fields", "gpu", &tenant.Snapshot{Readings: readings(bareDevice())}},
		{"gpu_no_snapshot", "gpu", nil},
		{"mig_mig_device", "mig", &tenant.Snapshot{Readings: readings(migDevice())}},
		{"mig_time_sliced_device", "mig", &tenant.Snapshot{Readings: readings(timeSlicedDevice())}},
		{"vgpu_vgpu_device", "vgpu", &tenant.Snapshot{Readings: readings(vgpuDevice()), VGPURunlists: richSnapshot().VGPURunlists}},
		{"tenant_rich", "tenant", richSnapshot()},
		{"exporter_rich", "exporter", richSnapshot()},
		{"exporter_minimal", "exporter", &tenant.Snapshot{Sampler: gpu.SamplerStats{SamplesTotal: 1, ErrorsTotal: 1, ConsecutiveErr: 1}}},
		{"all_no_snapshot", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var filters []string
			if tc.collector != "" {
				filters = []string{tc.collector}
			}
			g := withoutDurations(t, newExporter(t, tc.snap, filters...))
			path := filepath.Join("testdata", tc.name+".prom")
			if *update {
				b := format(t, g)
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := testutil.GatherAndCompare(g, f); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestAbsentNotZero checks that readings a backend could not take are
// absent series, not zeros, and that a lost GPU reports only its identity.
func TestAbsentNotZero(t *testing.T) {
	tests := []struct {
		name    string
		dev     gpu.Device
		present []string
		absent  []string
	}{
		{"nil fields", bareDevice(),
			[]string{`vgpu_gpu_up{gpu="4",uuid="GPU-4444"} 1`, `vgpu_gpu_processes{gpu="4",uuid="GPU-4444"} 0`},
			[]string{"vgpu_gpu_sm_active_ratio", "vgpu_gpu_utilization_ratio", "vgpu_gpu_power_watts", "vgpu_gpu_memory_total_bytes",
				"vgpu_gpu_energy_joules_total", "vgpu_gpu_ecc_errors_total", "vgpu_gpu_context_switches_total", "vgpu_gpu_temperature_celsius",
				"vgpu_gpu_clocks_locked", "vgpu_gpu_persistence_mode", "vgpu_gpu_compute_mode_info", "vgpu_gpu_compute_timeslice_info", "vgpu_gpu_streaming_multiprocessors",
				"vgpu_gpu_clock_event_reasons", "vgpu_gpu_clock_event_reason_active"}},
		{"down", downDevice(),
			[]string{`vgpu_gpu_up{gpu="3",uuid="GPU-3333"} 0`, `vgpu_gpu_info{`},
			[]string{"vgpu_gpu_memory_total_bytes", "vgpu_gpu_processes", "vgpu_gpu_clock_event_reasons"}},
		{"time-sliced without profiling", timeSlicedDevice(),
			[]string{`vgpu_gpu_utilization_ratio{gpu="1",uuid="GPU-1111"} 1`, `vgpu_gpu_context_switches_total{gpu="1",uuid="GPU-1111"} 42`},
			[]string{"vgpu_gpu_sm_active_ratio", "vgpu_gpu_dram_active_ratio", "vgpu_gpu_tensor_active_ratio", "vgpu_gpu_context_switch_cycles_total"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := sampleLines(t, withoutDurations(t, newExporter(t, &tenant.Snapshot{Readings: readings(tc.dev)}, "gpu")))
			for _, p := range tc.present {
				if !strings.Contains(out, p) {
					t.Errorf("missing %s in\n%s", p, out)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(out, a+"{") {
					t.Errorf("%s present, want absent, in\n%s", a, out)
				}
			}
		})
	}
}

func TestFilters(t *testing.T) {
	tests := []struct {
		filters []string
		want    []string
		wantErr string
	}{
		{nil, builtin, ""},
		{[]string{"gpu"}, []string{"gpu"}, ""},
		{[]string{"tenant", "gpu", "tenant"}, []string{"gpu", "tenant"}, ""},
		{[]string{"gpu", "nope"}, nil, `unknown collector "nope"`},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.filters, ","), func(t *testing.T) {
			e, err := NewExporter(static(richSnapshot()), nil, tc.filters...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := e.Names(); !slices.Equal(got, tc.want) {
				t.Errorf("Names() = %v, want %v", got, tc.want)
			}
			out := sampleLines(t, withoutDurations(t, e))
			for _, n := range builtin {
				line := `vgpu_scrape_collector_success{collector="` + n + `"} 1`
				if got, want := strings.Contains(out, line), slices.Contains(tc.want, n); got != want {
					t.Errorf("%s present = %v, want %v", line, got, want)
				}
			}
			if got, want := strings.Contains(out, "vgpu_gpu_up{"), slices.Contains(tc.want, "gpu"); got != want {
				t.Errorf("gpu metrics present = %v, want %v", got, want)
			}
		})
	}
	if _, err := NewExporter(nil, nil); err == nil {
		t.Error("NewExporter(nil) succeeded")
	}
}

// fakeCollector emits one metric and then returns err or panics.
type fakeCollector struct {
	desc  *prometheus.Desc
	err   error
	panic bool
}

func (f *fakeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }

func (f *fakeCollector) Update(_ *tenant.Snapshot, ch chan<- prometheus.Metric) error {
	ch <- prometheus.MustNewConstMetric(f.desc, prometheus.GaugeValue, 1)
	if f.panic {
		panic("fakeCollector: deliberate failure")
	}
	return f.err
}

// withTestCollector registers a collector for the duration of a test.
func withTestCollector(t *testing.T, name string, c Collector) {
	t.Helper()
	addCollector(name, true, func(log.Logger) (Collector, error) { return c, nil })
	t.Cleanup(func() {
		regMu.Lock()
		delete(registrations, name)
		regMu.Unlock()
	})
}

func TestCollectorErrorIsolated(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    *fakeCollector
	}{
		{"error", &fakeCollector{err: errors.New("broken")}},
		{"panic", &fakeCollector{panic: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.desc = prometheus.NewDesc("vgpu_test_partial", "Emitted before the failure.", nil, nil)
			withTestCollector(t, "zz_failing", tc.c)
			var logged strings.Builder
			e, err := NewExporter(static(richSnapshot()), log.NewLogfmtLogger(log.NewSyncWriter(&logged)))
			if err != nil {
				t.Fatal(err)
			}
			g := withoutDurations(t, e)
			for range 3 {
				out := sampleLines(t, g)
				if !strings.Contains(out, `vgpu_scrape_collector_success{collector="zz_failing"} 0`) {
					t.Errorf("failing collector not reported as failed:\n%s", out)
				}
				for _, n := range builtin {
					if !strings.Contains(out, `vgpu_scrape_collector_success{collector="`+n+`"} 1`) {
						t.Errorf("collector %s failed along with zz_failing", n)
					}
				}
				if !strings.Contains(out, "vgpu_test_partial 1") || !strings.Contains(out, "vgpu_gpu_up{") {
					t.Errorf("metrics missing after a collector failure:\n%s", out)
				}
			}
			if n := strings.Count(logged.String(), "level=error"); n != 1 {
				t.Errorf("logged %d errors over 3 failing scrapes, want 1 (repeats at debug):\n%s", n, logged.String())
			}
		})
	}
}

func TestBadSnapshotFailsOnlyItsCollector(t *testing.T) {
	dup := migDevice()
	dup.MIG = append(dup.MIG, dup.MIG[0])
	bad := timeSlicedDevice()
	bad.Name = "bad\xff name"
	s := richSnapshot()
	s.Readings = readings(dup, bad)
	s.Usage = append(s.Usage, s.Usage[0])
	out := sampleLines(t, withoutDurations(t, newExporter(t, s)))
	for _, want := range []string{
		`vgpu_scrape_collector_success{collector="mig"} 0`,
		`vgpu_scrape_collector_success{collector="gpu"} 0`,
		`vgpu_scrape_collector_success{collector="tenant"} 0`,
		`vgpu_scrape_collector_success{collector="vgpu"} 1`,
		`vgpu_scrape_collector_success{collector="exporter"} 1`,
		// The first copy of a duplicate and the sound metrics survive.
		`vgpu_mig_instance_info{compute_instance="0",gpu="0",gpu_instance="1",mig_uuid="MIG-aaaa",profile="3g.71gb",uuid="GPU-0000"} 1`,
		`vgpu_gpu_up{gpu="1",uuid="GPU-1111"} 1`,
		`vgpu_tenant_processes{class="latency",gpu="0",gpu_instance="1",tenant="chat",uuid="GPU-0000"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
}

func TestConcurrentScrapes(t *testing.T) {
	var store tenant.Store
	e, err := NewExporter(store.Load, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				if (i+j)%5 == 0 {
					store.Store(richSnapshot())
				}
				if _, err := reg.Gather(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
