package main

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gonum.org/v1/plot/plotter"
)

func TestLegend(t *testing.T) {
	labels := map[string]string{"__name__": "m", "job": "vgpu", "instance": "h1", "uuid": "GPU-a", "gpu": "0", "tenant": "chat"}
	for _, tc := range []struct{ format, want string }{
		{"{{instance}} GPU {{gpu}}", "h1 GPU 0"},
		{"{{ tenant }} {{missing}} target", "chat target"},
		{"", "gpu=0 tenant=chat"},
		{"unclosed {{gpu", "unclosed {{gpu"},
	} {
		if got := legend(tc.format, labels); got != tc.want {
			t.Errorf("legend(%q) = %q, want %q", tc.format, got, tc.want)
		}
	}
}

func TestPoint(t *testing.T) {
	for _, tc := range []struct {
		pt   []any
		ok   bool
		want float64
	}{
		{[]any{1.5, "2.25"}, true, 2.25},
		{[]any{1.5, "NaN"}, false, 0},
		{[]any{1.5, "+Inf"}, false, 0},
		{[]any{1.5, "x"}, false, 0},
		{[]any{"1.5", "2"}, false, 0},
		{[]any{1.5}, false, 0},
	} {
		_, v, ok := point(tc.pt)
		if ok != tc.ok || v != tc.want {
			t.Errorf("point(%v) = %v, %v; want %v, %v", tc.pt, v, ok, tc.want, tc.ok)
		}
	}
}

// TestWriteGrid draws every kind of panel, with and without data, and
// checks the image's size: three columns, a row per three panels.
func TestWriteGrid(t *testing.T) {
	ts := func(title, unit, stack string, ss ...series) panelData {
		var p panelData
		p.Type, p.Title, p.series = "timeseries", title, ss
		p.FieldConfig.Defaults.Unit = unit
		p.FieldConfig.Defaults.Custom.Stacking.Mode = stack
		return p
	}
	stat := ts("A stat", "percentunit", "", series{name: "", t: []float64{60}, v: []float64{0.5}})
	stat.Type = "stat"
	table := ts("A table", "", "", series{name: "gpu=0 timeslice=default uuid=GPU-58df9232-29cc-550c-e4e0-c6a70f3f36eb", t: []float64{60}, v: []float64{1}})
	table.Type = "table"
	line := series{name: "a", t: []float64{0, 30, 60}, v: []float64{0, 1, 0.5}}
	zero := series{name: "zero", t: []float64{0, 30, 60}, v: []float64{0, 0, 0}}
	events := ts("Events", "", "normal", series{name: "a", t: []float64{30}, v: []float64{2}}, series{name: "b", t: []float64{30, 50}, v: []float64{1, 1}})
	events.FieldConfig.Defaults.Custom.DrawStyle = "bars"
	events.minutes = 1
	panels := []panelData{
		stat, table,
		ts("Lines", "bytes", "", line, zero),
		ts("Stacked", "percentunit", "normal", line, line),
		ts("Zeros", "", "normal", zero, zero),
		events,
		ts("No data", "s", ""),
		ts("Empty series", "s", "", series{name: "empty"}),
	}
	path := filepath.Join(t.TempDir(), "grid.png")
	if err := writeGrid(path, "Test", panels, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	w, h := float64(tileWidth*columns/72*96), float64((tileHeight*3+titleHeight)/72*96)
	wantW, wantH := int(w), int(h)
	if abs(cfg.Width-wantW) > 1 || abs(cfg.Height-wantH) > 1 {
		t.Errorf("image %dx%d, want %dx%d", cfg.Width, cfg.Height, wantW, wantH)
	}
	if dir := os.Getenv("RENDER_TEST_OUT"); dir != "" {
		data, _ := os.ReadFile(path)
		_ = os.WriteFile(filepath.Join(dir, "grid.png"), data, 0o644)
	}
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// TestSeriesMark: a panel of events draws bars stacked on the series below,
// others lines.
func TestSeriesMark(t *testing.T) {
	xy := plotter.XYs{{X: 1, Y: 3}, {X: 2, Y: 1}}
	m, err := seriesMark(xy, []float64{2, 0}, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := m.(*bars)
	if !ok {
		t.Fatalf("events drawn as %T, want bars", m)
	}
	if x0, x1, y0, y1 := b.DataRange(); x0 != 1 || x1 != 2 || y0 != 0 || y1 != 3 {
		t.Errorf("range x [%v, %v] y [%v, %v], want x [1, 2] y [0, 3]", x0, x1, y0, y1)
	}
	if m, err := seriesMark(xy, []float64{0, 0}, false, 0); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*plotter.Line); !ok {
		t.Errorf("a time series drawn as %T, want a line", m)
	}
}
