package webui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The answer to a tuner page request beyond its limit is, for a browser,
// a page that reloads itself as the tuner page does (its refresh, not
// before the Retry-After), so that a browser left on the tuner page comes
// back to it, and, for a script asking for JSON, the plain text it was;
// both 503 with a Retry-After (before, a browser stopped on a plain-text
// 503 for good).
func TestTunerPageBusy(t *testing.T) {
	for _, tc := range []struct {
		name, target string
		info         TunerPageInfo
		contentType  string
		want, not    []string
	}{
		{name: "the page's refresh", target: "/tuner", info: simInfo, contentType: "text/html; charset=utf-8",
			want: []string{`<meta http-equiv="refresh" content="15">`, `(limit 2): this page reloads in 15s`, `<a href="./">Home</a>`}},
		{name: "not before the Retry-After", target: "/tuner?format=html", info: TunerPageInfo{Backend: "nvml", Refresh: time.Second}, contentType: "text/html; charset=utf-8",
			want: []string{`<meta http-equiv="refresh" content="10">`, `reloads in 10s`}},
		{name: "JSON", target: "/tuner?format=json", info: simInfo, contentType: "text/plain; charset=utf-8",
			want: []string{"Limit of concurrent requests reached (2), try again later."}, not: []string{"<meta"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			NewTunerPageBusy(tc.info, 2).ServeHTTP(rec, httptest.NewRequest("GET", tc.target, nil))
			body := rec.Body.String()
			if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "10" || rec.Header().Get("Content-Type") != tc.contentType {
				t.Errorf("%d, Retry-After %q, Content-Type %q; want 503, 10, %q", rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get("Content-Type"), tc.contentType)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %q:\n%s", w, body)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(body, n) {
					t.Errorf("body holds %q:\n%s", n, body)
				}
			}
		})
	}
	// The page's own refresh, for the row that follows it.
	if _, page, _ := getPage(t, nil, nil, "/tuner"); !strings.Contains(page, `<meta http-equiv="refresh" content="15">`) {
		t.Errorf("the tuner page's refresh is not the one its busy answer copies:\n%s", page)
	}
}
