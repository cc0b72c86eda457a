package latency

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
)

// maxRetryAfter bounds how long a source's Retry-After holds off its
// scrapes, so that no value (a date in 2100, 10^12 seconds) silences a
// source for good.
const maxRetryAfter = 10 * time.Minute

// statusError is a source's answer other than 200, with the Retry-After
// it gave with a 429 or 503 ("" when none, or another status).
type statusError struct {
	url        string // the source's urlmask.DisplayURL
	code       int
	retryAfter string
}

func (e *statusError) Error() string {
	// The status code only: the reason phrase is the source's text.
	return fmt.Sprintf("%s: HTTP %d %s", e.url, e.code, http.StatusText(e.code))
}

// newStatusError is the error of resp, a non-200 answer from the source
// whose urlmask.DisplayURL is url.
func newStatusError(url string, resp *http.Response) *statusError {
	e := &statusError{url: url, code: resp.StatusCode}
	if e.code == http.StatusTooManyRequests || e.code == http.StatusServiceUnavailable {
		e.retryAfter = resp.Header.Get("Retry-After")
	}
	return e
}

// backoff reads the Retry-After of err, a failed scrape at now: the time
// before which the source is not to be scraped again (zero for none), and
// err with what was made of the header.
func backoff(err error, now time.Time) (time.Time, error) {
	var se *statusError
	if !errors.As(err, &se) || se.retryAfter == "" {
		return time.Time{}, err
	}
	wait, capped, perr := retryAfterWait(se.retryAfter, now)
	switch {
	case perr != nil:
		return time.Time{}, fmt.Errorf("%w; %v: ignored", err, perr)
	case wait <= 0:
		return time.Time{}, err // a date past, or 0 seconds: no wait
	}
	until := now.Add(wait)
	how := "Retry-After"
	if capped {
		v := se.retryAfter
		if _, digits := deltaSeconds(v); digits {
			v += " s"
		}
		how = fmt.Sprintf("Retry-After %s, capped at %v", clip.Text(v, maxQuoted), maxRetryAfter)
	}
	return until, fmt.Errorf("%w; retrying after %s (%s)", err, until.UTC().Format(time.RFC3339), how)
}

// retryAfterWait reads a Retry-After value (RFC 9110, section 10.2.3):
// delta-seconds or an HTTP date, as the wait after now it asks for, at
// most maxRetryAfter (capped says it asked for more); 0 for a date not
// after now. An error says the value is neither.
func retryAfterWait(v string, now time.Time) (wait time.Duration, capped bool, err error) {
	if n, digits := deltaSeconds(v); digits {
		if n < 0 || n > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true, nil
		}
		return time.Duration(n) * time.Second, false, nil
	}
	t, perr := http.ParseTime(v)
	if perr != nil {
		return 0, false, fmt.Errorf("Retry-After \"%s\" is neither delta-seconds nor an HTTP date", clip.Text(v, maxQuoted))
	}
	wait = t.Sub(now)
	switch {
	case wait <= 0:
		return 0, false, nil
	case wait > maxRetryAfter:
		return maxRetryAfter, true, nil
	}
	return wait, false, nil
}

// deltaSeconds reads v as delta-seconds (one or more ASCII digits): its
// value, -1 when larger than an int64 holds; digits false when v is not
// delta-seconds.
func deltaSeconds(v string) (n int64, digits bool) {
	if v == "" {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return -1, true // out of range: all digits, too many of them
	}
	return n, true
}

// holdOff says whether the source's Retry-After holds off a scrape at now;
// if so its status is brought to now as a failed scrape's would be (the
// window drains), without counting an error. A wait ending more than
// maxRetryAfter after now (the clock was set back since) is dropped.
func (s *sloTracker) holdOff(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !now.Before(s.retryAt) {
		return false
	}
	if s.retryAt.Sub(now) > maxRetryAfter {
		s.retryAt = time.Time{}
		return false
	}
	s.status = s.computeLocked(now)
	return true
}

// retryWait is a source's pending Retry-After: no scrape before at, and
// the error that said so.
type retryWait struct {
	at  time.Time
	err string
}

// retryWaits is the Retry-After pending at now of each URL that trackers
// read (the latest, where several read one URL), so that a tracker started
// anew for a URL waits as its predecessor did: the wait is the source's,
// not the configuration's.
func retryWaits(trackers map[string]*sloTracker, now time.Time) map[string]retryWait {
	waits := map[string]retryWait{}
	for _, tr := range trackers {
		tr.mu.Lock()
		w := retryWait{at: tr.retryAt, err: tr.lastErr}
		tr.mu.Unlock()
		if cur, ok := waits[tr.src.URL]; w.at.After(now) && (!ok || w.at.After(cur.at)) {
			waits[tr.src.URL] = w
		}
	}
	return waits
}

// keepWaiting makes a new tracker wait out w: not scraped before w.at, its
// error w.err meanwhile (no scrape of its own failed: none is counted). The
// source counts as read: its URL's read failed, and it is down, not
// waiting for a first read.
func (s *sloTracker) keepWaiting(w retryWait) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retryAt = w.at
	s.setSourceLocked(false, true, w.err)
}
