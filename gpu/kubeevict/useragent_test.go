package kubeevict

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// An eviction (and the read of its pod before) names the exporter and, where the build set it, its
// version to the API server. Before, it named the exporter only.
func TestEvictionUserAgent(t *testing.T) {
	h, last := testutil.KeepHeaders((&apiServer{}).ServeHTTP)
	srv := httptest.NewTLSServer(h)
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{APIServer: srv.URL, TokenFile: tokenFile, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckUserAgent(t, func(string) http.Header {
		if err := e.Rebalance(context.Background(), gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0")}}); err != nil {
			t.Fatal(err)
		}
		return last()
	})
}
