package testutil

import (
	"net/http"
	"sync"
	"testing"

	"github.com/prometheus/common/version"
)

// KeepHeaders wraps h into a handler that keeps the headers of the last
// request it served; last returns them (nil before any).
func KeepHeaders(h http.HandlerFunc) (handler http.Handler, last func() http.Header) {
	var mu sync.Mutex
	var got http.Header
	handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		h(w, r)
	})
	last = func() http.Header {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	return handler, last
}

// CheckUserAgent calls request with version.Version set to a release's
// version, then to none (the build's is put back after), and checks that
// the User-Agent of the headers it returns, those of the request it made,
// names the exporter and that version: "vgpu_exporter/1.2.3", then
// "vgpu_exporter" alone.
func CheckUserAgent(t *testing.T, request func(version string) http.Header) {
	t.Helper()
	defer func(v string) { version.Version = v }(version.Version)
	for _, tc := range []struct{ version, want string }{
		{"1.2.3", "vgpu_exporter/1.2.3"},
		{"", "vgpu_exporter"},
	} {
		version.Version = tc.version
		if ua := request(tc.version).Get("User-Agent"); ua != tc.want {
			t.Errorf("version %q: User-Agent %q, want %q", tc.version, ua, tc.want)
		}
	}
}
