package httplimit

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/exporter-toolkit/web"
)

// serveGroup serves g on n listeners of its own with the web configuration
// yml, until the test ends; it returns their addresses and Serve's result.
func serveGroup(t *testing.T, g *Group, n int, yml string) ([]string, <-chan error) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	var ls []net.Listener
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls, addrs = append(ls, l), append(addrs, l.Addr().String())
	}
	done := make(chan error, 1)
	go func() { done <- g.Serve(ls, &web.FlagConfig{WebConfigFile: &cfg}, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() { g.Shutdown(context.Background()) })
	return addrs, done
}

// Each listener of a group has a server of its own, which the web
// configuration wraps once: a request on either passes its handler once
// and gets the configuration's header, and Shutdown closes both.
func TestGroupServesEachListenerOnce(t *testing.T) {
	calls := make(chan struct{}, 10)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { calls <- struct{}{}; io.WriteString(w, "ok") })
	g := NewGroup(h, Limits{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}, log.NewNopLogger())
	addrs, done := serveGroup(t, g, 2, "http_server_config:\n  headers:\n    X-Frame-Options: deny\nrate_limit:\n  burst: 1\n  interval: 1h\n")
	for _, addr := range addrs {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// The rate limit of 1 a listener: a second wrapping of the
		// handler would meet it again, spent.
		if resp.StatusCode != 200 || resp.Header.Get("X-Frame-Options") != "deny" || len(calls) != 1 {
			t.Errorf("%s: %d, X-Frame-Options %q, the handler called %d times; want 200, deny, once", addr, resp.StatusCode, resp.Header.Get("X-Frame-Options"), len(calls))
		}
		<-calls
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve after Shutdown: %v, want %v", err, http.ErrServerClosed)
	}
	for _, addr := range addrs {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("%s accepts connections after Shutdown", addr)
		}
	}
}

// The servers of a group share one connection limit, the process's
// (--web.max-connections): a connection on one listener makes room by
// closing the idle one of the other.
func TestGroupSharesConnectionLimit(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	g := NewGroup(ok, Limits{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxConnections: 1}, log.NewNopLogger())
	// net/http sends a response's last bytes before it marks its
	// connection idle (the ConnState hook): a client that read the
	// response may find it still serving, and nothing to close.
	idled := make(chan struct{}, 1)
	g.Prepare = func(srv *http.Server) {
		track := srv.ConnState
		srv.ConnState = func(c net.Conn, st http.ConnState) {
			track(c, st)
			if st == http.StateIdle {
				select {
				case idled <- struct{}{}:
				default:
				}
			}
		}
	}
	addrs, _ := serveGroup(t, g, 2, "")
	idle, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	br := bufio.NewReader(idle)
	if _, err := io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close() // the connection is kept alive, idle
	<-idled
	other, err := http.Get("http://" + addrs[1] + "/")
	if err != nil {
		t.Fatal(err)
	}
	other.Body.Close()
	// Asked again, a connection closed answers nothing.
	if _, err := io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err == nil {
		if resp, err := http.ReadResponse(br, nil); err == nil {
			resp.Body.Close()
			t.Errorf("the idle connection on %s after a connection on %s with a limit of 1 still serves (%d), want it closed", addrs[0], addrs[1], resp.StatusCode)
		}
	}
}

// A group shut down before it serves does not serve: its listeners are
// closed and Serve returns http.ErrServerClosed.
func TestGroupShutDownBeforeServing(t *testing.T) {
	g := NewGroup(http.NotFoundHandler(), Limits{ReadHeaderTimeout: time.Second}, log.NewNopLogger())
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	addrs, done := serveGroup(t, g, 1, "")
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve after Shutdown: %v, want %v", err, http.ErrServerClosed)
	}
	if c, err := net.Dial("tcp", addrs[0]); err == nil {
		c.Close()
		t.Errorf("%s accepts connections", addrs[0])
	}
}
