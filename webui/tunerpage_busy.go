package webui

import (
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"time"
)

// TunerPageRetryAfter is the Retry-After of a tuner page request beyond
// its limit (TunerPageMaxInFlight): TunerPageWriteTimeout. A page is
// rendered in well under a second, but a JSON slot (an HTML one too, past
// maxOutsideBytes) is held by a client that stops reading until that
// timeout (and by one that reads slowly until it has read the response):
// a retry a second later would mostly meet the same refusal, where one
// after the timeout finds a stalled client's slot free.
const TunerPageRetryAfter = TunerPageWriteTimeout

// TunerPageByFormat routes a tuner page request to json where it asks
// for the JSON (?format=json), else to html (the page, and requests the
// page answers 400), so that each has a limit of its own: a JSON response
// holds its slot while written (it is written as it is encoded, never
// whole in memory), and clients that do not read it must not keep a
// browser off the HTML, which holds its slot only while rendered.
func TunerPageByFormat(html, json http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f, err := pageFormat(r.URL.RawQuery); err == nil && f == "json" {
			json.ServeHTTP(w, r)
			return
		}
		html.ServeHTTP(w, r)
	})
}

// refreshSeconds is how often the page reloads itself, in whole seconds
// (at least 1).
func (i TunerPageInfo) refreshSeconds() int {
	return max(1, int(math.Round(i.Refresh.Seconds())))
}

var tunerPageBusyTemplate = template.Must(template.New("busy").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="{{.RefreshSeconds}}">
<title>vgpu_exporter tuner: busy</title>
</head>
<body>
<h1>vGPU tuner</h1>
<p id="busy">Too many tuner page requests in flight (limit {{.Limit}}): this page reloads in {{.RefreshSeconds}}s.</p>
<p><a href="./">Home</a></p>
</body>
</html>
`))

// NewTunerPageBusy returns the answer to a tuner page request beyond its
// limit of limit requests: 503 with a Retry-After of TunerPageRetryAfter;
// a page that reloads itself as the tuner page does (info's Refresh), but
// not before the Retry-After, so that a browser left on it comes back to
// the page; and the plain text it answered before to a request for JSON
// (?format=json), which no browser shows.
func NewTunerPageBusy(info TunerPageInfo, limit int64) http.Handler {
	retryAfter := int(TunerPageRetryAfter / time.Second)
	view := struct {
		RefreshSeconds int
		Limit          int64
	}{max(info.refreshSeconds(), retryAfter), limit}
	text := fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", limit)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		if f, err := pageFormat(r.URL.RawQuery); err != nil || f == "json" {
			http.Error(w, text, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = tunerPageBusyTemplate.Execute(w, view)
	})
}
