package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/recorder"
)

// costPanel is the chargeback dashboard's cost table as its JSON gives it:
// three queries merged, the values and the currency label renamed.
const costPanel = `{"type": "table", "title": "Cost per tenant, last 24 hours",
 "fieldConfig": {"defaults": {"decimals": 2, "unit": "short"}},
 "targets": [{"refId": "A", "expr": "a"}, {"refId": "B", "expr": "b"}, {"refId": "C", "expr": "c"}],
 "transformations": [{"id": "merge", "options": {}}, {"id": "organize", "options":
   {"renameByName": {"Value #A": "GPU time", "Value #B": "Energy", "Value #C": "Cost", "currency": "Currency"}}}]}`

func costTable(t *testing.T) panelData {
	t.Helper()
	var pd panelData
	if err := json.Unmarshal([]byte(costPanel), &pd.panel); err != nil {
		t.Fatal(err)
	}
	row := func(ref, tenant string, v float64) series {
		return series{ref: ref, labels: map[string]string{"tenant": tenant, "currency": "USD", "job": "vgpu", "instance": "h1"}, t: []float64{240}, v: []float64{v}}
	}
	// Embed first and a cell missing (no energy price): rows come sorted
	// by tenant, an empty cell stays empty.
	pd.series = []series{row("A", "embed", 0.0815), row("C", "embed", 0.0815), row("A", "chat", 0.0898), row("B", "chat", 0.0019), row("C", "chat", 0.0917)}
	return pd
}

func TestTableOf(t *testing.T) {
	two := 2
	for _, tc := range []struct {
		name   string
		pd     func(*testing.T) panelData
		header []string
		rows   [][]string
	}{
		{"cost", costTable, []string{"tenant", "Currency", "GPU time", "Energy", "Cost"},
			[][]string{{"chat", "USD", "0.09", "0.00", "0.09"}, {"embed", "USD", "0.08", "", "0.08"}}},
		{"one query, unit", func(*testing.T) panelData {
			var pd panelData
			pd.Type, pd.FieldConfig.Defaults.Unit = "table", "watt"
			pd.Targets = append(pd.Targets, costTableTarget("A"))
			pd.series = []series{{ref: "A", labels: map[string]string{"gpu": "1"}, v: []float64{12345.6}}, {ref: "A", labels: map[string]string{"gpu": "0"}, v: []float64{0.012621}}}
			return pd
		}, []string{"gpu", "Value"}, [][]string{{"0", "0.01262 W"}, {"1", "12346 W"}}},
		{"decimals", func(*testing.T) panelData {
			var pd panelData
			pd.FieldConfig.Defaults.Decimals = &two
			pd.Targets = append(pd.Targets, costTableTarget("A"))
			pd.series = []series{{ref: "A", labels: map[string]string{"tenant": "a"}, v: []float64{1}}}
			return pd
		}, []string{"tenant", "Value"}, [][]string{{"a", "1.00"}}},
		// The overview's error budget left: 0 or below reads "overspent", as
		// the panel's range mapping has Grafana show it.
		{"range mapping", func(t *testing.T) panelData {
			var pd panelData
			if err := json.Unmarshal([]byte(`{"type": "table", "fieldConfig": {"defaults": {"unit": "percentunit",
			  "mappings": [{"type": "range", "options": {"to": 0, "result": {"text": "overspent"}}}]}}}`), &pd.panel); err != nil {
				t.Fatal(err)
			}
			pd.Targets = append(pd.Targets, costTableTarget("A"))
			pd.series = []series{{ref: "A", labels: map[string]string{"tenant": "a"}, v: []float64{-89.13}}, {ref: "A", labels: map[string]string{"tenant": "b"}, v: []float64{0.25}}, {ref: "A", labels: map[string]string{"tenant": "c"}, v: []float64{0}}}
			return pd
		}, []string{"tenant", "Value"}, [][]string{{"a", "overspent"}, {"b", "25 %"}, {"c", "overspent"}}},
	} {
		got := tableOf(tc.pd(t))
		if !slices.Equal(got.header, tc.header) {
			t.Errorf("%s: header %q, want %q", tc.name, got.header, tc.header)
		}
		if !slices.EqualFunc(got.rows, tc.rows, slices.Equal) {
			t.Errorf("%s: rows %q, want %q", tc.name, got.rows, tc.rows)
		}
	}
}

func costTableTarget(ref string) (t struct {
	RefID        string `json:"refId"`
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
	Instant      bool   `json:"instant"`
}) {
	t.RefID = ref
	return t
}

// drawn returns the strings a plot of pd draws, in order, on a tile of
// the grid's size.
func drawn(t *testing.T, pd panelData, height vg.Length) []string {
	t.Helper()
	rec := &recorder.Canvas{}
	tablePlot(pd).Draw(draw.NewCanvas(rec, tileWidth, height))
	var out []string
	for _, a := range rec.Actions {
		if fs, ok := a.(*recorder.FillString); ok {
			out = append(out, fs.String)
		}
	}
	return out
}

// TestTablePlot: the title, the column names, then the cells row by row;
// rows that do not fit are counted, not drawn.
func TestTablePlot(t *testing.T) {
	got := drawn(t, costTable(t), tileHeight)
	want := []string{"Cost per tenant, last 24 hours", "tenant", "Currency", "GPU time", "Energy", "Cost",
		"chat", "USD", "0.09", "0.00", "0.09", "embed", "USD", "0.08", "0.08"} // an empty cell draws nothing
	if !slices.Equal(got, want) {
		t.Errorf("drew %q, want %q", got, want)
	}
	pd := costTable(t)
	for i := range 40 {
		pd.series = append(pd.series, series{ref: "A", labels: map[string]string{"tenant": strings.Repeat("t", i+1)}, v: []float64{1}})
	}
	got = drawn(t, pd, tileHeight)
	last := got[len(got)-1]
	if !strings.HasPrefix(last, "(") || !strings.HasSuffix(last, " more rows)") {
		t.Errorf("42 rows on one tile end with %q, want a count of the rows left out", last)
	}
	if slices.Contains(got, strings.Repeat("t", 40)) {
		t.Error("the 42nd row was drawn")
	}
	if got := drawn(t, panelData{panel: pd.panel}, tileHeight); !slices.Contains(got, "no data") {
		t.Errorf("a table of nothing drew %q, want no data", got)
	}
}

func TestTidyLabel(t *testing.T) {
	for in, want := range map[string]string{
		"500.00": "500", "0.50": "0.5", "0.8": "0.8", "250": "250", "0.00": "0", "1e+06": "1e+06", "": "", "12.05": "12.05",
	} {
		if got := tidyLabel(in); got != want {
			t.Errorf("tidyLabel(%q) = %q, want %q", in, got, want)
		}
	}
	for _, tk := range (tidyTicks{}).Ticks(0, 550) {
		if strings.Contains(tk.Label, ".") {
			t.Errorf("tick %q on [0, 550]", tk.Label)
		}
	}
}
