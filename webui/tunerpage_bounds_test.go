package webui

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

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

// failingWriter is a response whose client takes n bytes, then fails
// every write; it counts the writes asked of it after the first failure.
type failingWriter struct {
	header      http.Header
	n           int
	failed      bool
	writesSince int
}

func (w *failingWriter) Header() http.Header { return w.header }
func (w *failingWriter) WriteHeader(int)     {}

var errClientGone = errors.New("write: broken pipe")

func (w *failingWriter) Write(b []byte) (int, error) {
	if w.failed {
		w.writesSince++
		return 0, errClientGone
	}
	if len(b) > w.n {
		w.failed = true
		return w.n, errClientGone
	}
	w.n -= len(b)
	return len(b), nil
}

// The JSON stops at the first write that fails (a client gone, or past
// the write deadline): with 100 tenants and a full history, a client that
// takes 40 KB costs the view and the encoding of a few of its 200 series,
// not of all of them (each point's time is an allocation of its own, so
// the allocations past the view's count the series encoded), and no write
// is asked after the failed one.
func TestTunerPageJSONStopsAtFailedWrite(t *testing.T) {
	snap, st := fullHistory(100)
	p := NewTunerPage(func() *tenant.Snapshot { return snap }, func() *tuner.Status { return st }, simInfo, nil)
	serve := func(n int) (*failingWriter, float64) {
		w := &failingWriter{header: http.Header{}}
		allocs := testing.AllocsPerRun(1, func() {
			*w = failingWriter{header: http.Header{}, n: n}
			p.ServeHTTP(w, httptest.NewRequest("GET", "/tuner?format=json", nil))
		})
		return w, allocs
	}
	view := testing.AllocsPerRun(1, func() { _ = newTunerView(simInfo, snap, st, tunerPageDecisions) })
	all, whole := serve(math.MaxInt)
	if all.failed {
		t.Fatal("the whole JSON failed")
	}
	for _, n := range []int{0, 40 << 10} {
		w, allocs := serve(n)
		if !w.failed || w.writesSince != 0 {
			t.Errorf("a client gone after %d bytes: failed %v, %d writes after the failed one; want none", n, w.failed, w.writesSince)
		}
		if allocs-view > (whole-view)/10 {
			t.Errorf("a client gone after %d bytes: %.0f allocations past the view's %.0f, the whole JSON's %.0f: the series were encoded past the failed write",
				n, allocs-view, view, whole-view)
		}
	}
}

// The JSON is a whole document whatever the history holds: a value that
// is no number JSON can hold (NaN, an infinity; none is known to come from
// a real round) is written null, the series named in a warning; what
// json.Marshal refuses elsewhere (in the view, or a time it cannot write)
// is found before the first byte is written, a 500 naming it, logged at
// warn level. Never a 200 cut short with half a document (or, for the
// view, an empty one).
func TestTunerPageJSONWholeWhateverTheHistory(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(*tuner.Status)
		code  int
		nulls string // the series holding null points, and how many: "pause_duty of t0099: 1"
		log   string
	}{
		{"NaN in the last knob series", func(st *tuner.Status) {
			st.History[len(st.History)-1].Values[tuner.SettingKey{GPU: "GPU-aaaa", Tenant: "t0099", Knob: gpu.KnobPauseDuty}] = math.NaN()
		}, 200, "pause_duty of t0099: 1", `series="pause_duty of \"t0099\" on GPU-aaaa: 1 of 240, the first NaN at 2026-03-01T11:59:59Z"`},
		{"infinities in a tenant's burn", func(st *tuner.Status) {
			st.History[3].Burn["t0050"], st.History[4].Burn["t0050"] = math.Inf(1), math.Inf(-1)
		}, 200, "burn of t0050: 2", `series="burn of \"t0050\": 2 of 240, the first +Inf at 2026-03-01T11:56:03Z"`},
		{"a round in the year 10000", func(st *tuner.Status) { st.History[5].At = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
			500, "", `burn of \"t0000\": point time 10000-01-01 00:00:00 +0000 UTC cannot be written in RFC 3339`},
		{"NaN in the view", func(st *tuner.Status) { st.Burns[0].Burn = math.NaN() }, 500, "", "json: unsupported value: NaN"},
	} {
		snap, st := fullHistory(100)
		tc.spoil(st)
		var logs bytes.Buffer
		p := NewTunerPage(func() *tenant.Snapshot { return snap }, func() *tuner.Status { return st }, simInfo, log.NewLogfmtLogger(&logs))
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest("GET", "/tuner?format=json", nil))
		if rec.Code != tc.code || (tc.code == 200) != json.Valid(rec.Body.Bytes()) {
			t.Errorf("%s: %d (%s), %d bytes, valid JSON %v; want %d\n%.200s", tc.name, rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len(), json.Valid(rec.Body.Bytes()), tc.code, rec.Body.String())
			continue
		}
		if !strings.Contains(logs.String(), "level=warn") || !strings.Contains(logs.String(), tc.log) {
			t.Errorf("%s: the log lacks a warning with %s:\n%s", tc.name, tc.log, logs.String())
		}
		if tc.code != 200 {
			continue
		}
		var doc struct {
			History struct {
				Tenants, Knobs []struct {
					Tenant, Knob string
					Points       []struct{ Value *float64 }
				}
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		var nulls []string
		for _, s := range append(doc.History.Tenants, doc.History.Knobs...) {
			n := 0
			for _, pt := range s.Points {
				if pt.Value == nil {
					n++
				}
			}
			if n > 0 {
				nulls = append(nulls, fmt.Sprintf("%s of %s: %d", cmp.Or(s.Knob, "burn"), s.Tenant, n))
			}
		}
		if got := strings.Join(nulls, ", "); got != tc.nulls {
			t.Errorf("%s: null points in %q, want %q", tc.name, got, tc.nulls)
		}
	}
}
