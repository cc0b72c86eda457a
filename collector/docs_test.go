package collector

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/simtest"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/webconf"
)

// docRow is one metric row of docs/metrics.md.
type docRow struct {
	line      int
	section   string // collector name, or "" for the scrape table
	typ       string
	labels    []string
	labelsRaw string
}

var (
	sectionRe = regexp.MustCompile("^## Collector `([a-z_]+)`")
	nameRe    = regexp.MustCompile("^`(vgpu_[a-z0-9_]+)`$")
	labelRe   = regexp.MustCompile("`([a-z_]+)`")
)

// parseMetricsDoc reads the metric tables of docs/metrics.md: every table
// row whose first cell is a backquoted vgpu_ name.
func parseMetricsDoc(t *testing.T) map[string]docRow {
	t.Helper()
	f, err := os.Open("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]docRow{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := sectionRe.FindStringSubmatch(line); m != nil {
			section = m[1]
			continue
		}
		if strings.HasPrefix(line, "## ") {
			section = ""
			continue
		}
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		m := nameRe.FindStringSubmatch(strings.TrimSpace(cells[0]))
		if m == nil {
			continue
		}
		if len(cells) != 6 {
			t.Errorf("docs/metrics.md:%d: %d cells, want 6 (metric, type, labels, unit, meaning, needs)", n, len(cells))
			continue
		}
		if prev, dup := rows[m[1]]; dup {
			t.Errorf("docs/metrics.md:%d: %s listed again (first at line %d)", n, m[1], prev.line)
		}
		r := docRow{line: n, section: section, typ: strings.TrimSpace(cells[1]), labelsRaw: strings.TrimSpace(cells[2])}
		for _, l := range labelRe.FindAllStringSubmatch(cells[2], -1) {
			r.labels = append(r.labels, l[1])
		}
		sort.Strings(r.labels)
		rows[m[1]] = r
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// webConfig is the collector of a --web.config.file's reloads, of one
// serving TLS (a certificate and its key written in it).
func webConfig(t *testing.T) prometheus.Collector {
	t.Helper()
	cert, key := testutil.SelfSignedPEM(t, time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC), false)
	indent := func(b []byte) string {
		return "    " + strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", "\n    ") + "\n"
	}
	f := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(f, []byte("tls_server_config:\n  cert: |\n"+indent(cert)+"  key: |\n"+indent(key)), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := webconf.Open(f, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k.Collector()
}

// served gathers what the given collectors serve for the rich snapshot.
func served(t *testing.T, filters ...string) []*dto.MetricFamily {
	t.Helper()
	reg := withoutDurations(t, newExporter(t, richSnapshot(), filters...))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

func labelNames(mf *dto.MetricFamily) []string {
	set := map[string]bool{}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			set[l.GetName()] = true
		}
	}
	var out []string
	for l := range set {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

// TestDocsListEveryMetric keeps docs/metrics.md equal to what the exporter
// serves for a snapshot with every field set: the same names, each under
// its collector's heading, with the served type and labels.
func TestDocsListEveryMetric(t *testing.T) {
	doc := parseMetricsDoc(t)
	if len(doc) == 0 {
		t.Fatal("no metric rows found in docs/metrics.md")
	}
	// Everything a scrape serves, the scrape durations included, and the
	// web configuration's reloads served beside it.
	got := testutil.Gather(t, newExporter(t, richSnapshot(), builtin...), NewTunerCollector(richTunerStatus), webConfig(t))
	// and what a GPU in MPS mode adds
	mps := bareDevice()
	mps.Mode = gpu.SharingMPS
	for n, f := range testutil.Gather(t, newExporter(t, &tenant.Snapshot{Readings: readings(mps)}, "gpu")) {
		got[n] = f
	}

	var undocumented, unserved []string
	for n := range got {
		if _, ok := doc[n]; !ok {
			undocumented = append(undocumented, n)
		}
	}
	for n, r := range doc {
		if _, ok := got[n]; !ok {
			unserved = append(unserved, fmt.Sprintf("%s (docs/metrics.md:%d)", n, r.line))
		}
	}
	sort.Strings(undocumented)
	sort.Strings(unserved)
	if len(undocumented) > 0 {
		t.Errorf("served but not listed in docs/metrics.md:\n  %s", strings.Join(undocumented, "\n  "))
	}
	if len(unserved) > 0 {
		t.Errorf("listed in docs/metrics.md but not served for a snapshot with every field set:\n  %s", strings.Join(unserved, "\n  "))
	}

	for n, mf := range got {
		r, ok := doc[n]
		if !ok {
			continue
		}
		if want := strings.ToLower(mf.GetType().String()); r.typ != want {
			t.Errorf("docs/metrics.md:%d: %s has type %q, served as %q", r.line, n, r.typ, want)
		}
		if want := labelNames(mf); !slices.Equal(r.labels, want) {
			t.Errorf("docs/metrics.md:%d: %s has labels %v, served with %v", r.line, n, r.labels, want)
		}
	}

	// Each collector's metrics sit under its heading.
	for _, c := range builtin {
		for _, mf := range served(t, c) {
			n := mf.GetName()
			if strings.HasPrefix(n, "vgpu_scrape_collector_") {
				continue
			}
			if r, ok := doc[n]; ok && r.section != c {
				t.Errorf("docs/metrics.md:%d: %s is served by collector %q but listed under %q", r.line, n, c, r.section)
			}
		}
	}
}

// TestPromlint lints the full scrape of a snapshot with every field set.
func TestPromlint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewTunerCollector(richTunerStatus))
	tmfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(append(served(t), tmfs...)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// lostGPUNote is the note of docs/metrics.md on a lost GPU, and docName a
// metric it names.
var (
	lostGPUNote = regexp.MustCompile(`(?ms)^- \*\*A lost GPU\*\*.*?\n(?:- |\n)`)
	docName     = regexp.MustCompile("`(vgpu_[a-z_]+)")
)

// TestLostGPUDoc loses the GPU of h100-timeslice (the simulator's gpu-lost
// event) after two samples, the second metering its tenants' activity,
// and checks that the series served for its uuid afterwards are
// those docs/metrics.md's note on a lost GPU names, and that its counters
// no longer rise.
func TestLostGPUDoc(t *testing.T) {
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	note := lostGPUNote.FindString(string(b))
	if note == "" {
		t.Fatal("docs/metrics.md has no note on a lost GPU")
	}
	var want []string
	for _, m := range docName.FindAllStringSubmatch(note, -1) {
		if !slices.Contains(want, m[1]) {
			want = append(want, m[1])
		}
	}
	sort.Strings(want)

	sc, err := os.ReadFile("../scenarios/h100-timeslice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	body, _, _ := strings.Cut(string(sc), "\nevents:")
	path := filepath.Join(t.TempDir(), "lost.yaml")
	if err := os.WriteFile(path, []byte(body+"\nevents:\n  - {at: 35s, action: gpu-lost, gpu: 0}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := simtest.New(t, path, "../scenarios/h100-timeslice.tenants.yaml")
	ctx := context.Background()
	var lost []map[string]float64 // the lost GPU's series after the loss, by sample
	var got []string
	for i := range 5 {
		snap := h.Build(ctx, h.Sample(ctx, 15*time.Second))
		d := snap.Readings.Devices[0]
		if d.Up != (i < 2) {
			t.Fatalf("sample %d: GPU up %v", i, d.Up)
		}
		if d.Up {
			continue
		}
		series := map[string]float64{}
		names := map[string]bool{}
		for name, mf := range testutil.Gather(t, newExporter(t, snap, builtin...)) {
			for _, m := range mf.GetMetric() {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "uuid" && l.GetValue() == d.UUID }) {
					continue
				}
				names[name] = true
				series[name+m.String()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
		got = slices.Sorted(maps.Keys(names))
		lost = append(lost, series)
	}
	if !slices.Equal(got, want) {
		t.Errorf("a lost GPU serves %v; docs/metrics.md's note names %v", got, want)
	}
	if !maps.Equal(lost[0], lost[len(lost)-1]) {
		t.Errorf("a lost GPU's series changed after it was lost:\n%v\n%v", lost[0], lost[len(lost)-1])
	}
}
