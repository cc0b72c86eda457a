package httplimit

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"
)

// failingClient is a client that takes take bytes, then fails every
// write with err.
type failingClient struct {
	*httptest.ResponseRecorder
	take int
	err  error
}

func (c *failingClient) SetWriteDeadline(time.Time) error { return nil }

func (c *failingClient) Write(b []byte) (int, error) {
	n := min(len(b), max(c.take-c.Body.Len(), 0))
	c.Body.Write(b[:n])
	if n < len(b) {
		return n, c.err
	}
	return n, nil
}

// A response cut at its deadline is logged at warn level, one whose
// client hung up at debug level, each kind bounded to a line per every
// apart from the other, counting those held back; each line names the
// path (clipped), the client and the bytes written, and the size the
// handler gives.
func TestWriteLog(t *testing.T) {
	long := "/page?pad=" + strings.Repeat("x", 60<<10)
	for _, tc := range []struct {
		name, level, msg, count string
		err                     error
	}{
		{"cut", "warn", `"page response cut short: the client read nothing for 10s"`, " cut=3 ", &os.PathError{Op: "write", Err: os.ErrDeadlineExceeded}},
		{"gone", "debug", `"page response not written whole: the client hung up"`, " not_logged=2 ", syscall.EPIPE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			var logs bytes.Buffer
			l := NewWriteLog(log.NewLogfmtLogger(&logs), "page", 10*time.Second)
			for _, at := range []time.Duration{0, time.Second, 2 * time.Second, 12 * time.Second} {
				now := start.Add(at)
				c := &failingClient{ResponseRecorder: httptest.NewRecorder(), take: 100, err: tc.err}
				s := NewStallWriter(c, func() time.Time { return now }, StallTimeout, time.Minute)
				_, err := s.Write(make([]byte, 1000))
				if !errors.Is(err, tc.err) {
					t.Fatalf("write: %v, want %v", err, tc.err)
				}
				l.Failed(now, httptest.NewRequest("GET", long, nil), s, err, "total_bytes", 1000)
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(lines) != 2 || !strings.Contains(lines[1], tc.count) {
				t.Fatalf("%d lines for 4 failures in 12 s, want 2, the second with %q:\n%.600s", len(lines), tc.count, logs.String())
			}
			for _, want := range []string{"level=" + tc.level + " msg=" + tc.msg, " remote=192.0.2.1:1234 ", " written_bytes=100 total_bytes=1000 ", "more bytes)"} {
				if !strings.Contains(lines[0], want) {
					t.Errorf("the line lacks %q:\n%.600s", want, lines[0])
				}
			}
			if len(lines[0]) > 1000 {
				t.Errorf("the line is %d bytes, the path unclipped", len(lines[0]))
			}
		})
	}
}
