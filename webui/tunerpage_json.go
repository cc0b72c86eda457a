package webui

import (
	"bufio"
	"encoding/json"
	"io"
	"time"
)

// The tuner page's JSON is written in parts, through a buffer of
// jsonChunk: the view without its history, then the history's series one
// at a time. A request holds the view and one series' encoding, never the
// whole response's: with a full history the series are most of it, tens
// of megabytes with a thousand tenants, and an encoder of the whole holds
// it several times over (docs/tuner-page.md).

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

// writeJSON writes v to w as json.Marshal does, and a newline.
func writeJSON(w io.Writer, v *tunerView) error {
	b := bufio.NewWriterSize(w, jsonChunk)
	head, err := json.Marshal(viewHead{tunerView: v})
	if err != nil {
		return err
	}
	hist, err := json.Marshal(historyHead{From: v.History.From, To: v.History.To})
	if err != nil {
		return err
	}
	_, _ = b.Write(head[:len(head)-1]) // open: the history follows
	_, _ = b.WriteString(`,"history":`)
	_, _ = b.Write(hist[:len(hist)-1])
	if len(hist) > 2 {
		_ = b.WriteByte(',')
	}
	for i, part := range []struct {
		name   string
		series []seriesView
	}{{"tenants", v.History.Tenants}, {"knobs", v.History.Knobs}} {
		if i > 0 {
			_ = b.WriteByte(',')
		}
		_, _ = b.WriteString(`"` + part.name + `":[`)
		for j := range part.series {
			s, err := json.Marshal(&part.series[j])
			if err != nil {
				return err
			}
			if j > 0 {
				_ = b.WriteByte(',')
			}
			_, _ = b.Write(s)
		}
		_ = b.WriteByte(']')
	}
	_, _ = b.WriteString("}}\n")
	return b.Flush() // the first error of any write
}
