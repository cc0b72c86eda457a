package kube

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// Pod metadata and the files beside it (token, CA) are outside input: a
// FIFO or a device is refused before anything is read, and a file or a
// body over the limit is refused having read at most the limit and a byte.
func TestPodMetadataBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "big.json") // 1 GiB, read whole by a plain read
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zeros := make([]byte, 1<<20)
		for i := 0; i < 1<<10; i++ { // 1 GiB
			if _, err := w.Write(zeros); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		src, want string
	}{
		{fifo, "not a regular file (a named pipe)"},
		{"file://" + fifo, "not a regular file (a named pipe)"},
		{"/dev/zero", "not a regular file (a character device)"},
		{sparse, "larger than the limit of 1048576 bytes"},
		{srv.URL, "larger than the limit of 1048576 bytes"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			k := &kubeClient{metaSrc: tc.src, maxBytes: 1 << 20, timeout: 20 * time.Second, httpc: srv.Client()}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			done := make(chan error, 1)
			go func() { _, err := k.fetchMeta(context.Background()); done <- err }()
			select {
			case err := <-done:
				runtime.ReadMemStats(&after)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v, want %q", err, tc.want)
				}
				if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
					t.Errorf("allocated %d bytes for a limit of 1 MiB", alloc)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("still reading after 5s")
			}
		})
	}
}

func TestTokenAndCAFilesBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, read := range map[string]func(string) error{
		"token": func(p string) error { _, err := (&kubeClient{tokenFile: p}).bearerToken(); return err },
		"CA":    func(p string) error { _, err := clientWithCA(p); return err },
	} {
		for _, p := range []string{fifo, "/dev/zero"} {
			done := make(chan error, 1)
			go func() { done <- read(p) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "not a regular file") {
					t.Errorf("%s %s: error %v, want refused as not a regular file", name, p, err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("%s %s: still reading after 5s", name, p)
			}
		}
	}
}

// A pod metadata server's error names its status code, not its reason
// phrase: that is the server's own text, up to the HTTP client's header
// limit (10 MiB), and went whole into every refresh's error and log line.
func TestPodMetadataStatusReasonNotQuoted(t *testing.T) {
	k := &kubeClient{metaSrc: testutil.LongReasonServer(t, 503, 1<<20) + "/pods", maxBytes: 1 << 20, timeout: 20 * time.Second, httpc: &http.Client{}}
	_, err := k.fetchMeta(context.Background())
	if err == nil || !strings.Contains(err.Error(), "HTTP 503") || len(err.Error()) > 512 {
		t.Errorf("error of %d bytes: %.200v, want one naming HTTP 503, without the reason phrase", len(fmt.Sprint(err)), err)
	}
}

// A pod metadata server that redirects to plain http (or another port) of
// the same host is refused, and the bearer token never goes there: Go's
// client keeps an Authorization header on a redirect to the same host
// name whatever the scheme, so the token went out in plain text.
func TestPodMetadataRedirectKeepsToken(t *testing.T) {
	var leaked atomic.Value
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("Authorization"))
		_, _ = w.Write([]byte(`{"items":[]}`))
	}))
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+"/pods", http.StatusFound)
	}))
	defer tlsSrv.Close()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("secret-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	// the client as the mapper makes it (the socket is not dialled)
	k, err := newKubeClient(filepath.Join(t.TempDir(), "kubelet.sock"), tlsSrv.URL+"/pods", tlsSrv.Client(), time.Second, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer k.close()
	k.tokenFile = tok
	_, err = k.fetchMeta(context.Background())
	if err == nil || !strings.Contains(err.Error(), "refused a redirect to another scheme, host or port ("+plain.URL+")") || !strings.Contains(err.Error(), tlsSrv.URL) {
		t.Errorf("error %v, want the redirect refused, naming the source", err)
	}
	if v, _ := leaked.Load().(string); v != "" {
		t.Errorf("the plain http server was sent %q", v)
	}
}

// A pod metadata server that sends its answer a byte at a time, never
// ending it, fails the read at the timeout: the deadline covers the body.
func TestPodMetadataSlowBodyTimesOut(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"items":[`))
		for {
			w.(http.Flusher).Flush()
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := w.Write([]byte(" ")); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	defer close(stop)
	const timeout = 300 * time.Millisecond
	k := &kubeClient{metaSrc: srv.URL, maxBytes: 1 << 20, timeout: timeout, httpc: srv.Client()}
	start := time.Now()
	_, err := k.fetchMeta(context.Background())
	if took := time.Since(start); err == nil || took > timeout+2*time.Second {
		t.Fatalf("a body that never ends: %v after %v (timeout %v)", err, took, timeout)
	}
	if !strings.Contains(err.Error(), srv.URL) {
		t.Errorf("error %v does not name the URL", err)
	}
}
