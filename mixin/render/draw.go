package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

const (
	columns     = 3
	tileWidth   = 5.5 * vg.Inch
	tileHeight  = 3.4 * vg.Inch
	titleHeight = 0.5 * vg.Inch
	// maxSeries is the most lines a panel draws (and lists in its legend).
	maxSeries   = 8
	maxLegendLn = 44
)

// scale returns the factor a panel's values are multiplied by and the
// label of its axis for a Grafana unit.
func scale(unit string) (float64, string) {
	switch unit {
	case "percentunit":
		return 100, "%"
	case "bytes":
		return 1.0 / (1 << 30), "GiB"
	case "hertz":
		return 1e-6, "MHz"
	case "watt":
		return 1, "W"
	case "celsius":
		return 1, "°C"
	case "s":
		return 1, "s"
	case "ops":
		return 1, "per second"
	case "reqps":
		return 1, "requests per second"
	}
	return 1, ""
}

// writeGrid draws the panels as a grid, columns wide, under the
// dashboard's title, into the PNG file path.
func writeGrid(path, title string, panels []panelData, begin time.Time) error {
	plots := make([]*plot.Plot, len(panels))
	for i, p := range panels {
		switch p.Type {
		case "timeseries":
			plots[i] = timeseriesPlot(p)
		case "table":
			plots[i] = tablePlot(p)
		default:
			plots[i] = valuesPlot(p)
		}
	}
	rows := (len(plots) + columns - 1) / columns
	grid := make([][]*plot.Plot, rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, columns)
		for c := range columns {
			if k := r*columns + c; k < len(plots) {
				grid[r][c] = plots[k]
			}
		}
	}
	width, height := tileWidth*columns, tileHeight*vg.Length(rows)+titleHeight
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(96), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	style := text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, 18), Handler: plot.DefaultTextHandler, XAlign: draw.XCenter, YAlign: draw.YCenter}
	dc.FillText(style, vg.Point{X: width / 2, Y: height - titleHeight/2}, fmt.Sprintf("%s (simulated run from %s UTC)", title, begin.UTC().Format("2006-01-02 15:04")))
	body := draw.Crop(dc, 0, 0, 0, -titleHeight)
	tiles := draw.Tiles{Rows: rows, Cols: columns, PadX: vg.Millimeter * 5, PadY: vg.Millimeter * 5,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align(grid, tiles, body)
	for r, row := range grid {
		for c, p := range row {
			if p != nil {
				p.Draw(canvases[r][c])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func newPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = 12
	p.Legend.TextStyle.Font.Size = 8
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.ThumbnailWidth = 0.4 * vg.Centimeter
	p.X.Tick.Marker, p.Y.Tick.Marker = tidyTicks{}, tidyTicks{}
	return p
}

// tidyTicks are gonum's default ticks without needless decimals: "500",
// not "500.00"; "0.5", not "0.50".
type tidyTicks struct{}

// Ticks implements plot.Ticker.
func (tidyTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i, t := range ticks {
		ticks[i].Label = tidyLabel(t.Label)
	}
	return ticks
}

// tidyLabel drops the trailing zeros of a tick label's decimals (and the
// point they leave); a label with an exponent is left as it is.
func tidyLabel(s string) string {
	if !strings.Contains(s, ".") || strings.ContainsAny(s, "eE") {
		return s
	}
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

func shorten(s string) string {
	if r := []rune(s); len(r) > maxLegendLn {
		return string(r[:maxLegendLn-1]) + "…"
	}
	return s
}

// timeseriesPlot draws the series of a time series panel over the run,
// stacked when the panel stacks.
func timeseriesPlot(pd panelData) *plot.Plot {
	p := newPlot(pd.Title)
	factor, unit := scale(pd.FieldConfig.Defaults.Unit)
	p.X.Label.Text = "minutes into the run"
	p.Y.Label.Text = unit
	p.Y.Min = 0
	ss := pd.series
	if len(ss) > maxSeries {
		ss = ss[:maxSeries]
	}
	stacked := map[float64]float64{}
	top, drawn := 0.0, 0
	for i, s := range ss {
		xy := make(plotter.XYs, len(s.t))
		base := make([]float64, len(s.t))
		for k := range s.t {
			v := s.v[k] * factor
			if pd.FieldConfig.Defaults.Custom.Stacking.Mode == "normal" {
				base[k] = stacked[s.t[k]]
				v += base[k]
				stacked[s.t[k]] = v
			}
			xy[k] = plotter.XY{X: s.t[k] / 60, Y: v}
			top = math.Max(top, v)
			p.Y.Min = math.Min(p.Y.Min, v)
		}
		if len(xy) == 0 {
			continue
		}
		mark, err := seriesMark(xy, base, pd.FieldConfig.Defaults.Custom.DrawStyle == "bars", i)
		if err != nil {
			continue
		}
		p.Add(mark)
		p.Legend.Add(shorten(s.name), mark)
		drawn++
	}
	if len(pd.series) > maxSeries {
		p.Legend.Add(fmt.Sprintf("(%d more series)", len(pd.series)-maxSeries))
	}
	if drawn == 0 {
		noData(p)
		return p
	}
	if top <= 0 {
		top = 1
	}
	if pd.minutes > 0 {
		p.X.Min, p.X.Max = 0, pd.minutes
	}
	// Room above the lines for the legend.
	p.Y.Max = top * (1.1 + 0.09*float64(drawn+min(len(pd.series)-len(ss), 1)))
	p.Add(plotter.NewGrid())
	return p
}

// valuesPlot lists the values of a stat panel, one line each.
func valuesPlot(pd panelData) *plot.Plot {
	p := newPlot(pd.Title)
	p.HideAxes()
	factor, unit := scale(pd.FieldConfig.Defaults.Unit)
	ss := pd.series
	if len(ss) > 2*maxSeries {
		ss = ss[:2*maxSeries]
	}
	var labels plotter.XYLabels
	for i, s := range ss {
		name := s.name
		if name == "" {
			name = "value"
		}
		v := "no data"
		if len(s.v) > 0 {
			v = strconv.FormatFloat(s.v[len(s.v)-1]*factor, 'g', 4, 64) + " " + unit
		}
		labels.XYs = append(labels.XYs, plotter.XY{X: 0.02, Y: float64(len(ss) - i)})
		labels.Labels = append(labels.Labels, shorten(name)+":  "+v)
	}
	if len(ss) == 0 {
		noData(p)
		return p
	}
	l, err := plotter.NewLabels(labels)
	if err == nil {
		// Labels wider than the tile would squeeze the grid's other
		// panels (gonum pads a plot to fit its glyphs).
		size := 16.0
		for _, t := range labels.Labels {
			if len(ss) > 3 || len([]rune(t)) > 24 {
				size = 9
			}
		}
		for i := range l.TextStyle {
			l.TextStyle[i].Font.Size = font.Length(size)
		}
		p.Add(l)
	}
	p.X.Min, p.X.Max = 0, 1
	p.Y.Min, p.Y.Max = 0, float64(len(ss))+1
	return p
}

func noData(p *plot.Plot) {
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: 0.4, Y: 0.5}}, Labels: []string{"no data"}})
	if err == nil {
		p.Add(l)
	}
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
}

// mark is what draws one series: a line, or bars.
type mark interface {
	plot.Plotter
	plot.Thumbnailer
}

// seriesMark draws the i-th series of a panel: a line through xy, or for a
// panel of events a bar at each point from base (the series stacked below)
// up to the point.
func seriesMark(xy plotter.XYs, base []float64, asBars bool, i int) (mark, error) {
	if asBars {
		return &bars{xy: xy, base: base, color: plotutil.Color(i)}, nil
	}
	line, err := plotter.NewLine(xy)
	if err != nil {
		return nil, err
	}
	line.Color = plotutil.Color(i)
	line.Width = vg.Points(1.2)
	line.Dashes = plotutil.Dashes(i / 7)
	return line, nil
}

// bars draws a narrow bar at each point, from its base up to it: one
// interval's events, stacked on the series below.
type bars struct {
	xy    plotter.XYs
	base  []float64
	color color.Color
}

const barWidth = 3 // points

// Plot implements plot.Plotter.
func (b *bars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	c.SetColor(b.color)
	for k, pt := range b.xy {
		x := trX(pt.X)
		r := vg.Rectangle{Min: vg.Point{X: x - barWidth/2, Y: trY(b.base[k])}, Max: vg.Point{X: x + barWidth/2, Y: trY(pt.Y)}}
		c.Fill(r.Path())
	}
}

// DataRange implements plot.DataRanger.
func (b *bars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax, ymin, ymax = plotter.XYRange(b.xy)
	for _, v := range b.base {
		ymin = math.Min(ymin, v)
	}
	return xmin, xmax, ymin, ymax
}

// Thumbnail implements plot.Thumbnailer.
func (b *bars) Thumbnail(c *draw.Canvas) {
	c.SetColor(b.color)
	c.Fill(c.Rectangle.Path())
}
