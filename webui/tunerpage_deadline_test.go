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
// short of the server's write timeout: a client that stops reading does
// not hold one of the page's slots for a minute.
func TestTunerPageWriteDeadline(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p := NewTunerPage(pageSnapshot, pageStatus, simInfo, nil).(tunerPage)
	p.now = func() time.Time { return now }
	for _, target := range []string{"/tuner", "/tuner?format=json", "/tuner?format=xml"} {
		rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
		p.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		if want := now.Add(TunerPageWriteTimeout); len(rec.deadlines) != 1 || !rec.deadlines[0].Equal(want) {
			t.Errorf("%s: write deadlines %v, want one, %v", target, rec.deadlines, want)
		}
	}
	if TunerPageWriteTimeout <= 0 || TunerPageWriteTimeout > 10*time.Second {
		t.Errorf("TunerPageWriteTimeout %v: want at most 10s", TunerPageWriteTimeout)
	}
}
