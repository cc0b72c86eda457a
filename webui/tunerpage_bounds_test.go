package webui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// fullHistory is the page's snapshot and status with n more latency
// tenants and a full history (tuner.HistoryPoints rounds, a second
// apart), each round with every tenant's burn and pause duty.
func fullHistory(n int) (*tenant.Snapshot, *tuner.Status) {
	snap, st := pageSnapshot(), pageStatus()
	at := time.Date(2026, 3, 1, 11, 56, 0, 123456789, time.UTC)
	st.History = nil
	for r := range tuner.HistoryPoints {
		p := tuner.RoundPoint{At: at.Add(time.Duration(r) * time.Second), Burn: map[string]float64{}, Values: map[tuner.SettingKey]float64{}}
		for i := range n {
			name := fmt.Sprintf("t%04d", i)
			p.Burn[name] = 0.123456789 * float64((i+r)%17)
			p.Values[tuner.SettingKey{GPU: "GPU-aaaa", Tenant: name, Knob: gpu.KnobPauseDuty}] = 0.25
		}
		st.History = append(st.History, p)
	}
	for i := range n {
		snap.Tenants = append(snap.Tenants, tenant.Info{Name: fmt.Sprintf("t%04d", i), Class: gpu.ClassLatency, ShareMax: 1})
	}
	return snap, st
}

// writesRecorder records a response's writes: their bytes and the
// largest one.
type writesRecorder struct {
	*httptest.ResponseRecorder
	largest int
}

func (w *writesRecorder) Write(b []byte) (int, error) {
	w.largest = max(w.largest, len(b))
	return w.ResponseRecorder.Write(b)
}

// The JSON is the view as json.Marshal writes it, compact, and is written
// in parts of at most partBytes: a request never holds the encoding of a
// whole response, which with 100 tenants and a full history is megabytes
// (and with 1000 tens of them), several times over.
func TestTunerPageJSONWrittenInParts(t *testing.T) {
	const partBytes = 64 << 10
	big, bigSt := fullHistory(100)
	for _, tc := range []struct {
		name string
		snap *tenant.Snapshot
		st   *tuner.Status
	}{
		{"tuner off, no sample", nil, nil},
		{"tuner off", pageSnapshot(), nil},
		{"no round yet", pageSnapshot(), &tuner.Status{Mode: tuner.ModeRecommend}},
		{"the page's status", pageSnapshot(), pageStatus()},
		{"100 tenants, a full history", big, bigSt},
	} {
		p := NewTunerPage(func() *tenant.Snapshot { return tc.snap }, func() *tuner.Status { return tc.st }, simInfo, nil)
		rec := &writesRecorder{ResponseRecorder: httptest.NewRecorder()}
		p.ServeHTTP(rec, httptest.NewRequest("GET", "/tuner?format=json", nil))
		want, err := json.Marshal(newTunerView(simInfo, tc.snap, tc.st, tunerPageDecisions))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		if rec.Code != http.StatusOK || !bytes.Equal(rec.Body.Bytes(), want) {
			t.Errorf("%s: %d, %d bytes, want the view's %d:\n%.300s\nwant\n%.300s", tc.name, rec.Code, rec.Body.Len(), len(want), rec.Body.String(), want)
		}
		if rec.largest > partBytes {
			t.Errorf("%s: a write of %d bytes of %d, want at most %d", tc.name, rec.largest, rec.Body.Len(), partBytes)
		}
	}
}
