package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plot is a figure of one or more panels laid out in a grid.
type Plot struct {
	rows          [][]*plot.Plot
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
			if pl != nil {
				pl.Draw(canvases[j][i])
			}
		}
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

const (
	panelWidth  = 6 * vg.Inch
	panelHeight = 3.5 * vg.Inch
)

// grid lays panels out in about a square.
func grid(panels []*plot.Plot) Plot {
	n := len(panels)
	cols := int(math.Ceil(math.Sqrt(float64(n))))
	rows := (n + cols - 1) / cols
	out := Plot{width: panelWidth * vg.Length(cols), height: panelHeight * vg.Length(rows)}
	for r := range rows {
		row := make([]*plot.Plot, cols)
		for c := range cols {
			if k := r*cols + c; k < n {
				row[c] = panels[k]
			}
		}
		out.rows = append(out.rows, row)
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

// tenantGroups returns the tenants grouped by the GPU they ended on, the
// groups in GPU index order.
func tenantGroups(r *Recorder) (titles []string, groups [][]string) {
	sum := r.Summary()
	index := map[string]int{}
	for _, g := range sum.GPUs {
		index[g.UUID] = g.Index
	}
	byGPU := map[string][]string{}
	var gpus []string
	for _, t := range sum.Tenants {
		if _, ok := byGPU[t.GPU]; !ok {
			gpus = append(gpus, t.GPU)
		}
		byGPU[t.GPU] = append(byGPU[t.GPU], t.Tenant)
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
		groups = append(groups, byGPU[g])
	}
	return titles, groups
}

func shortUUID(u string) string {
	if len(u) > 16 {
		return u[:16] + "…"
	}
	return u
}

// tenantXY collects one tenant's values over the steps; f returns false
// for a step without a value.
func tenantXY(steps []Step, tenant string, div float64, f func(TenantStep) (float64, bool)) plotter.XYs {
	var xy plotter.XYs
	for _, st := range steps {
		for _, t := range st.Tenants {
			if t.Tenant != tenant {
				continue
			}
			if v, ok := f(t); ok {
				xy = append(xy, plotter.XY{X: st.T / div, Y: v})
			}
		}
	}
	return xy
}

// plainTicks are gonum's default ticks labelled without trailing zeros.
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'g', 6, 64)
		}
	}
	return ticks
}

func newPanel(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.X.Tick.Marker = plainTicks{}
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

func addLine(p *plot.Plot, xy plotter.XYs, c color.Color, dashed bool, legend string) error {
	if len(xy) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
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

// tenantPanels draws one panel per GPU with panel, given the GPU's title,
// the time axis and the tenants that ended on it, and lays them out.
func tenantPanels(r *Recorder, panel func(title, xlabel string, steps []Step, div float64, tenants []string) (*plot.Plot, error)) (Plot, error) {
	steps := r.Steps()
	if len(steps) == 0 {
		return Plot{}, errNoData
	}
	div, xlabel := timeAxis(steps)
	titles, groups := tenantGroups(r)
	var panels []*plot.Plot
	for gi, tenants := range groups {
		p, err := panel(titles[gi], xlabel, steps, div, tenants)
		if err != nil {
			return Plot{}, err
		}
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return Plot{}, errNoData
	}
	return grid(panels), nil
}

// LatencyPlot draws, per GPU, each tenant's p99 request latency per step
// (solid, log scale) against its SLO target (dashed, same colour).
func LatencyPlot(r *Recorder) (Plot, error) {
	return tenantPanels(r, func(title, xlabel string, steps []Step, div float64, tenants []string) (*plot.Plot, error) {
		p := newPanel(title+": p99 latency vs SLO target", xlabel, "seconds (log)")
		points := 0
		for ti, name := range tenants {
			c := plotutil.Color(ti)
			xy := tenantXY(steps, name, div, func(t TenantStep) (float64, bool) {
				if t.P99 == nil || *t.P99 <= 0 {
					return 0, false
				}
				return *t.P99, true
			})
			points += len(xy)
			if err := addLine(p, xy, c, false, name+" p99"); err != nil {
				return nil, err
			}
			target := tenantXY(steps, name, div, func(t TenantStep) (float64, bool) { return t.SLOTarget, t.SLOTarget > 0 })
			points += len(target)
			if err := addLine(p, target, c, true, ""); err != nil {
				return nil, err
			}
		}
		if points > 0 {
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
			p.Y.Max *= 4 // room above the data for the legend
		} else {
			p.Title.Text = title + ": no requests"
		}
		return p, nil
	})
}

// SharesPlot draws, per GPU, each tenant's SM share (solid) and HBM
// bandwidth share (dashed) per step.
func SharesPlot(r *Recorder) (Plot, error) {
	return tenantPanels(r, func(title, xlabel string, steps []Step, div float64, tenants []string) (*plot.Plot, error) {
		p := newPanel(title+": shares", xlabel, "SM share (solid), BW share (dashed)")
		p.Y.Min, p.Y.Max = 0, 1.25 // room above the data for the legend
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
// per step, one panel each.
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
		unit          bool
	}
	defs := []panel{
		{"SM active", "ratio", func(g GPUStep) float64 { return g.SMActive }, true},
		{"DRAM active", "ratio", func(g GPUStep) float64 { return g.DRAMActive }, true},
		{"SM clock", "MHz", func(g GPUStep) float64 { return g.SMClockMHz }, false},
		{"Power", "W", func(g GPUStep) float64 { return g.PowerW }, false},
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
		// Room above the data for the legend.
		p.Y.Min = 0
		if d.unit {
			p.Y.Max = 1.25
		} else {
			p.Y.Max = math.Max(p.Y.Max, 1) * 1.25
		}
		panels = append(panels, p)
	}
	return grid(panels), nil
}
