package webui

import (
	"net/http/httptest"
	"testing"
	"time"
)

// deadlineRecorder records a response and the write deadline its handler
// sets through http.ResponseController.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
}

func (w *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	w.deadlines = append(w.deadlines, t)
	return nil
}

// Every tuner page response, HTML or JSON, is written within a deadline
// of its own, TunerPageWriteTimeout from the handler's start (its clock),
// short of the server's write timeout, moved as far past the clock before
// each piece (TestTunerPageSlowReaderGetsWholePage): a client that stops
// reading does not hold one of the page's slots for a minute.
func TestTunerPageWriteDeadline(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p := NewTunerPage(pageSnapshot, pageStatus, simInfo, nil).(tunerPage)
	p.now = func() time.Time { return now }
	for _, target := range []string{"/tuner", "/tuner?format=json", "/tuner?format=xml"} {
		rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
		p.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		want := now.Add(TunerPageWriteTimeout)
		if len(rec.deadlines) == 0 || (target == "/tuner?format=xml") != (len(rec.deadlines) == 1) {
			t.Errorf("%s: write deadlines %v, want %v at the start and, for a page, before its writes", target, rec.deadlines, want)
		}
		for _, d := range rec.deadlines {
			if !d.Equal(want) {
				t.Errorf("%s: write deadlines %v, want each %v", target, rec.deadlines, want)
				break
			}
		}
	}
	if TunerPageWriteTimeout <= 0 || TunerPageWriteTimeout > 10*time.Second {
		t.Errorf("TunerPageWriteTimeout %v: want at most 10s", TunerPageWriteTimeout)
	}
}
