package httplimit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
)

// closed reports whether c was closed (a net.Pipe end errors on use once
// closed).
func closed(c net.Conn) bool {
	return c.SetDeadline(time.Time{}) != nil
}

func TestConnLimiterEvictsIdleFirst(t *testing.T) {
	l := newConnLimiter(2, log.NewNopLogger())
	pipe := func() net.Conn { c, _ := net.Pipe(); return c }
	idle, busy := pipe(), pipe()
	l.track(idle, http.StateNew)
	l.track(idle, http.StateIdle)
	l.track(busy, http.StateNew)
	l.track(busy, http.StateActive)

	// At the limit, a new connection closes the idle one.
	fresh := pipe()
	l.track(fresh, http.StateNew)
	if !closed(idle) || closed(busy) || closed(fresh) || l.open() != 2 {
		t.Fatalf("idle closed %v, busy closed %v, fresh closed %v, open %d", closed(idle), closed(busy), closed(fresh), l.open())
	}
	// No idle one: the oldest that has sent no request yet goes.
	next := pipe()
	l.track(next, http.StateNew)
	if !closed(fresh) || closed(next) || closed(busy) {
		t.Fatalf("fresh closed %v, next closed %v", closed(fresh), closed(next))
	}
	// Every connection busy: the new one is refused.
	l.track(next, http.StateActive)
	last := pipe()
	l.track(last, http.StateNew)
	if !closed(last) || closed(next) || closed(busy) || l.open() != 2 {
		t.Fatalf("last closed %v, open %d", closed(last), l.open())
	}
	// Closed connections free their slot.
	l.track(busy, http.StateClosed)
	if l.open() != 1 {
		t.Errorf("open %d after a close", l.open())
	}
}

// A request that announces a body and never sends it (no endpoint of the
// exporter reads one) neither holds its request slot nor keeps its
// connection open: the server read the body before the response's first
// bytes with no deadline, so the handler waited for it for ever.
func TestUnsentBodyHoldsNothing(t *testing.T) {
	h := InFlight(1, "metrics", log.NewNopLogger(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(make([]byte, 1<<20)) // beyond the server's buffers, as /metrics is
	}))
	srv := NewServer(h, Limits{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxConnections: 2}, log.NewNopLogger())
	addr, c := announceUnsentBody(t, srv, "GET")
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil {
		t.Errorf("no response to a request whose body never came: %v", err)
	} else if n, _ := io.Copy(io.Discard, resp.Body); resp.StatusCode != 200 || n != 1<<20 {
		t.Errorf("status %d, %d bytes", resp.StatusCode, n)
	} else if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("the connection stays open after the response: %v", err)
	}

	client := &http.Client{Timeout: 10 * time.Second}
	for _, body := range []io.Reader{nil, strings.NewReader("sent in full")} {
		resp, err := client.Post("http://"+addr+"/metrics", "text/plain", body)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // ends after the handler returned
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("the next request (body %v): %d, want 200", body != nil, resp.StatusCode)
		}
	}
}

// A request answered before it reaches the exporter's handler (the
// web configuration's basic auth answers 401 in a handler wrapped
// around the server's) and announcing a body it never sends is not
// waited for past the header timeout either: net/http reads the body
// before sending that response, with no deadline, so that each such
// connection stayed busy for ever, beyond the connection limit's
// reach, and a few of them, from a client that knows no password,
// locked every scraper out.
func TestUnsentBodyBeforeHandlerHoldsNothing(t *testing.T) {
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	srv := NewServer(ok, Limits{ReadHeaderTimeout: 300 * time.Millisecond, IdleTimeout: time.Minute, MaxConnections: 1}, log.NewNopLogger())
	inner := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { // as exporter-toolkit wraps it
		if _, _, auth := r.BasicAuth(); !auth {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	})
	closed := make(chan struct{}, 1)
	track := srv.ConnState
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		track(c, st)
		if st == http.StateClosed {
			select {
			case closed <- struct{}{}:
			default:
			}
		}
	}
	addr, c := announceUnsentBody(t, srv, "POST")
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response after %s to an unauthorized request whose body never came: %v", time.Since(start).Round(time.Millisecond), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("status %d, want 401", resp.StatusCode)
	}

	// Its connection is closed (the server says so just after the
	// response's last byte, so a scraper connecting at once could still
	// find the one connection allowed busy), and the one connection
	// allowed then serves a scraper.
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the unauthorized request's connection is still open 10 s after its response")
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	req.SetBasicAuth("u", "p")
	resp, err = (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("a scraper after it: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a scraper after it: %d, want 200", resp.StatusCode)
	}
}

// announceUnsentBody serves srv on a port of its own until the test ends,
// and returns its address and a connection that sent a method request
// for /metrics announcing a body of 100 bytes, and no body; reads on the
// connection give up after 10 s (a hang guard).
func announceUnsentBody(t *testing.T, srv *http.Server, method string) (string, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "%s /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n", method)
	return ln.Addr().String(), c
}
