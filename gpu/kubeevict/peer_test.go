package kubeevict

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// plainTLS is a client whose "TLS" connections are plain TCP to addr: the
// Evictor wants an https URL, the hostile server below speaks plain HTTP.
func plainTLS(addr string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}}}
}

// An API server's error names its status code, not its reason phrase:
// that is the server's own text, up to the HTTP client's header limit
// (10 MiB), and went whole (control characters too) into the plan's error,
// its log line and the tuner's status.
func TestEvictionStatusReasonNotQuoted(t *testing.T) {
	addr := strings.TrimPrefix(testutil.LongReasonServer(t, 503, 1<<20), "http://")
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{APIServer: "https://api.example:6443", TokenFile: tok, HTTPClient: plainTLS(addr)})
	if err != nil {
		t.Fatal(err)
	}
	err = e.Rebalance(context.Background(), gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0")}})
	if err == nil || !strings.Contains(err.Error(), "HTTP 503 Service Unavailable") || len(err.Error()) > 1024 {
		t.Errorf("error of %d bytes: %.300v, want one naming HTTP 503, without the reason phrase", len(err.Error()), err)
	}
}

// An API server that redirects the read of a pod (or its eviction) to plain http (or another
// port) of the same host is refused, as every redirect is, and the bearer
// token never goes there: Go's client keeps an Authorization header on a
// redirect to the same host name whatever the scheme, so the token went
// out in plain text.
func TestEvictionRedirectKeepsToken(t *testing.T) {
	var leaked atomic.Value
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusCreated)
	}))
	defer plain.Close()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("secret-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{APIServer: srv.URL, TokenFile: tok, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	err = e.Rebalance(context.Background(), gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0")}})
	if err == nil || !strings.Contains(err.Error(), "reading the pod: Get ") || !strings.Contains(err.Error(), "refused a redirect (HTTP 307 to "+plain.URL+"/api/v1/namespaces/x/pods/a-0)") {
		t.Errorf("error %v, want the redirect refused", err)
	}
	if v, _ := leaked.Load().(string); v != "" {
		t.Errorf("the plain http server was sent %q", v)
	}
}

// No redirect of an eviction is followed, not even one to the same
// scheme, host and port: an API server answers an eviction itself. Go's
// client followed a 301, 302 or 303 as a GET, without the body, and the
// page that answered it 200 was taken for the eviction made; a 307 or 308
// sent the POST on. The error says where the redirect led, and nothing is
// sent there.
func TestEvictionRedirectRefused(t *testing.T) {
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			var followed atomic.Value
			mux := http.NewServeMux()
			mux.Handle("GET /api/v1/namespaces/x/pods/a-0", &apiServer{})
			mux.HandleFunc("/api/v1/namespaces/x/pods/a-0/eviction", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/login", code)
			})
			mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
				followed.Store(r.Method)
				if r.Method == http.MethodPost {
					w.WriteHeader(http.StatusCreated)
				}
				_, _ = w.Write([]byte("<html>sign in</html>"))
			})
			srv := httptest.NewTLSServer(mux)
			defer srv.Close()
			tok := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(tok, []byte("tok"), 0o600); err != nil {
				t.Fatal(err)
			}
			e, err := New(Options{APIServer: srv.URL, TokenFile: tok, HTTPClient: srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			err = e.Rebalance(context.Background(), gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0")}})
			want := fmt.Sprintf("refused a redirect (HTTP %d to %s/login): an API server answers itself", code, srv.URL)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want one with %q", err, want)
			}
			if m, _ := followed.Load().(string); m != "" {
				t.Errorf("the redirect was followed: %s /login", m)
			}
		})
	}
}
