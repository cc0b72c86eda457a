package collector

import (
	"bytes"
	"errors"
	"math"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// oddSnapshot is richSnapshot with label values the text format escapes
// and values it spells out.
func oddSnapshot() *tenant.Snapshot {
	s := richSnapshot()
	odd := "q\"uo\\te\nd é"
	s.Tenants[0].Name = odd
	s.Usage[0].Tenant = odd
	s.Usage[0].SMActive = gpu.Float(math.NaN())
	s.Usage[0].DRAMActive = gpu.Float(math.Inf(1))
	s.Usage[1].SMActive = gpu.Float(math.Inf(-1))
	s.Usage[1].DRAMActive = gpu.Float(-1)
	s.Usage[1].KernelBusy = gpu.Float(1e-300)
	s.Readings.Devices[0].Name = `NVIDIA "H100"`
	return s
}

// durations drops the values of the collectors' durations, the one thing
// that differs from one collection to the next.
var durations = regexp.MustCompile(`(?m)^(vgpu_scrape_collector_duration_seconds\{[^}]*\}) .*$`)

// registryText renders c as encoding what a registry gathers does,
// errors or not (what gathered well is served).
func registryText(t *testing.T, c prometheus.Collector) []byte {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, _ := reg.Gather()
	return durations.ReplaceAll(format(t, prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return mfs, nil
	})), []byte("$1 D"))
}

// TestTextMatchesRegistry renders collectors with Text and through a
// registry and the text encoder: the bytes are the same, whether the
// series are new or sent before, and whatever the values and labels.
func TestTextMatchesRegistry(t *testing.T) {
	var cur atomic.Pointer[tenant.Snapshot]
	e, err := NewExporter(cur.Load, nil)
	if err != nil {
		t.Fatal(err)
	}
	status := func() *tuner.Status { return richTunerStatus() }
	for _, tc := range []struct {
		name  string
		c     prometheus.Collector
		snaps []func() *tenant.Snapshot
	}{
		{"exporter", e, []func() *tenant.Snapshot{
			richSnapshot, moved, oddSnapshot, churned, oddSnapshot,
			func() *tenant.Snapshot { return &tenant.Snapshot{} },
			func() *tenant.Snapshot { return bigSnapshot(8, 32) },
		}},
		{"no snapshot", e, []func() *tenant.Snapshot{func() *tenant.Snapshot { return nil }}},
		{"with the tuner", List{e, NewTunerCollector(status)}, []func() *tenant.Snapshot{richSnapshot, moved}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := NewText(tc.c)
			for i, snap := range tc.snaps {
				cur.Store(snap())
				var buf bytes.Buffer
				if err := text.Render(&buf, nil); err != nil {
					t.Fatalf("snapshot %d: %v", i, err)
				}
				got := durations.ReplaceAll(buf.Bytes(), []byte("$1 D"))
				if want := registryText(t, tc.c); !bytes.Equal(got, want) {
					t.Fatalf("snapshot %d: Text renders\n%s\nthe registry and encoder\n%s", i, got, want)
				}
			}
		})
	}
}

// constCollector sends fixed metrics.
type constCollector []prometheus.Metric

func (c constCollector) Describe(chan<- *prometheus.Desc) {}

func (c constCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c {
		ch <- m
	}
}

func TestTextDuplicatesAndUnsupported(t *testing.T) {
	d := prometheus.NewDesc("vgpu_x", "An \"x\"\\ with\nlines.", []string{"a"}, prometheus.Labels{"c": "k"})
	yes := func(n, h string) *prometheus.Desc { return prometheus.NewDesc(n, h, nil, nil) }
	hd := prometheus.NewDesc("vgpu_h_seconds", "h", []string{"a"}, prometheus.Labels{"c": "k"})
	sd := prometheus.NewDesc("vgpu_s_seconds", "s", nil, nil)
	for _, tc := range []struct {
		name        string
		c           constCollector
		unsupported bool
	}{
		{"duplicate", constCollector{
			prometheus.MustNewConstMetric(d, prometheus.GaugeValue, 2, "v"),
			prometheus.MustNewConstMetric(d, prometheus.GaugeValue, 1, "u"),
			prometheus.MustNewConstMetric(d, prometheus.GaugeValue, 3, "v"),
		}, false},
		{"untyped, no labels", constCollector{prometheus.MustNewConstMetric(yes("vgpu_u", ""), prometheus.UntypedValue, 0.5)}, false},
		{"histograms", constCollector{
			prometheus.MustNewConstHistogram(hd, 10, 2.5, map[float64]uint64{0.1: 3, 1: 7, math.Inf(1): 10}, "z"),
			prometheus.MustNewConstHistogram(hd, 4, 0.25, map[float64]uint64{0.5: 1, 1e-9: 0}, "y"),
			prometheus.MustNewConstHistogram(hd, 0, 0, nil, "x\"\n"),
		}, false},
		{"summaries", constCollector{
			prometheus.MustNewConstSummary(sd, 12, 3.5, map[float64]float64{0.5: 0.25, 0.99: math.NaN(), 0.9: 1}),
		}, false},
		{"timestamp", constCollector{prometheus.NewMetricWithTimestamp(t0,
			prometheus.MustNewConstMetric(yes("vgpu_t", "t"), prometheus.GaugeValue, 1))}, true},
		{"name not legacy", constCollector{prometheus.MustNewConstMetric(yes("vgpu.dotted", "d"), prometheus.GaugeValue, 1)}, true},
		{"label name not legacy", constCollector{prometheus.MustNewConstMetric(
			prometheus.NewDesc("vgpu_l", "l", []string{"a.b"}, nil), prometheus.GaugeValue, 1, "v")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := NewText(tc.c).Render(&buf, nil)
			if got := errors.Is(err, errors.ErrUnsupported); got != tc.unsupported {
				t.Fatalf("Render: %v; unsupported %v, want %v", err, got, tc.unsupported)
			}
			if tc.unsupported {
				if buf.Len() > 0 {
					t.Errorf("rendered %q where unsupported", buf.String())
				}
				return
			}
			if want := registryText(t, tc.c); buf.String() != string(want) {
				t.Errorf("Text renders\n%s\nthe registry and encoder\n%s", buf.String(), want)
			}
			if dup := tc.name == "duplicate"; dup != (err != nil) {
				t.Errorf("Render's error %v, want one: %v", err, dup)
			}
		})
	}
}

// Renderings of one Text may run at once (one per cached format), while
// the snapshot changes: each is one snapshot's, whole.
func TestTextConcurrentRenderings(t *testing.T) {
	snaps := []*tenant.Snapshot{richSnapshot(), moved(), churned()}
	var want []string
	for _, s := range snaps {
		want = append(want, string(registryText(t, newExporter(t, s))))
	}
	var cur atomic.Pointer[tenant.Snapshot]
	cur.Store(snaps[0])
	e, err := NewExporter(cur.Load, nil)
	if err != nil {
		t.Fatal(err)
	}
	text := NewText(e)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 30 {
				if (i+j)%4 == 0 {
					cur.Store(snaps[(i+j)%len(snaps)])
				}
				var buf bytes.Buffer
				if err := text.Render(&buf, runtime.Gosched); err != nil {
					t.Error(err)
					return
				}
				if got := string(durations.ReplaceAll(buf.Bytes(), []byte("$1 D"))); !slices.Contains(want, got) {
					t.Errorf("a rendering is none of the snapshots':\n%s", got)
					return
				}
			}
		})
	}
	wg.Wait()
}

// The exporter's own metrics (Go runtime, process, build) render as the
// registry renders them: the same lines, whose values move between two
// gatherings.
func TestTextSelfMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	cs := List{
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
	}
	reg.MustRegister(cs)
	var buf bytes.Buffer
	if err := NewText(cs).Render(&buf, nil); err != nil {
		t.Fatal(err)
	}
	values := regexp.MustCompile(`(?m)^([^#].*) \S+$`)
	got := values.ReplaceAllString(buf.String(), "$1 V")
	if want := values.ReplaceAllString(string(format(t, reg)), "$1 V"); got != want {
		t.Errorf("Text renders\n%s\nthe registry and encoder\n%s", got, want)
	}
	for _, typ := range []string{" histogram\n", " summary\n"} {
		if !strings.Contains(got, typ) {
			t.Errorf("no%s family among\n%s", typ, got)
		}
	}
}
