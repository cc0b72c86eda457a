package report

import (
	"bytes"
	"context"
	"flag"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

// The nearest-rank quantile the steps and the summary report.
func TestQuantile(t *testing.T) {
	quantile := func(sorted []time.Duration, q float64) (time.Duration, bool) {
		if len(sorted) == 0 {
			return 0, false
		}
		return sorted[nearestRank(len(sorted), q)], true
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name   string
		in     []time.Duration
		q      float64
		want   time.Duration
		wantOK bool
	}{
		{"empty", nil, 0.5, 0, false},
		{"one value", ms(7), 0.99, 7 * time.Millisecond, true},
		{"median of odd", ms(1, 2, 3), 0.5, 2 * time.Millisecond, true},
		{"median of even is the lower", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond, true},
		{"p99 of 100", hundred, 0.99, 99 * time.Millisecond, true},
		{"p50 of 100", hundred, 0.5, 50 * time.Millisecond, true},
		{"p100", hundred, 1, 100 * time.Millisecond, true},
		{"p99 of 10 is the max", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond, true},
		{"q 0 is the min", ms(3, 4), 0, 3 * time.Millisecond, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := quantile(tc.in, tc.q)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("Quantile(%v, %v) = %v, %v; want %v, %v", tc.in, tc.q, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestAttainment(t *testing.T) {
	if a := Attainment(0, 0); a != nil {
		t.Errorf("no requests: %v, want nil", *a)
	}
	for _, tc := range []struct {
		good, total int
		want        float64
	}{
		{9, 10, 0.9}, {10, 10, 1}, {0, 4, 0}, {99, 100, 0.99}, {29, 100, 0.29},
		// rounded down, never up to a quantile not reached
		{2, 3, 0.666666}, {2_474_999, 2_500_000, 0.989999}, {9_999_999, 10_000_000, 0.999999},
		{1, 7, 0.142857}, {1, 3_000_000, 3.33333e-7}, {1, 1 << 62, 2.16840e-19},
		{1 << 62, 1<<62 + 1, 0.999999},
	} {
		if a := Attainment(tc.good, tc.total); a == nil || *a != tc.want {
			t.Errorf("Attainment(%d, %d) = %v, want %v", tc.good, tc.total, ptr(a), tc.want)
		}
	}
}

func TestFormat(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 2.5: "2.50", 12.34: "12.3", 999.4: "999", 12345: "12.3k", 3.2e14: "320T", 0.0123: "0.0123"} {
		if got := fmtFloat(in); got != want {
			t.Errorf("fmtFloat(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]string{0.0421: "42.1ms", 0.15: "150ms", 2.5: "2.50s", 0.0000123: "0.0123ms"} {
		if got := fmtSeconds(&in); got != want {
			t.Errorf("fmtSeconds(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestRound6(t *testing.T) {
	for in, want := range map[float64]float64{0: 0, 1.23456789: 1.23457, 0.000123456789: 0.000123457, 123456789: 123457000, -2.5: -2.5} {
		if got := round6(in); got != want {
			t.Errorf("round6(%v) = %v, want %v", in, got, want)
		}
	}
}

// windows are three 1 s windows of two tenants on two GPUs: chat (with an
// SLO of p90 <= 100 ms) and train (no SLO, no requests, work only); chat
// moves from GPU-b to GPU-a in the third window and has no requests in
// the second.
func windows() []WindowStats {
	w := func(i int, chat TenantWindow, smA float64) WindowStats {
		chat.Tenant, chat.SLOQuantile, chat.SLOTarget = "chat", 0.9, 100*time.Millisecond
		return WindowStats{
			Start: start.Add(time.Duration(i) * time.Second), End: start.Add(time.Duration(i+1) * time.Second),
			Tenants: []TenantWindow{
				{Tenant: "train", GPU: "GPU-a", Work: 2.5, SMShare: 0.7, BWShare: 0.4},
				chat,
			},
			GPUs: []GPUWindow{
				{UUID: "GPU-b", Index: 1, SMActive: 0.25, DRAMActive: 0.1, PowerW: 200, SMClockMHz: 1500},
				{UUID: "GPU-a", Index: 0, SMActive: smA, DRAMActive: 0.5, PowerW: 600, SMClockMHz: 1980},
			},
		}
	}
	return []WindowStats{
		w(0, TenantWindow{GPU: "GPU-b", Completed: 4, Good: 3, Latencies: ms(20, 40, 60, 150), SMShare: 0.2, BWShare: 0.1}, 0.9),
		w(1, TenantWindow{GPU: "GPU-b", SMShare: 0.1, OOMs: 1, Dropped: 2}, 0.8),
		w(2, TenantWindow{GPU: "GPU-a", Completed: 6, Good: 6, Latencies: ms(10, 10, 30, 50, 70, 90), SMShare: 0.3, BWShare: 0.2}, 0.7),
	}
}

func record(ws []WindowStats) *Recorder {
	r := NewRecorder(Meta{Scenario: "unit", Policy: "static-equal", Seed: 42, Start: start, Step: time.Second, Duration: 3 * time.Second})
	for _, w := range ws {
		r.Add(w)
	}
	return r
}

func TestSummary(t *testing.T) {
	r := record(windows())
	s := r.Summary()
	if s.Steps != 3 || s.Seconds != 3 {
		t.Fatalf("steps %d seconds %v, want 3 and 3", s.Steps, s.Seconds)
	}
	if len(s.Tenants) != 2 || s.Tenants[0].Tenant != "chat" || s.Tenants[1].Tenant != "train" {
		t.Fatalf("tenants %+v, want chat then train", s.Tenants)
	}
	chat, train := s.Tenants[0], s.Tenants[1]
	// 10 latencies: 10 10 20 30 40 50 60 70 90 150 -> p50 = 5th = 40 ms, p99 = 10th.
	checks := []struct {
		name      string
		got, want any
	}{
		{"chat requests", chat.Requests, 10},
		{"chat good", chat.Good, 9},
		// 9 good of 10 completed and 2 dropped: dropped requests count as
		// not good.
		{"chat attainment", *chat.Attainment, 0.75},
		{"chat slo missed (0.75 < 0.9)", *chat.SLOMet, false},
		{"chat p50", *chat.P50, 0.04},
		{"chat p99", *chat.P99, 0.15},
		{"chat throughput", chat.Throughput, 10 / 3.0},
		{"chat sm share", chat.SMShare, 0.2},
		{"chat bw share", chat.BWShare, 0.1},
		{"chat ends on GPU-a", chat.GPU, "GPU-a"},
		{"chat ooms", chat.OOMs, 1},
		{"chat dropped", chat.Dropped, 2},
		{"train has no attainment", train.Attainment == nil && train.SLOMet == nil && train.P99 == nil, true},
		{"train work rate", train.WorkRate, 2.5},
		{"slos", [2]int{s.SLOsMet, s.SLOsHeld}, [2]int{0, 1}},
		{"gpus by index", []string{s.GPUs[0].UUID, s.GPUs[1].UUID}, []string{"GPU-a", "GPU-b"}},
		{"gpu-a sm active mean", s.GPUs[0].SMActive, 0.8},
	}
	for _, c := range checks {
		if g, ok := c.got.(float64); ok {
			c.got = round6(g)
			c.want = round6(c.want.(float64))
		}
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// Per step: no percentiles in the window without completed requests,
	// and attainment 0 there since its two requests were dropped.
	st := r.Steps()[1].Tenants[0]
	if st.Tenant != "chat" || st.P50 != nil || st.P99 != nil || st.Attainment == nil || *st.Attainment != 0 {
		t.Errorf("step of drops only %+v: want no percentiles and attainment 0", st)
	}
	if a := r.Steps()[0].Tenants[0].Attainment; a == nil || *a != 0.75 {
		t.Errorf("first step attainment %v, want 3/4", a)
	}
	if got := *r.Steps()[0].Tenants[0].P99; got != 0.15 {
		t.Errorf("first step p99 %v, want 0.15", got)
	}
}

// Without the drops the same completed requests meet the SLO: dropping
// requests can only lower attainment.
func TestSummaryDropsCountAsMissed(t *testing.T) {
	ws := windows()
	ws[1].Tenants[1].Dropped = 0
	s := record(ws).Summary()
	chat := s.Tenants[0]
	if chat.Attainment == nil || *chat.Attainment != 0.9 || chat.SLOMet == nil || !*chat.SLOMet || s.SLOsMet != 1 {
		t.Errorf("summary %+v: want attainment 0.9 and the SLO met", chat)
	}
	if st := record(ws).Steps()[1].Tenants[0]; st.Attainment != nil {
		t.Errorf("step without ended requests: attainment %v, want none", *st.Attainment)
	}
}

// Requests still waiting past the target at the end of the run count as
// missed once: the last window's Overdue, not the sum over windows (an
// earlier window's overdue requests end, and count, later).
func TestSummaryOverdueAtEnd(t *testing.T) {
	ws := windows()
	ws[0].Tenants[1].Overdue = 5
	ws[2].Tenants[1].Overdue = 3
	r := record(ws)
	chat := r.Summary().Tenants[0]
	// 9 good of 10 completed, 2 dropped, 3 overdue at the end
	if chat.Overdue != 3 || chat.Attainment == nil || *chat.Attainment != 0.6 {
		t.Errorf("summary %+v: want 3 overdue and attainment 9/15", chat)
	}
	if a := r.Steps()[2].Tenants[0].Attainment; a == nil || *a != 1 {
		t.Errorf("last step attainment %v, want 1 (overdue requests have not ended)", a)
	}
	var b bytes.Buffer
	if err := WriteSummaryText(&b, r.Summary()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "OVERDUE") {
		t.Errorf("summary text lacks the OVERDUE column:\n%s", b.String())
	}
}

// Under an inter-token latency SLO the report judges tokens: attainment
// is good tokens over the tokens judged, plus those the dropped requests
// will never produce (each a missed observation) and the overdue streams
// at the end; requests stay requests.
func TestSummaryJudgesTokensUnderITL(t *testing.T) {
	ws := windows()
	for i, tokens := range []int{400, 0, 600} {
		c := &ws[i].Tenants[1]
		c.SLOMetric, c.Tokens = sim.SLOMetricITL, tokens
	}
	// window 0: 4 requests, 380 of 400 tokens good; window 2: 6
	// requests, 590 of 600; window 1: 2 dropped with 60 and 40 tokens
	// left to produce; 5 streams overdue
	ws[0].Tenants[1].Good, ws[2].Tenants[1].Good = 380, 590
	ws[1].Tenants[1].DroppedTokens = 100
	ws[2].Tenants[1].Overdue = 5
	r := record(ws)
	chat := r.Summary().Tenants[0]
	// counting the dropped streams as one missed token each, 970/1007 =
	// 0.963 met the p90 the served tokens alone meet: dropping them
	// would have judged better than serving them late
	want := 970.0 / (1000 + 100 + 5)
	if chat.Requests != 10 || chat.Good != 970 || chat.Attainment == nil || math.Abs(*chat.Attainment-want) > 1e-5 || chat.SLOMetric != sim.SLOMetricITL {
		t.Errorf("summary %+v: want 10 requests, 970 good tokens, attainment %.4f", chat, want)
	}
	if chat.SLOMet == nil || *chat.SLOMet || chat.Dropped != 2 {
		t.Errorf("summary %+v: %.4f of the tokens at p90 misses it; 2 requests dropped", chat, want)
	}
	if a := r.Steps()[1].Tenants[0].Attainment; a == nil || *a != 0 {
		t.Errorf("second step attainment %v, want 0 of 100 missed tokens", a)
	}
	if a := r.Steps()[0].Tenants[0].Attainment; a == nil || *a != 0.95 {
		t.Errorf("first step attainment %v, want 380/400", a)
	}
	var b bytes.Buffer
	if err := WriteSummaryText(&b, r.Summary()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "itl p90<=100ms") {
		t.Errorf("summary text does not name the ITL SLO:\n%s", b.String())
	}
}

// The policy's settings beyond its defaults head the summary; none, no
// line.
func TestSummarySettings(t *testing.T) {
	for _, tc := range []struct {
		settings []string
		want     string
	}{
		{[]string{"enable-knob pause_duty", "autotune.param pause_gain=0.15"}, "settings: enable-knob pause_duty, autotune.param pause_gain=0.15\n"},
		{nil, ""},
	} {
		s := record(windows()).Summary()
		s.Meta.Settings = tc.settings
		var b bytes.Buffer
		if err := WriteSummaryText(&b, s); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(b.String(), "settings:"); got != (tc.want != "") || !strings.Contains(b.String(), tc.want) {
			t.Errorf("settings %q: summary\n%s", tc.settings, b.String())
		}
	}
}

// A missed SLO reads "no".
func TestSummarySLOMissed(t *testing.T) {
	ws := windows()
	ws[0].Tenants[1].Good = 0
	s := record(ws).Summary()
	if s.Tenants[0].SLOMet == nil || *s.Tenants[0].SLOMet || s.SLOsMet != 0 || s.SLOsHeld != 1 {
		t.Errorf("summary %+v: want chat's SLO missed", s.Tenants[0])
	}
	var b bytes.Buffer
	if err := WriteSummaryText(&b, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "SLOs met: 0 of 1") {
		t.Errorf("summary text:\n%s", b.String())
	}
}

// A latency tenant that never served counts in SLOs held, not met, and
// its row says so, as does the line of GPU-minutes held (a minute with no
// request to judge holds): here its start fails for want of memory (a standby of
// the other tenant's restart holds it), so no request of its ends.
func TestSummaryUnservedSLOCounts(t *testing.T) {
	sc, err := sim.ParseScenario("unserved.yaml", []byte(`name: unserved
duration: 60s
gpus: [{model: H100-SXM5-80GB, sharing: mps}]
control: {actuators: {nvml: {latency: 0s, failure_rate: 0}, nvidia_smi: {latency: 0s, failure_rate: 0}, mps: {latency: 0s, failure_rate: 0}, hook: {latency: 0s, failure_rate: 0}}}
tenants:
  - {name: a, process: {pid: 1}, memory: 30GB, slo: {quantile: 0.99, target: 1s}, workload: {type: dnn, flops: 1e10, weights_bytes: 20GB, arrival: {process: poisson, rate: 10}}}
  - {name: late, process: {pid: 2}, memory: 30GB, stopped: true, slo: {quantile: 0.99, target: 1s}, workload: {type: dnn, flops: 1e10, weights_bytes: 20GB, arrival: {process: poisson, rate: 10}}}
events:
  - {at: 10s, tenant: late, action: start}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(sc, sim.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(Meta{Scenario: "unserved", Start: s.Now()})
	s.AdvanceTo(s.Now().Add(5 * time.Second))
	r.Add(s.Window())
	// a's restart at 5 s: its standby holds a second 30 GB
	if err := s.RestartClient(context.Background(), sc.GPUs[0].UUID, 1, "a"); err != nil {
		t.Fatal(err)
	}
	for range 55 {
		s.AdvanceTo(s.Now().Add(time.Second))
		r.Add(s.Window())
	}
	sum := r.Summary()
	var late TenantSummary
	for _, ts := range sum.Tenants {
		if ts.Tenant == "late" {
			late = ts
		}
	}
	if late.Requests != 0 || late.Attainment != nil || late.OOMs == 0 {
		t.Fatalf("late: %+v; want no request served, an OOM at its start", late)
	}
	if late.SLOMet == nil || *late.SLOMet || sum.SLOsHeld != 2 || sum.SLOsMet > 1 {
		t.Errorf("late's SLO met %v, SLOs met %d of %d; want late's not met, of 2", late.SLOMet, sum.SLOsMet, sum.SLOsHeld)
	}
	var b bytes.Buffer
	if err := WriteSummaryText(&b, sum); err != nil {
		t.Fatal(err)
	}
	row := ""
	for l := range strings.Lines(b.String()) {
		if strings.HasPrefix(l, "late ") {
			row = l
		}
	}
	if !strings.Contains(row, "no requests") || !strings.Contains(b.String(), " of 2 tenants with an SLO\n") ||
		!strings.Contains(b.String(), "late never served") {
		t.Errorf("summary text:\n%s", b.String())
	}
}

func TestEmptyWindowIgnored(t *testing.T) {
	r := record(nil)
	r.Add(WindowStats{Start: start, End: start})
	if len(r.Steps()) != 0 {
		t.Errorf("zero-length window recorded")
	}
	if _, err := LatencyPlot(r); err == nil {
		t.Error("plot of no steps: want an error")
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestGoldens(t *testing.T) {
	r := record(windows())
	outputs := []struct {
		file string
		f    func(*bytes.Buffer) error
	}{
		{"summary.golden.txt", func(b *bytes.Buffer) error { return WriteSummaryText(b, r.Summary()) }},
		{"tenants.golden.csv", func(b *bytes.Buffer) error { return WriteTenantsCSV(b, r.Steps()) }},
		{"gpus.golden.csv", func(b *bytes.Buffer) error { return WriteGPUsCSV(b, r.Steps()) }},
		{"series.golden.json", func(b *bytes.Buffer) error { return WriteJSON(b, r) }},
	}
	for _, o := range outputs {
		t.Run(o.file, func(t *testing.T) {
			var b bytes.Buffer
			if err := o.f(&b); err != nil {
				t.Fatal(err)
			}
			golden(t, o.file, b.Bytes())
		})
	}
}

func TestWriteFiles(t *testing.T) {
	for _, format := range []string{FormatCSV, FormatJSON} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			r := record(windows())
			paths, err := WriteFiles(dir, r, format)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{FileSummary, FileTenantsCSV, FileGPUsCSV, FileLatencyPlot, FileSharesPlot, FileGPUPlot}
			if format == FormatJSON {
				want = []string{FileSummary, FileJSON, FileLatencyPlot, FileSharesPlot, FileGPUPlot}
			}
			var got []string
			for _, p := range paths {
				got = append(got, filepath.Base(p))
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("written %v, want %v", got, want)
			}
			for _, name := range want {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil || len(b) == 0 {
					t.Fatalf("%s: %d bytes, %v", name, len(b), err)
				}
				if strings.HasSuffix(name, ".png") {
					img, err := png.Decode(bytes.NewReader(b))
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if bd := img.Bounds(); bd.Dx() < 400 || bd.Dy() < 200 {
						t.Errorf("%s: %v too small", name, bd)
					}
				}
			}
		})
	}
	if _, err := WriteFiles(t.TempDir(), record(windows()), "xml"); err == nil || !strings.Contains(err.Error(), "xml") {
		t.Errorf("unknown format: %v", err)
	}
}

// TestGoodputCountsOnlyHeldMinutes: a tenant's work counts towards its
// goodput only in the minutes in which every SLO on its GPU held; a
// minute without ended requests holds, and a GPU without SLOs always does.
func TestGoodputCountsOnlyHeldMinutes(t *testing.T) {
	// per minute: chat's good and ended requests on GPU a (SLO p90)
	minutes := []struct{ good, ended int }{
		{10, 10}, // held: 100%
		{8, 10},  // missed: 80% < 90%
		{0, 0},   // no request ended: held
		{9, 10},  // held: exactly 90%
	}
	r := NewRecorder(Meta{Start: start})
	at := start
	for _, m := range minutes {
		for s := 0; s < 60; s++ {
			w := WindowStats{Start: at, End: at.Add(time.Second)}
			chat := TenantWindow{Tenant: "chat", GPU: "a", SLOQuantile: 0.9, SLOTarget: time.Second, Work: 1}
			if s == 59 { // the minute's requests end in its last step
				chat.Completed, chat.Good = m.ended, m.good
			}
			w.Tenants = []TenantWindow{chat,
				{Tenant: "embed", GPU: "a", Work: 2},
				{Tenant: "train", GPU: "b", Work: 3}}
			r.Add(w)
			at = w.End
		}
	}
	s := r.Summary()
	got := map[string]float64{}
	for _, ts := range s.Tenants {
		got[ts.Tenant] = ts.Goodput
	}
	want := map[string]float64{"chat": 0.75, "embed": 1.5, "train": 3}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("goodput = %v, want %v", got, want)
	}
	if s.HeldFraction == nil || *s.HeldFraction != 0.875 { // 7 of 8 GPU-minutes
		t.Errorf("held fraction = %s, want 87.5%%", fmtRatio(s.HeldFraction))
	}
}

// TestWorkLessStepsNotRedone: a training job's steps a restart threw
// away and it has not redone by the end (the last window's Redo) are
// taken from its work, and from its goodput where they counted: they are
// its last counted steps, from the last minute back.
func TestWorkLessStepsNotRedone(t *testing.T) {
	// chat's SLO on the GPU breaks in the first minute, holds in the
	// second and third; train does 1 step a second
	r := NewRecorder(Meta{Start: start})
	at := start
	for m := 0; m < 3; m++ {
		for s := 0; s < 60; s++ {
			w := WindowStats{Start: at, End: at.Add(time.Second)}
			chat := TenantWindow{Tenant: "chat", GPU: "a", SLOQuantile: 0.9, SLOTarget: time.Second}
			if s == 59 && m == 0 {
				chat.Completed = 10 // none good
			}
			train := TenantWindow{Tenant: "train", GPU: "a", Work: 1}
			if m == 2 && s == 59 {
				train.Redo = 150 // the last 150 steps were lost
			}
			w.Tenants = []TenantWindow{chat, train}
			r.Add(w)
			at = w.End
		}
	}
	s := r.Summary()
	for _, ts := range s.Tenants {
		if ts.Tenant != "train" {
			continue
		}
		// 180 steps less 150: 30 steps in 180 s; the 150 are the third
		// and second minutes' (good) and 30 of the first's (not good)
		if ts.WorkRate != round6(30.0/180) || ts.Goodput != 0 {
			t.Errorf("train: work/s %v, goodput/s %v; want %v and 0", ts.WorkRate, ts.Goodput, round6(30.0/180))
		}
	}
}

// TestSlackFromBusyStretch: busy latency is the SLO quantile over the
// requests that ended in the minutes in which at least BusyFraction of the
// busiest minute's requests ended, a dropped request counting as later than
// any completed one; slack is the target over it, 0 when the quantile
// falls on a dropped request.
func TestSlackFromBusyStretch(t *testing.T) {
	// per minute: requests completed, each at latency ms, and dropped
	minutes := []struct{ n, ms, dropped int }{
		{10, 5, 0},   // quiet: not busy (10 < 0.75 x 40)
		{30, 40, 10}, // the busiest: 40 ended
		{30, 20, 0},  // busy: 30 >= 30
		{25, 80, 0},  // not busy (it would be, were drops not counted)
	}
	slack := func(q float64) (busy, slack any) {
		r := NewRecorder(Meta{Start: start})
		at := start
		for _, m := range minutes {
			for s := 0; s < 60; s++ {
				w := WindowStats{Start: at, End: at.Add(time.Second)}
				chat := TenantWindow{Tenant: "chat", GPU: "a", SLOQuantile: q, SLOTarget: 90 * time.Millisecond}
				if s == 30 {
					chat.Completed, chat.Dropped = m.n, m.dropped
					for i := 0; i < m.n; i++ {
						chat.Latencies = append(chat.Latencies, time.Duration(m.ms)*time.Millisecond)
					}
				}
				w.Tenants = []TenantWindow{chat, {Tenant: "train", GPU: "a", Work: 1}}
				r.Add(w)
				at = w.End
			}
		}
		for _, ts := range r.Summary().Tenants {
			if ts.Tenant == "train" && (ts.BusyLatency != nil || ts.Slack != nil) {
				t.Errorf("train (no SLO): busy latency %v, slack %v; want none", ptr(ts.BusyLatency), ptr(ts.Slack))
			}
			if ts.Tenant == "chat" {
				return ptr(ts.BusyLatency), ptr(ts.Slack)
			}
		}
		return nil, nil
	}
	// busy: minutes 2 and 3, 30 at 40 ms, 10 dropped, 30 at 20 ms
	for _, tc := range []struct {
		q           float64
		busy, slack any
	}{
		{0.4, 0.02, 4.5},  // the 28th of 70: 20 ms
		{0.5, 0.04, 2.25}, // the 35th: 40 ms
		{0.9, nil, 0.0},   // the 63rd: a dropped one
	} {
		if busy, sl := slack(tc.q); busy != tc.busy || sl != tc.slack {
			t.Errorf("q %v: busy latency %v, slack %v; want %v, %v", tc.q, busy, sl, tc.busy, tc.slack)
		}
	}
}

func ptr(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

// TestWindowQuantiles: the quantile at each step is over the requests that
// completed in (T-window, T]; steps without any there have no point.
func TestWindowQuantiles(t *testing.T) {
	// 1 s steps; latencies per step in ms (nil: no request completed)
	perStep := [][]int{{10, 20}, nil, {30}, {400}, nil, nil, nil, {50}}
	r := NewRecorder(Meta{Start: start, Step: time.Second})
	for i, l := range perStep {
		r.Add(WindowStats{Start: start.Add(time.Duration(i) * time.Second), End: start.Add(time.Duration(i+1) * time.Second),
			Tenants: []TenantWindow{{Tenant: "chat", GPU: "GPU-a", Completed: len(l), Latencies: ms(l...)}}})
	}
	tests := []struct {
		name   string
		tenant string
		q      float64
		window time.Duration
		want   []Point
	}{
		{"one-step window is the step's own quantile", "chat", 1, time.Second,
			[]Point{{1, 0.02}, {3, 0.03}, {4, 0.4}, {8, 0.05}}},
		{"3 s window max", "chat", 1, 3 * time.Second,
			[]Point{{1, 0.02}, {2, 0.02}, {3, 0.03}, {4, 0.4}, {5, 0.4}, {6, 0.4}, {8, 0.05}}},
		{"3 s window median (nearest rank, the lower)", "chat", 0.5, 3 * time.Second,
			[]Point{{1, 0.01}, {2, 0.01}, {3, 0.02}, {4, 0.03}, {5, 0.03}, {6, 0.4}, {8, 0.05}}},
		{"window longer than the run", "chat", 0.99, time.Hour,
			[]Point{{1, 0.02}, {2, 0.02}, {3, 0.03}, {4, 0.4}, {5, 0.4}, {6, 0.4}, {7, 0.4}, {8, 0.4}}},
		{"unknown tenant", "nobody", 0.99, time.Minute, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.WindowQuantiles(tc.tenant, tc.q, tc.window); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestWindowQuantilesSampled: a run longer than maxWindowPoints steps is
// sampled, the last step always included.
func TestWindowQuantilesSampled(t *testing.T) {
	r := NewRecorder(Meta{Start: start, Step: time.Second})
	n := 2*maxWindowPoints + 3
	for i := range n {
		r.Add(WindowStats{Start: start.Add(time.Duration(i) * time.Second), End: start.Add(time.Duration(i+1) * time.Second),
			Tenants: []TenantWindow{{Tenant: "chat", GPU: "GPU-a", Completed: 1, Latencies: ms(i + 1)}}})
	}
	got := r.WindowQuantiles("chat", 1, QuantileWindow)
	if len(got) > maxWindowPoints+1 || len(got) < maxWindowPoints/2 {
		t.Fatalf("%d points for %d steps", len(got), n)
	}
	if last := got[len(got)-1]; last.T != float64(n) || last.V != round6(float64(n)/1000) {
		t.Errorf("last point %v, want {%d %v}", last, n, float64(n)/1000)
	}
}

// TestSummaryKept: a second Summary without an Add between is the first,
// whatever its caller did to the first's slices; an Add makes a new one.
func TestSummaryKept(t *testing.T) {
	ws := windows()
	r := record(ws[:len(ws)-1])
	first := r.Summary()
	want := record(ws[:len(ws)-1]).Summary()
	first.Tenants[0].Requests = -1
	first.GPUs[0].PowerW = -1
	if got := r.Summary(); !reflect.DeepEqual(got, want) {
		t.Errorf("second summary\n%+v\nwant\n%+v", got, want)
	}
	r.Add(ws[len(ws)-1])
	if got, want := r.Summary(), record(ws).Summary(); !reflect.DeepEqual(got, want) {
		t.Errorf("summary after Add\n%+v\nwant\n%+v", got, want)
	}
}
