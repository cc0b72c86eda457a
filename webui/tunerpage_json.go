package webui

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// The tuner page's JSON is written in parts, through a buffer of
// jsonChunk: the view without its history, then the history's series one
// at a time. A request holds the view and one series' encoding, never the
// whole response's: with a full history the series are most of it, tens
// of megabytes with a thousand tenants, and an encoder of the whole holds
// it several times over (docs/tuner-page.md). What json.Marshal would
// refuse is found before the first byte is written (jsonHead), so that the
// response is a whole document or an error, never half of one: a
// history's value that is no number is written null, anything else is an
// error. The writing stops at the first write that fails (a client gone,
// or one that read nothing for TunerPageWriteTimeout), encoding no more.

// jsonChunk is the size of the buffer the JSON is written through.
const jsonChunk = 32 << 10

// viewHead is a view's JSON without its history: the field shadows the
// view's own, and is left out.
type viewHead struct {
	*tunerView
	History *historyView `json:"history,omitempty"`
}

// historyHead is the history's JSON without its series.
type historyHead struct {
	From time.Time `json:"from,omitzero"`
	To   time.Time `json:"to,omitzero"`
}

// jsonHead encodes v's JSON up to its history's series, and checks the
// series: an error (a value of the view json.Marshal refuses, or a
// point's time it cannot write) means nothing of v can be written whole;
// nulls names the series with values that are no number JSON can hold,
// which writeJSON writes null.
func jsonHead(v *tunerView) (head []byte, nulls []string, err error) {
	head, err = json.Marshal(viewHead{tunerView: v})
	if err != nil {
		return nil, nil, err
	}
	hist, err := json.Marshal(historyHead{From: v.History.From, To: v.History.To})
	if err != nil {
		return nil, nil, err
	}
	for _, series := range [][]seriesView{v.History.Tenants, v.History.Knobs} {
		for i := range series {
			n, first, err := checkSeries(&series[i])
			if err != nil {
				return nil, nil, err
			}
			if n > 0 {
				nulls = append(nulls, fmt.Sprintf("%s: %d of %d, the first %v at %s", series[i].name(), n, len(series[i].Points),
					first.Value, first.Time.UTC().Format(time.RFC3339)))
			}
		}
	}
	head = append(head[:len(head)-1], `,"history":`...) // open: the history follows
	head = append(head, hist[:len(hist)-1]...)
	if len(hist) > 2 {
		head = append(head, ',')
	}
	return head, nulls, nil
}

// checkSeries says why json.Marshal would refuse a series' point time (a
// year outside 0-9999, or a zone offset of a day or more, which RFC 3339
// cannot write), and how many of its values are no number JSON can hold
// (NaN, an infinity), with the first.
func checkSeries(s *seriesView) (nonFinite int, first pointView, err error) {
	for _, p := range s.Points {
		if _, off := p.Time.Zone(); p.Time.Year() < 0 || p.Time.Year() > 9999 || off <= -24*3600 || off >= 24*3600 {
			return 0, pointView{}, fmt.Errorf("history series %s: point time %s cannot be written in RFC 3339", s.name(), p.Time)
		}
		if !finite(p.Value) {
			if nonFinite == 0 {
				first = p
			}
			nonFinite++
		}
	}
	return nonFinite, first, nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// seriesNulls is a series whose values that are no number JSON can hold
// are null: the field shadows the series' own (and comes after its
// other fields).
type seriesNulls struct {
	*seriesView
	Points []nullablePoint `json:"points"`
}

type nullablePoint struct {
	Time  time.Time `json:"time"`
	Value *float64  `json:"value"` // nil: not a finite number
}

// marshalSeries encodes a series as json.Marshal does, its values that
// are no number JSON can hold (NaN, an infinity) as null.
func marshalSeries(s *seriesView) ([]byte, error) {
	if !slices.ContainsFunc(s.Points, func(p pointView) bool { return !finite(p.Value) }) {
		return json.Marshal(s)
	}
	n := seriesNulls{seriesView: s, Points: make([]nullablePoint, len(s.Points))}
	for i, p := range s.Points {
		n.Points[i].Time = p.Time
		if finite(p.Value) {
			n.Points[i].Value = &s.Points[i].Value
		}
	}
	return json.Marshal(n)
}

// name names a series in an error: a tenant's burn, or a knob on a GPU
// (of a tenant where the knob is one's).
func (s *seriesView) name() string {
	switch {
	case s.Knob == "":
		return fmt.Sprintf("burn of %q", s.Tenant)
	case s.Tenant == "":
		return fmt.Sprintf("%s on %s", s.Knob, s.GPU)
	}
	return fmt.Sprintf("%s of %q on %s", s.Knob, s.Tenant, s.GPU)
}

// writeJSON writes the view v whose head is head (jsonHead) to w, as
// json.Marshal writes v, and a newline. It returns at the first write that
// fails, with its error, and encodes nothing more.
func writeJSON(w io.Writer, head []byte, v *tunerView) error {
	b := bufio.NewWriterSize(w, jsonChunk)
	_, _ = b.Write(head)
	for i, part := range []struct {
		name   string
		series []seriesView
	}{{"tenants", v.History.Tenants}, {"knobs", v.History.Knobs}} {
		if i > 0 {
			_ = b.WriteByte(',')
		}
		_, _ = b.WriteString(`"` + part.name + `":[`)
		for j := range part.series {
			s, err := marshalSeries(&part.series[j])
			if err != nil {
				return err
			}
			if j > 0 {
				_ = b.WriteByte(',')
			}
			// A buffer's write fails once one of its flushes has, and
			// every one after.
			if _, err := b.Write(s); err != nil {
				return err
			}
		}
		_ = b.WriteByte(']')
	}
	_, _ = b.WriteString("}}\n")
	return b.Flush() // the first error of any write
}
