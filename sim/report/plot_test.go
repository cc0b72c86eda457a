package report

import (
	"bytes"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func TestPlotsDeterministic(t *testing.T) {
	for _, f := range []func(*Recorder) (Plot, error){LatencyPlot, SharesPlot, GPUPlot} {
		var a, b bytes.Buffer
		for _, buf := range []*bytes.Buffer{&a, &b} {
			p, err := f(record(windows()))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.WritePNG(buf); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Error("two renderings of the same series differ")
		}
	}
}

// Panels: one per GPU a tenant ended on for the tenant plots, four for the
// GPU plot.
func TestPlotPanels(t *testing.T) {
	r := record(windows())
	lat, err := LatencyPlot(r)
	if err != nil {
		t.Fatal(err)
	}
	gp, err := GPUPlot(r)
	if err != nil {
		t.Fatal(err)
	}
	if lat.Panels() != 1 || gp.Panels() != 4 {
		t.Errorf("panels: latency %d (want 1: both tenants end on GPU-a), gpu %d (want 4)", lat.Panels(), gp.Panels())
	}
}

func TestPlotLabels(t *testing.T) {
	for in, want := range map[float64]string{500: "500", 0.2: "0.2", 0.1 * 3: "0.3", 1500: "1500", 0: "0", 2e6: "2000000", 0.05: "0.05"} {
		if got := tickLabel(in); got != want {
			t.Errorf("tickLabel(%v) = %q, want %q", in, got, want)
		}
	}
	for _, tc := range []struct {
		min, max float64
		want     []string
		minor    bool // unlabelled ticks at the other digits
	}{
		{0.01, 13, []string{"0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2", "5", "10"}, true},
		{0.14, 0.9, []string{"0.2", "0.5"}, true},
		{0.25, 0.45, []string{"0.3", "0.4"}, false}, // inside one decade: every digit
		{2, 8000, []string{"2", "5", "10", "20", "50", "100", "200", "500", "1000", "2000", "5000"}, true},
	} {
		var got []string
		minor := 0
		for _, tk := range (logTicks{}).Ticks(math.Log10(tc.min), math.Log10(tc.max)) {
			if tk.Label == "" {
				minor++
				continue
			}
			if v := math.Pow(10, tk.Value); math.Abs(v-mustFloat(t, tk.Label)) > 1e-9*v {
				t.Errorf("tick %q at 10^%v", tk.Label, tk.Value)
			}
			got = append(got, tk.Label)
		}
		if !reflect.DeepEqual(got, tc.want) || (minor > 0) != tc.minor {
			t.Errorf("logTicks(%v, %v) = %v (%d minor), want %v", tc.min, tc.max, got, minor, tc.want)
		}
	}
	for in, want := range map[time.Duration]string{time.Minute: "1 min", 5 * time.Minute: "5 min", 30 * time.Second: "30 s", 90 * time.Second: "90 s"} {
		if got := windowLabel(in); got != want {
			t.Errorf("windowLabel(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]string{221_400: "221 kJ", 2400: "2.4 kJ", 1_449_999: "1450 kJ", 90_000: "90 kJ", 0: "0 kJ", 12_345: "12.3 kJ"} {
		if got := FormatEnergy(in); got != want {
			t.Errorf("FormatEnergy(%v) = %q, want %q", in, got, want)
		}
	}
}

// TestPlotAxes: ratio axes end at 1, tick labels carry no trailing zeros,
// and the latency axis names its window.
func TestPlotAxes(t *testing.T) {
	r := record(windows())
	gp, err := GPUPlot(r)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := SharesPlot(r)
	if err != nil {
		t.Fatal(err)
	}
	lat, err := LatencyPlot(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*plot.Plot{gp.rows[0][0], gp.rows[0][1], sh.rows[0][0]} {
		if p.Y.Min != 0 || p.Y.Max != 1 {
			t.Errorf("%s: y axis [%v, %v], want [0, 1]", p.Title.Text, p.Y.Min, p.Y.Max)
		}
	}
	power := gp.rows[1][1]
	if !strings.Contains(power.Y.Label.Text, "(W)") {
		t.Errorf("power axis %q names no unit", power.Y.Label.Text)
	}
	labels := 0
	for _, tk := range power.Y.Tick.Marker.Ticks(power.Y.Min, power.Y.Max) {
		if tk.Label == "" {
			continue
		}
		labels++
		if strings.Contains(tk.Label, ".") {
			t.Errorf("power tick %q", tk.Label)
		}
	}
	if labels < 2 {
		t.Errorf("%d labelled power ticks", labels)
	}
	if y := lat.rows[0][0].Y.Label.Text; !strings.Contains(y, "last 1 min") {
		t.Errorf("latency axis %q does not name its window", y)
	}
}

// TestChangeMarks: changes are marked on the panels of their GPU (every GPU
// in the GPU plot), once per distinct time; those before the start are not.
func TestChangeMarks(t *testing.T) {
	r := record(windows())
	for _, c := range []Change{
		{Time: start.Add(2 * time.Second), GPU: "GPU-a", Tenant: "chat", Knob: "mps_active_thread_percentage", To: "40"},
		{Time: start.Add(2 * time.Second), GPU: "GPU-a", Tenant: "train", Knob: "mps_active_thread_percentage", To: "60"},
		{Time: start.Add(time.Second), GPU: "GPU-b", Knob: "power_limit", To: "300"},
		{Time: start.Add(-time.Second), GPU: "GPU-a", Knob: "power_limit", To: "300"},
	} {
		r.AddChange(c)
	}
	for uuid, want := range map[string][]float64{"GPU-a": {2}, "GPU-b": {1}, "": {1, 2}, "GPU-c": nil} {
		if got := r.changeTimes(uuid); !reflect.DeepEqual(got, want) {
			t.Errorf("changeTimes(%q) = %v, want %v", uuid, got, want)
		}
	}
	if n := len(r.Changes()); n != 4 {
		t.Errorf("%d changes recorded, want 4", n)
	}
	// The marks change the image: a plot of the same run without them
	// differs, and is written as a non-empty PNG.
	dir := t.TempDir()
	for _, f := range []func(*Recorder) (Plot, error){LatencyPlot, SharesPlot, GPUPlot} {
		var with, without bytes.Buffer
		for rec, buf := range map[*Recorder]*bytes.Buffer{r: &with, record(windows()): &without} {
			p, err := f(rec)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.WritePNG(buf); err != nil {
				t.Fatal(err)
			}
		}
		if bytes.Equal(with.Bytes(), without.Bytes()) {
			t.Error("the changes are not drawn")
		}
		path := filepath.Join(dir, "plot.png")
		if err := os.WriteFile(path, with.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Size() < 1000 {
			t.Fatalf("%s: %v, %v", path, fi, err)
		}
		if _, err := png.Decode(bytes.NewReader(with.Bytes())); err != nil {
			t.Fatal(err)
		}
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestLineGlyphBoxes: a panel of lines that keep only the glyph boxes
// that can decide the padding lays out its data area exactly as one of
// plain plotter.Lines, flat lines, ties at the extremes and points
// outside the axes included.
func TestLineGlyphBoxes(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 50 {
		var lines []plotter.XYs
		for range 1 + r.IntN(4) {
			xy := make(plotter.XYs, 1+r.IntN(300))
			for i := range xy {
				xy[i].X = float64(i) / 60
				switch trial % 3 {
				case 0:
					xy[i].Y = r.NormFloat64()
				case 1:
					xy[i].Y = float64(r.IntN(3)) // ties
				default:
					xy[i].Y = 0.25 // flat
				}
			}
			lines = append(lines, xy)
		}
		panel := func(cached bool) *plot.Plot {
			p := newPanel("t", "x", "y")
			for i, xy := range lines {
				if cached {
					if err := addLine(p, xy, plotutil.Color(i), i%2 == 1, ""); err != nil {
						t.Fatal(err)
					}
					continue
				}
				l, err := plotter.NewLine(xy)
				if err != nil {
					t.Fatal(err)
				}
				l.LineStyle.Width = vg.Points(1.2)
				p.Add(l)
			}
			if trial%4 == 3 {
				p.Y.Max = 0.5 // some points above the axis
			}
			return p
		}
		img := vgimg.New(6*vg.Inch, 3.5*vg.Inch)
		c := draw.New(img)
		want := panel(false).DataCanvas(c).Rectangle
		p := panel(true)
		for range 2 { // the second time from the kept boxes
			if got := p.DataCanvas(c).Rectangle; got != want {
				t.Fatalf("trial %d: data area %v, want %v", trial, got, want)
			}
		}
	}
}
