package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plot is a figure of one or more panels laid out in a grid, each panel's
// legend in a strip at its right, outside the data.
type Plot struct {
	rows          [][]*plot.Plot
	legends       [][]plot.Legend
	width, height vg.Length
}

// Panels returns the number of panels.
func (p Plot) Panels() int {
	n := 0
	for _, r := range p.rows {
		for _, c := range r {
			if c != nil {
				n++
			}
		}
	}
	return n
}

// WritePNG renders the figure as a PNG image.
func (p Plot) WritePNG(w io.Writer) error {
	img := vgimg.NewWith(vgimg.UseWH(p.width, p.height), vgimg.UseDPI(96), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(p.rows), Cols: len(p.rows[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(p.rows, tiles, dc)
	for j, row := range p.rows {
		for i, pl := range row {
			if pl == nil {
				continue
			}
			// Every panel of a column loses the same strip: the data areas
			// stay aligned.
			c := canvases[j][i]
			c.Max.X -= legendWidth
			pl.Draw(c)
			strip := pl.DataCanvas(c)
			strip.Min.X, strip.Max.X = c.Max.X+vg.Millimeter*2, c.Max.X+legendWidth
			p.legends[j][i].Draw(strip)
		}
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

const (
	panelWidth  = 6 * vg.Inch
	panelHeight = 3.5 * vg.Inch
	// legendWidth is the strip right of each panel that holds its legend.
	legendWidth = 1.6 * vg.Inch
)

// grid lays panels out in about a square, taking their legends out of
// the data area.
func grid(panels []*plot.Plot) Plot {
	n := len(panels)
	cols := int(math.Ceil(math.Sqrt(float64(n))))
	rows := (n + cols - 1) / cols
	out := Plot{width: (panelWidth + legendWidth) * vg.Length(cols), height: panelHeight * vg.Length(rows)}
	for r := range rows {
		row := make([]*plot.Plot, cols)
		legends := make([]plot.Legend, cols)
		for c := range cols {
			if k := r*cols + c; k < n {
				row[c] = panels[k]
				legends[c] = panels[k].Legend
				legends[c].Top, legends[c].Left = true, true
				legends[c].TextStyle.Font.Size = vg.Points(10)
				legends[c].Padding = vg.Points(3)
				panels[k].Legend = plot.NewLegend()
			}
		}
		out.rows = append(out.rows, row)
		out.legends = append(out.legends, legends)
	}
	return out
}

// timeAxis returns the divisor and label of the x axis: minutes for runs
// longer than ten minutes, seconds otherwise.
func timeAxis(steps []Step) (float64, string) {
	if len(steps) > 0 && steps[len(steps)-1].T > 600 {
		return 60, "time (min)"
	}
	return 1, "time (s)"
}

// tenantGroups returns the tenants grouped by the GPU (UUID) they ended on,
// the groups in GPU index order: the tenants and GPUs of the Summary,
// without its figures.
func tenantGroups(r *Recorder) (titles, uuids []string, groups [][]string) {
	index := map[string]int{}
	for _, uuid := range r.gorder {
		index[uuid] = r.gpus[uuid].index
	}
	names := slices.Clone(r.order)
	sort.Strings(names)
	byGPU := map[string][]string{}
	var gpus []string
	for _, name := range names {
		g := r.tenants[name].gpu
		if _, ok := byGPU[g]; !ok {
			gpus = append(gpus, g)
		}
		byGPU[g] = append(byGPU[g], name)
	}
	sort.SliceStable(gpus, func(i, j int) bool {
		ii, iok := index[gpus[i]]
		jj, jok := index[gpus[j]]
		if iok != jok {
			return iok
		}
		if ii != jj {
			return ii < jj
		}
		return gpus[i] < gpus[j]
	})
	for _, g := range gpus {
		title := g
		if i, ok := index[g]; ok {
			title = fmt.Sprintf("GPU %d (%s)", i, shortUUID(g))
		}
		titles = append(titles, title)
		uuids = append(uuids, g)
		groups = append(groups, byGPU[g])
	}
	return titles, uuids, groups
}

func shortUUID(u string) string {
	if len(u) > 16 {
		return u[:16] + "…"
	}
	return u
}

// tenantXY collects one tenant's values over the steps; f returns false
// for a step without a value. A step's tenants are in name order (Add
// sorts them), so each step's are found by a binary search.
func tenantXY(steps []Step, tenant string, div float64, f func(TenantStep) (float64, bool)) plotter.XYs {
	var xy plotter.XYs
	for _, st := range steps {
		i, _ := slices.BinarySearchFunc(st.Tenants, tenant, func(t TenantStep, name string) int { return strings.Compare(t.Tenant, name) })
		for _, t := range st.Tenants[i:] {
			if t.Tenant != tenant {
				break
			}
			if v, ok := f(t); ok {
				xy = append(xy, plotter.XY{X: st.T / div, Y: v})
			}
		}
	}
	return xy
}

// plainTicks are gonum's default ticks labelled without trailing zeros
// ("500", not "500.00").
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = tickLabel(ticks[i].Value)
		}
	}
	return ticks
}

// logTicks mark an axis of log10 values (a linear axis: gonum centres the
// label of a log-scaled one off the middle) at 1, 2 and 5 times the powers
// of ten, labelled with the values (every digit when that gives fewer than
// two labels: a range inside one decade), with minor ticks at the other
// digits.
type logTicks struct{}

func (logTicks) Ticks(lmin, lmax float64) []plot.Tick {
	min, max := math.Pow(10, lmin), math.Pow(10, lmax)
	if min <= 0 || max <= min || math.IsInf(max, 0) {
		return nil
	}
	var ticks []plot.Tick
	labelled := 0
	for _, digits := range [][]float64{{1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}} {
		ticks, labelled = ticks[:0], 0
		for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
			for d := 1.0; d <= 9; d++ {
				v := d * math.Pow(10, e)
				if v < min*(1-1e-9) || v > max*(1+1e-9) {
					continue
				}
				t := plot.Tick{Value: math.Log10(v)}
				if slices.Contains(digits, d) {
					t.Label = tickLabel(v)
					labelled++
				}
				ticks = append(ticks, t)
			}
		}
		if labelled >= 2 {
			break
		}
	}
	return ticks
}

// tickLabel renders a tick value with at most six significant digits, no
// trailing zeros and no exponent.
func tickLabel(v float64) string {
	return strconv.FormatFloat(round6(v), 'f', -1, 64)
}

func newPanel(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.X.Tick.Marker = plainTicks{}
	p.Y.Tick.Marker = plainTicks{}
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	return p
}

func addLine(p *plot.Plot, xy plotter.XYs, c color.Color, dashed bool, legend string) error {
	if len(xy) == 0 {
		return nil
	}
	pl, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l := &line{Line: pl}
	l.LineStyle.Color = c
	l.LineStyle.Width = vg.Points(1.2)
	if dashed {
		l.LineStyle.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	}
	p.Add(l)
	if legend != "" {
		p.Legend.Add(legend, l)
	}
	return nil
}

// line is a plotter.Line whose glyph boxes (one per point: the layout
// pads the data area so that none is clipped) are only those that can
// decide the padding, worked out once for the plot and axis ranges they
// are asked for: laying out and drawing a panel asks for them several
// times (plot.Align, Plot.Draw, Plot.DataCanvas), and the drawing changes
// nothing else they depend on (it may widen an empty axis range).
type line struct {
	*plotter.Line
	boxes []plot.GlyphBox
	of    *plot.Plot
	axes  [4]float64 // X.Min, X.Max, Y.Min, Y.Max of the boxes
}

// GlyphBoxes returns plotter.Line's glyph boxes for p, in their order,
// less those that cannot be the left-, right-, top- or bottom-most (and
// those outside the axes, which the plot drops). Every box has the same
// size, so a box more than glyphSlack (of the axis) inside all of the
// line's extremes lies that fraction of the data area, far more than any
// rounding, inside a box the layout compares it with: the layout, which
// takes the first box at the extreme, takes the same one. The slice is
// shared: the plot copies the boxes it keeps.
func (l *line) GlyphBoxes(p *plot.Plot) []plot.GlyphBox {
	axes := [4]float64{p.X.Min, p.X.Max, p.Y.Min, p.Y.Max}
	if l.boxes != nil && l.of == p && l.axes == axes {
		return l.boxes
	}
	all := l.Line.GlyphBoxes(p)
	in := func(b plot.GlyphBox) bool { return b.X >= 0 && b.X <= 1 && b.Y >= 0 && b.Y <= 1 }
	minX, maxX, minY, maxY := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, b := range all {
		if in(b) {
			minX, maxX = min(minX, b.X), max(maxX, b.X)
			minY, maxY = min(minY, b.Y), max(maxY, b.Y)
		}
	}
	boxes := all[:0]
	for _, b := range all {
		if in(b) && (b.X <= minX+glyphSlack || b.X >= maxX-glyphSlack || b.Y <= minY+glyphSlack || b.Y >= maxY-glyphSlack) {
			boxes = append(boxes, b)
		}
	}
	l.boxes, l.of, l.axes = boxes, p, axes
	return l.boxes
}

// glyphSlack is how far inside its line's extremes (as a fraction of the
// axis) a glyph box is left out of the layout: a millionth of a panel is
// a billion times the rounding of its coordinates.
const glyphSlack = 1e-6

// tenantPanels draws one panel per GPU with panel, given the GPU's title,
// the time axis and the tenants that ended on it, marks the changes
// applied on the GPU and lays the panels out.
func tenantPanels(r *Recorder, panel func(title, xlabel string, steps []Step, div float64, tenants []string) (*plot.Plot, error)) (Plot, error) {
	steps := r.Steps()
	if len(steps) == 0 {
		return Plot{}, errNoData
	}
	div, xlabel := timeAxis(steps)
	titles, uuids, groups := tenantGroups(r)
	var panels []*plot.Plot
	for gi, tenants := range groups {
		p, err := panel(titles[gi], xlabel, steps, div, tenants)
		if err != nil {
			return Plot{}, err
		}
		addChanges(p, r.changeTimes(uuids[gi]), div)
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return Plot{}, errNoTenants
	}
	return grid(panels), nil
}

// sloQuantile is the quantile the latency plot draws for a tenant: its
// SLO's, or 0.99 without one.
func (r *Recorder) sloQuantile(tenant string) float64 {
	if a := r.tenants[tenant]; a != nil && a.sloTarget > 0 && a.sloQuantile > 0 {
		return a.sloQuantile
	}
	return 0.99
}

// LatencyPlot draws, per GPU, each tenant's request latency at its SLO's
// quantile (p99 without an SLO) over a sliding QuantileWindow (solid, log
// scale) against its SLO target (dashed, same colour), and the changes
// applied on the GPU.
func LatencyPlot(r *Recorder) (Plot, error) {
	return tenantPanels(r, func(title, xlabel string, steps []Step, div float64, tenants []string) (*plot.Plot, error) {
		p := newPanel(title+": latency vs SLO target (dashed)", xlabel,
			"seconds (log), last "+windowLabel(QuantileWindow))
		points := 0
		for ti, name := range tenants {
			c := plotutil.Color(ti)
			q := r.sloQuantile(name)
			var xy plotter.XYs
			for _, pt := range r.WindowQuantiles(name, q, QuantileWindow) {
				if pt.V > 0 {
					xy = append(xy, plotter.XY{X: pt.T / div, Y: math.Log10(pt.V)})
				}
			}
			points += len(xy)
			if err := addLine(p, xy, c, false, name+" p"+tickLabel(q*100)); err != nil {
				return nil, err
			}
			target := tenantXY(steps, name, div, func(t TenantStep) (float64, bool) { return math.Log10(t.SLOTarget), t.SLOTarget > 0 })
			points += len(target)
			if err := addLine(p, target, c, true, ""); err != nil {
				return nil, err
			}
		}
		if points > 0 {
			p.Y.Tick.Marker = logTicks{}
		} else {
			p.Title.Text = title + ": no requests"
		}
		return p, nil
	})
}

// windowLabel renders a window length for an axis label: "1 min", "30 s".
func windowLabel(d time.Duration) string {
	if d >= time.Minute && d%time.Minute == 0 {
		return strconv.Itoa(int(d/time.Minute)) + " min"
	}
	return tickLabel(d.Seconds()) + " s"
}

// SharesPlot draws, per GPU, each tenant's SM share (solid) and HBM
// bandwidth share (dashed) per step, and the changes applied on the GPU.
func SharesPlot(r *Recorder) (Plot, error) {
	return tenantPanels(r, func(title, xlabel string, steps []Step, div float64, tenants []string) (*plot.Plot, error) {
		p := newPanel(title+": shares", xlabel, "share: SM (solid), BW (dashed)")
		p.Y.Min, p.Y.Max = 0, 1
		for ti, name := range tenants {
			c := plotutil.Color(ti)
			sm := tenantXY(steps, name, div, func(t TenantStep) (float64, bool) { return t.SMShare, true })
			bw := tenantXY(steps, name, div, func(t TenantStep) (float64, bool) { return t.BWShare, true })
			if err := addLine(p, sm, c, false, name); err != nil {
				return nil, err
			}
			if err := addLine(p, bw, c, true, ""); err != nil {
				return nil, err
			}
		}
		return p, nil
	})
}

// GPUPlot draws each GPU's SM activity, DRAM activity, SM clock and power
// per step, one panel each, and the changes applied on any GPU.
func GPUPlot(r *Recorder) (Plot, error) {
	steps := r.Steps()
	if len(steps) == 0 {
		return Plot{}, errNoData
	}
	div, xlabel := timeAxis(steps)
	var uuids []string
	seen := map[string]bool{}
	for _, st := range steps {
		for _, g := range st.GPUs {
			if !seen[g.UUID] {
				seen[g.UUID] = true
				uuids = append(uuids, g.UUID)
			}
		}
	}
	if len(uuids) == 0 {
		return Plot{}, errNoData
	}
	type panel struct {
		title, ylabel string
		f             func(GPUStep) float64
		ratio         bool
	}
	defs := []panel{
		{"SM active", "ratio", func(g GPUStep) float64 { return g.SMActive }, true},
		{"DRAM active", "ratio", func(g GPUStep) float64 { return g.DRAMActive }, true},
		{"SM clock", "clock (MHz)", func(g GPUStep) float64 { return g.SMClockMHz }, false},
		{"Power", "power (W)", func(g GPUStep) float64 { return g.PowerW }, false},
	}
	var panels []*plot.Plot
	for _, d := range defs {
		p := newPanel(d.title, xlabel, d.ylabel)
		for gi, u := range uuids {
			var xy plotter.XYs
			name := u
			for _, st := range steps {
				for _, g := range st.GPUs {
					if g.UUID == u {
						xy = append(xy, plotter.XY{X: st.T / div, Y: d.f(g)})
						name = fmt.Sprintf("GPU %d", g.Index)
					}
				}
			}
			if err := addLine(p, xy, plotutil.Color(gi), gi >= len(plotutil.DefaultColors), name); err != nil {
				return Plot{}, err
			}
		}
		p.Y.Min = 0
		if d.ratio {
			p.Y.Max = 1
		} else {
			p.Y.Max = math.Max(p.Y.Max, 1) * 1.05
		}
		addChanges(p, r.changeTimes(""), div)
		panels = append(panels, p)
	}
	return grid(panels), nil
}

// changeMarks draws a vertical line across the data area at each change.
type changeMarks struct {
	xs    []float64
	style draw.LineStyle
}

var changeStyle = draw.LineStyle{Color: color.Gray{Y: 110}, Width: vg.Points(0.8), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}}

// addChanges marks the changes at times (seconds since the start of the
// run) on p, with one legend entry.
func addChanges(p *plot.Plot, times []float64, div float64) {
	if len(times) == 0 {
		return
	}
	m := changeMarks{style: changeStyle}
	for _, t := range times {
		m.xs = append(m.xs, t/div)
	}
	p.Add(m)
	p.Legend.Add("change applied", m)
}

// Plot implements plot.Plotter.
func (m changeMarks) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, x := range m.xs {
		if x < p.X.Min || x > p.X.Max {
			continue
		}
		c.StrokeLine2(m.style, trX(x), c.Min.Y, trX(x), c.Max.Y)
	}
}

// Thumbnail implements plot.Thumbnailer.
func (m changeMarks) Thumbnail(c *draw.Canvas) {
	x := (c.Min.X + c.Max.X) / 2
	c.StrokeLine2(m.style, x, c.Min.Y, x, c.Max.Y)
}
