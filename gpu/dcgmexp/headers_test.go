package dcgmexp

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// An answer's headers were bounded only by Go's 10 MiB default: 9 MiB of
// them were read on every scrape. Past headercap.MaxBytes the scrape now
// fails, whatever the body; a client's TLS settings are kept.
func TestHugeHeadersFailScrape(t *testing.T) {
	page := fmt.Sprintf("DCGM_FI_PROF_SM_ACTIVE{UUID=%q} 0.5\n", uuidA)
	for _, tc := range []struct {
		name    string
		headers int // bytes of padding headers
		up      bool
	}{
		{"a few headers", 1 << 10, true},
		{"1 MiB of headers", 1 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				pad := strings.Repeat("h", 1<<10)
				for i := range tc.headers >> 10 {
					w.Header().Add(fmt.Sprintf("X-Pad-%d", i), pad)
				}
				_, _ = w.Write([]byte(page))
			}))
			defer srv.Close()
			inner := &fakeSource{rd: &gpu.Readings{Devices: []gpu.Device{{UUID: uuidA, Up: true}}}}
			s := newSource(t, inner, Options{URL: srv.URL, Client: srv.Client(), Timeout: 10 * time.Second})
			rd := sampleOnce(t, s)
			if s.Up() != tc.up || (rd.Devices[0].Activity.Source == ActivityDCGM) != tc.up {
				t.Errorf("up %v, activity %+v; want up %v", s.Up(), rd.Devices[0].Activity, tc.up)
			}
		})
	}
}
