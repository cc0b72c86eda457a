package kubeevict

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/prometheus/common/version"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// An eviction names the exporter and, where the build set it, its
// version to the API server. Before, it named the exporter only.
func TestEvictionUserAgent(t *testing.T) {
	defer func(v string) { version.Version = v }(version.Version)
	var mu sync.Mutex
	var got string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Get("User-Agent")
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{APIServer: srv.URL, TokenFile: tokenFile, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ version, want string }{
		{"1.2.3", "vgpu_exporter/1.2.3"},
		{"", "vgpu_exporter"},
	} {
		version.Version = tc.version
		if err := e.Rebalance(context.Background(), gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0")}}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		ua := got
		mu.Unlock()
		if ua != tc.want {
			t.Errorf("version %q: User-Agent %q, want %q", tc.version, ua, tc.want)
		}
	}
}
