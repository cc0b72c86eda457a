package main

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// table is what a table panel shows: Grafana's merge of its instant
// queries, a row per label set (per tenant), a column per label and then
// one per query, named by the panel's organize transformation.
type table struct {
	header []string
	rows   [][]string
}

// hiddenLabels are the labels a table leaves out: the same on every row of
// a simulated run, or the series' name.
var hiddenLabels = map[string]bool{"__name__": true, "job": true, "cluster": true, "instance": true, "uuid": true}

// tableOf merges the series of a table panel into rows, its values
// formatted with the panel's unit and decimals.
func tableOf(pd panelData) table {
	rename := map[string]string{}
	for _, tr := range pd.Transformations {
		if tr.ID == "organize" {
			for k, v := range tr.Options.RenameByName {
				rename[k] = v
			}
		}
	}
	named := func(s string) string {
		if n, ok := rename[s]; ok && n != "" {
			return n
		}
		return s
	}
	var labels []string
	for _, s := range pd.series {
		for k := range s.labels {
			if !hiddenLabels[k] && !slices.Contains(labels, k) {
				labels = append(labels, k)
			}
		}
	}
	// The tenant first, as the dashboards' tables are read by tenant.
	slices.SortFunc(labels, func(a, b string) int {
		return cmp.Or(-cmp.Compare(btoi(a == "tenant"), btoi(b == "tenant")), cmp.Compare(a, b))
	})
	var refs []string
	for _, t := range pd.Targets {
		if !slices.Contains(refs, t.RefID) {
			refs = append(refs, t.RefID)
		}
	}
	for _, s := range pd.series {
		if !slices.Contains(refs, s.ref) {
			refs = append(refs, s.ref)
		}
	}
	var t table
	for _, l := range labels {
		t.header = append(t.header, named(l))
	}
	for _, r := range refs {
		col := "Value #" + r
		if len(refs) == 1 {
			col = "Value"
		}
		t.header = append(t.header, named(col))
	}
	factor, unit := scale(pd.FieldConfig.Defaults.Unit)
	index := map[string]int{}
	var keys []string
	for _, s := range pd.series {
		cells := make([]string, len(labels))
		for i, l := range labels {
			cells[i] = s.labels[l]
		}
		key := strings.Join(cells, "\x00")
		i, ok := index[key]
		if !ok {
			i = len(t.rows)
			index[key] = i
			keys = append(keys, key)
			t.rows = append(t.rows, append(cells, make([]string, len(refs))...))
		}
		if len(s.v) > 0 {
			x := s.v[len(s.v)-1]
			v, mapped := mappedText(pd.FieldConfig.Defaults.Mappings, x)
			if !mapped {
				v = formatValue(x*factor, pd.FieldConfig.Defaults.Decimals)
				if unit != "" {
					v += " " + unit
				}
			}
			t.rows[i][len(labels)+slices.Index(refs, s.ref)] = v
		}
	}
	order := make([]int, len(t.rows))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
	rows := make([][]string, len(order))
	for i, k := range order {
		rows[i] = t.rows[k]
	}
	t.rows = rows
	return t
}

// valueMapping is a Grafana value mapping: a range one shows its text for
// the values from From to To, both included (nil: unbounded).
type valueMapping struct {
	Type    string `json:"type"`
	Options struct {
		From   *float64 `json:"from"`
		To     *float64 `json:"to"`
		Result struct {
			Text string `json:"text"`
		} `json:"result"`
	} `json:"options"`
}

// mappedText is the text of the first range mapping of ms that covers v,
// as Grafana shows it in place of the value.
func mappedText(ms []valueMapping, v float64) (string, bool) {
	for _, m := range ms {
		o := m.Options
		if m.Type == "range" && (o.From == nil || v >= *o.From) && (o.To == nil || v <= *o.To) {
			return o.Result.Text, true
		}
	}
	return "", false
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// formatValue writes v with the panel's decimals, or else with four
// significant digits and no exponent above 1,000: "0.01262", "1.957",
// "12345".
func formatValue(v float64, decimals *int) string {
	switch {
	case decimals != nil:
		return strconv.FormatFloat(v, 'f', *decimals, 64)
	case v == 0:
		return "0"
	case math.Abs(v) >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// tablePlot draws a table panel: its column names, a line, its rows.
func tablePlot(pd panelData) *plot.Plot {
	p := newPlot(pd.Title)
	p.HideAxes()
	t := tableOf(pd)
	if len(t.rows) == 0 {
		noData(p)
		return p
	}
	p.Add(tableCells{t})
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	return p
}

// tableCells is the plotter of a table: text in the plot's canvas, left
// aligned columns as wide as their widest cell, the font shrunk to fit
// the width and rows beyond the height left out (and counted).
type tableCells struct{ table }

const (
	tableFont = 11 // points, at most
	cellPad   = 10 // points between columns
)

// Plot implements plot.Plotter.
func (tc tableCells) Plot(c draw.Canvas, _ *plot.Plot) {
	size := font.Length(tableFont)
	var widths []vg.Length
	for {
		widths = tc.widths(size)
		total := vg.Length(0)
		for _, w := range widths {
			total += w + cellPad
		}
		if total <= c.Max.X-c.Min.X || size <= 5 {
			break
		}
		size--
	}
	header := text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, size), Handler: plot.DefaultTextHandler, YAlign: draw.YTop}
	cell := header
	cell.Color = color.Gray{Y: 40}
	rowH := vg.Length(size) * 1.7
	y := c.Max.Y
	drawRow := func(cells []string, st text.Style) {
		x := c.Min.X
		for i, s := range cells {
			c.FillText(st, vg.Point{X: x, Y: y}, s)
			x += widths[i] + cellPad
		}
		y -= rowH
	}
	drawRow(tc.header, header)
	line := y + vg.Length(size)*0.35
	c.StrokeLine2(draw.LineStyle{Color: color.Gray{Y: 160}, Width: vg.Points(0.5)}, c.Min.X, line, c.Max.X, line)
	rows := tc.rows
	if fit := int((y - c.Min.Y) / rowH); len(rows) > fit {
		rows = rows[:max(fit-1, 0)]
	}
	for _, r := range rows {
		drawRow(r, cell)
	}
	if n := len(tc.rows) - len(rows); n > 0 {
		c.FillText(cell, vg.Point{X: c.Min.X, Y: y}, fmt.Sprintf("(%d more rows)", n))
	}
}

// widths returns each column's width at a font size: its widest cell.
func (tc tableCells) widths(size font.Length) []vg.Length {
	st := text.Style{Font: font.From(plot.DefaultFont, size), Handler: plot.DefaultTextHandler}
	w := make([]vg.Length, len(tc.header))
	for _, r := range append([][]string{tc.header}, tc.rows...) {
		for i, s := range r {
			w[i] = max(w[i], st.Width(s))
		}
	}
	return w
}
