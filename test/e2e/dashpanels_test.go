//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/dashjson"
)

// board is the part of a generated Grafana dashboard that the panel check
// reads: its template variables and its panels' targets.
type board struct {
	UID        string `json:"uid"`
	Templating struct {
		List []boardVar `json:"list"`
	} `json:"templating"`
	Panels []boardPanel `json:"panels"`
}

type boardVar struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	AllValue string `json:"allValue"`
	// Definition is a query variable's query.
	Definition string `json:"definition"`
}

type boardPanel struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	FieldConfig struct {
		Defaults struct {
			Unit   string `json:"unit"`
			Custom struct {
				// DrawStyle is "bars" on a panel of events counted per
				// interval.
				DrawStyle string `json:"drawStyle"`
			} `json:"custom"`
			Mappings []valueMapping `json:"mappings"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
		Instant      bool   `json:"instant"`
	} `json:"targets"`
}

// valueMapping is a Grafana value mapping; a range one shows its text for
// the values from From to To, each unbounded only where absent: Grafana
// reads null as 0, so the raw JSON is kept to tell null from absent.
type valueMapping struct {
	Type    string `json:"type"`
	Options struct {
		From json.RawMessage `json:"from"`
		To   json.RawMessage `json:"to"`
	} `json:"options"`
}

// mapsAllBelowZero reports whether m is a range mapping of every value
// below 0: no from (absent, not null, which Grafana reads as 0) and a
// number to of 0 or less.
func (m valueMapping) mapsAllBelowZero() bool {
	if m.Type != "range" || len(m.Options.From) != 0 || len(m.Options.To) == 0 {
		return false
	}
	var to *float64
	if err := json.Unmarshal(m.Options.To, &to); err != nil || to == nil {
		return false
	}
	return *to <= 0
}

// loadBoards reads every dashboard of dir (*.json).
func loadBoards(dir string) ([]board, error) {
	return dashjson.Load(dir, func(b *board) string { return b.UID })
}

// panelTarget is one target of one panel, and what the check found of it.
type panelTarget struct {
	board, panel, ref, unit, expr, legend string
	instant                               bool
	// bars: the panel counts events per interval; mappings: its value
	// mappings.
	bars     bool
	mappings []valueMapping
	// Once it returned data: the variables it was given and the query run.
	passed bool
	vars   map[string]string
	query  string
	// What it returned at the end with every choice of the variables.
	seen result
}

// result is what queries of a target returned: how many numbers (NaN is
// none), the label names of the series that had one, their range, a value
// that is not a whole number (fraction, when hasFraction), and the legends
// of the series as Grafana writes them.
type result struct {
	n           int
	labels      map[string]bool
	minV, maxV  float64
	fraction    float64
	hasFraction bool
	legends     map[string]bool
}

func (r *result) add(o result) {
	if o.n == 0 {
		return
	}
	if r.n == 0 {
		*r = result{labels: map[string]bool{}, minV: o.minV, maxV: o.maxV, legends: map[string]bool{}}
	}
	r.n += o.n
	r.minV, r.maxV = min(r.minV, o.minV), max(r.maxV, o.maxV)
	for k := range o.labels {
		r.labels[k] = true
	}
	for k := range o.legends {
		r.legends[k] = true
	}
	if o.hasFraction && !r.hasFraction {
		r.fraction, r.hasFraction = o.fraction, true
	}
}

func (p *panelTarget) key() string { return p.board + " / " + p.panel + " / " + p.ref }

// orZero ends a query that returns 0 where its left-hand side returns
// nothing.
const orZero = " or vector(0)"

// boardTargets lists the targets of every panel of b, rows left out; a
// target ending in orZero also as its left-hand side (ref "<ref> left of
// or vector(0)"), which always returning something would hide broken.
func boardTargets(b board) []*panelTarget {
	var out []*panelTarget
	for _, p := range b.Panels {
		if p.Type == "row" {
			continue
		}
		for _, tg := range p.Targets {
			t := &panelTarget{
				board: b.UID, panel: p.Title, ref: tg.RefID, unit: p.FieldConfig.Defaults.Unit,
				expr: tg.Expr, legend: tg.LegendFormat, instant: tg.Instant || p.Type != "timeseries",
				bars: p.FieldConfig.Defaults.Custom.DrawStyle == "bars", mappings: p.FieldConfig.Defaults.Mappings,
			}
			out = append(out, t)
			if lhs, ok := strings.CutSuffix(strings.TrimSpace(tg.Expr), orZero); ok {
				l := *t
				l.ref, l.expr = tg.RefID+" left of"+orZero, lhs
				out = append(out, &l)
			}
		}
	}
	return out
}

var (
	labelValuesRE = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)
	varRefRE      = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`)
	legendLabelRE = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
	// fractionPercentileRE finds a percentile written as a fraction in a
	// legend ("p0.99").
	fractionPercentileRE = regexp.MustCompile(`\bp0\.[0-9]`)
)

// legendOf is the legend Grafana writes for a series of labels m.
func legendOf(format string, m map[string]string) string {
	return legendLabelRE.ReplaceAllStringFunc(format, func(ref string) string {
		return m[legendLabelRE.FindStringSubmatch(ref)[1]]
	})
}

// expand substitutes the variables of vars ($name and ${name}) in s, and
// Grafana's own: $__rate_interval as Grafana makes it (four scrape
// intervals), $__interval as the step, $__range as the range queried.
func expand(s string, vars map[string]string, scrape, rng time.Duration) string {
	return varRefRE.ReplaceAllStringFunc(s, func(ref string) string {
		name := strings.Trim(ref, "${}")
		switch name {
		case "__rate_interval":
			return (4 * scrape).String()
		case "__interval":
			return scrape.String()
		case "__range":
			return fmt.Sprintf("%ds", int(rng.Seconds()))
		}
		if v, ok := vars[name]; ok {
			return v
		}
		return ref
	})
}

// regexValue is v as Grafana puts a chosen value into a regular expression
// matcher (=~"$v"): its metacharacters escaped, in a PromQL string.
func regexValue(v string) string {
	return strings.ReplaceAll(regexp.QuoteMeta(v), `\`, `\\`)
}

// dashAPI queries one Prometheus for the panel check.
type dashAPI struct {
	base       string
	scrape     time.Duration
	start, end time.Time
}

// labelValues answers a label_values(selector, label) variable query, sorted
// as Grafana sorts it (sort: 1, alphabetical).
func (a dashAPI) labelValues(q string) ([]string, error) {
	m := labelValuesRE.FindStringSubmatch(strings.TrimSpace(q))
	if m == nil {
		return nil, fmt.Errorf("variable query %q: not label_values(selector, label)", q)
	}
	u := a.base + "/api/v1/label/" + m[2] + "/values?" + url.Values{"match[]": {m[1]}}.Encode()
	var r struct {
		Status string   `json:"status"`
		Error  string   `json:"error"`
		Data   []string `json:"data"`
	}
	if err := getJSONValue(u, &r); err != nil {
		return nil, fmt.Errorf("variable query %q: %w", q, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("variable query %q: %s", q, r.Error)
	}
	slices.Sort(r.Data)
	return r.Data, nil
}

// choices returns the sets of variable values to try on b: first All for
// every variable (what the dashboard opens with), then every value of each
// variable, in order, each given the earlier ones (as an SRE picks a host,
// then one of its GPUs, ...), the variable's all value where its query
// returns none (Grafana then offers All only).
func (a dashAPI) choices(b board) ([]map[string]string, error) {
	all := map[string]string{}
	combos := []map[string]string{{}}
	for _, v := range b.Templating.List {
		if v.Type != "query" {
			continue
		}
		all[v.Name] = v.AllValue
		var next []map[string]string
		for _, c := range combos {
			vals, err := a.labelValues(expand(v.Definition, c, a.scrape, a.end.Sub(a.start)))
			if err != nil {
				return nil, fmt.Errorf("%s: $%s: %w", b.UID, v.Name, err)
			}
			picked := []string{v.AllValue}
			if len(vals) > 0 {
				picked = picked[:0]
				for _, x := range vals {
					picked = append(picked, regexValue(x))
				}
			}
			for _, x := range picked {
				nc := maps.Clone(c)
				nc[v.Name] = x
				next = append(next, nc)
			}
		}
		combos = next
	}
	return append([]map[string]string{all}, combos...), nil
}

// run runs p's query with the variables vars: instant at the end of the
// run for a stat or table target, over the run for a time series.
func (a dashAPI) run(p *panelTarget, vars map[string]string) (result, string, error) {
	q := expand(p.expr, vars, a.scrape, a.end.Sub(a.start))
	params := url.Values{"query": {q}}
	path := "/api/v1/query_range"
	if p.instant {
		path = "/api/v1/query"
		params.Set("time", promTime(a.end))
	} else {
		params.Set("start", promTime(a.start))
		params.Set("end", promTime(a.end))
		params.Set("step", a.scrape.String())
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  []any             `json:"value"`
				Values [][]any           `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := getJSONValue(a.base+path+"?"+params.Encode(), &r); err != nil {
		return result{}, q, fmt.Errorf("%s: %s: %w", p.key(), q, err)
	}
	if r.Status != "success" {
		return result{}, q, fmt.Errorf("%s: %s: %s", p.key(), q, r.Error)
	}
	out := result{labels: map[string]bool{}, minV: math.Inf(1), maxV: math.Inf(-1), legends: map[string]bool{}}
	for _, s := range r.Data.Result {
		points := s.Values
		if s.Value != nil {
			points = [][]any{s.Value}
		}
		for _, pt := range points {
			str, _ := pt[1].(string)
			v, err := strconv.ParseFloat(str, 64)
			if err != nil || math.IsNaN(v) {
				continue
			}
			out.n++
			out.minV, out.maxV = min(out.minV, v), max(out.maxV, v)
			if v != math.Trunc(v) && !out.hasFraction {
				out.fraction, out.hasFraction = v, true
			}
			for k := range s.Metric {
				out.labels[k] = true
			}
			out.legends[legendOf(p.legend, s.Metric)] = true
		}
	}
	return out, q, nil
}

// try runs p with vars and records them when it returns data.
func (a dashAPI) try(p *panelTarget, vars map[string]string) error {
	r, q, err := a.run(p, vars)
	if err == nil && r.n > 0 {
		p.passed, p.vars, p.query = true, vars, q
	}
	return err
}

// oddities returns what reads wrong in what a panel target returned with
// every choice of its variables: a percentunit (0-1) panel with values far
// above 1 (0-100 figures), or far below 0 with no value mapping of the
// negative values (an overspent budget reading -8913%), a percent (0-100)
// one with values all within 0-1, a panel of events counted per interval
// (bars) with a count that is not whole (increase()'s extrapolation), a
// legend naming a label that no series has (the legend shows nothing
// there), a legend writing a percentile as a fraction (p0.99).
func (p *panelTarget) oddities() []string {
	r := p.seen
	if r.n == 0 {
		return nil
	}
	var out []string
	switch p.unit {
	case "percentunit":
		if r.maxV > 1.5 {
			out = append(out, fmt.Sprintf("unit percentunit (0-1) but values up to %g", r.maxV))
		}
		if r.minV < -0.5 && !slices.ContainsFunc(p.mappings, valueMapping.mapsAllBelowZero) {
			out = append(out, fmt.Sprintf("unit percentunit (0-1) and values down to %g (reads %.0f%%) with no value mapping of those below 0", r.minV, 100*r.minV))
		}
	case "percent":
		if r.maxV <= 1 {
			out = append(out, fmt.Sprintf("unit percent (0-100) but values all within %g..%g", r.minV, r.maxV))
		}
	}
	if p.bars && r.hasFraction {
		out = append(out, fmt.Sprintf("events counted per interval (bars) but a count of %g, not a whole number", r.fraction))
	}
	for _, l := range slices.Sorted(maps.Keys(r.legends)) {
		if fractionPercentileRE.MatchString(l) {
			out = append(out, fmt.Sprintf("legend reads %q: a percentile written as a fraction", l))
			break
		}
	}
	for _, m := range legendLabelRE.FindAllStringSubmatch(p.legend, -1) {
		if !r.labels[m[1]] {
			out = append(out, fmt.Sprintf("legend %q names {{%s}}, a label none of its series has", p.legend, m[1]))
		}
	}
	return out
}

func promTime(t time.Time) string { return fmt.Sprintf("%.3f", float64(t.UnixMilli())/1000) }

// getJSONValue decodes the JSON body of u; Prometheus answers a bad query
// with 400 or 422 and a JSON error.
func getJSONValue(u string, v any) error {
	code, body, err := get(u)
	if err != nil {
		return err
	}
	if code/100 != 2 && code != 400 && code != 422 {
		return fmt.Errorf("HTTP %d: %.200s", code, body)
	}
	return json.Unmarshal([]byte(body), v)
}

// TestValueMappingBelowZero: only a range mapping with no from and a to of
// 0 or less maps every value below 0; Grafana reads "from": null as 0, a
// mapping of 0 to its to that leaves the negative values unmapped.
func TestValueMappingBelowZero(t *testing.T) {
	for _, tc := range []struct {
		json string
		want bool
	}{
		{`{"type": "range", "options": {"to": 0}}`, true},
		{`{"type": "range", "options": {"to": -1}}`, true},
		{`{"type": "range", "options": {"from": null, "to": 0}}`, false},
		{`{"type": "range", "options": {"from": -100, "to": 0}}`, false},
		{`{"type": "range", "options": {"to": null}}`, false},
		{`{"type": "range", "options": {"to": 1}}`, false},
		{`{"type": "range", "options": {}}`, false},
		{`{"type": "value", "options": {"to": 0}}`, false},
	} {
		var m valueMapping
		if err := json.Unmarshal([]byte(tc.json), &m); err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		if got := m.mapsAllBelowZero(); got != tc.want {
			t.Errorf("%s: maps every value below 0 = %v, want %v", tc.json, got, tc.want)
		}
	}
}
