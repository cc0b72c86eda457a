package httplimit

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

func TestClientHandshakeFailure(t *testing.T) {
	for _, tc := range []struct {
		line   string
		client bool
	}{
		{"http: TLS handshake error from 10.0.0.7:51234: EOF", true},
		{"http: TLS handshake error from [::1]:51234: EOF", true},
		{"http: TLS handshake error from 10.0.0.7:51234: unexpected EOF", true},
		{"http: TLS handshake error from 10.0.0.7:51234: read tcp 10.0.0.2:9835->10.0.0.7:51234: read: connection reset by peer", true},
		{"http: TLS handshake error from 10.0.0.7:51234: write tcp 10.0.0.2:9835->10.0.0.7:51234: write: broken pipe", true},
		{"http: TLS handshake error from 10.0.0.7:51234: read tcp 10.0.0.2:9835->10.0.0.7:51234: i/o timeout", true},
		{"http: TLS handshake error from 10.0.0.7:51234: client sent an HTTP request to an HTTPS server", true},
		{"http: TLS handshake error from 10.0.0.7:51234: tls: first record does not look like a TLS handshake", true},
		// The server's failures, and a client refusing its certificate
		// (which may be the server's: an expired one), stay errors.
		{"http: TLS handshake error from 10.0.0.7:51234: open /etc/tls/tls.crt: no such file or directory", false},
		{"http: TLS handshake error from 10.0.0.7:51234: tls: failed to find any PEM data in certificate input", false},
		{"http: TLS handshake error from 10.0.0.7:51234: remote error: tls: bad certificate", false},
		// Not a handshake's line.
		{"http: Accept error: accept tcp [::]:9835: read: connection reset by peer; retrying in 5ms", false},
		{"http: panic serving 10.0.0.7:51234: EOF", false},
		{"http: TLS handshake error from 10.0.0.7:51234", false},
	} {
		if got := clientHandshakeFailure(tc.line); got != tc.client {
			t.Errorf("clientHandshakeFailure(%q) = %v, want %v", tc.line, got, tc.client)
		}
	}
}

// A client that connects to the TLS port and leaves without a handshake
// (a port scanner, a load balancer's TCP health check), or speaks plain
// HTTP to it, is logged at debug level, not as an error of the server's;
// a handshake failing for the server's reason (its certificate cannot be
// loaded: exporter-toolkit reads it at each handshake) stays an error, as
// does a client refusing the server's certificate.
func TestClientHandshakeFailureLoggedAtDebug(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(t *testing.T, addr, dir string)
		level  string
	}{
		{"closed before the handshake", func(t *testing.T, addr, _ string) {
			dial(t, addr).Close()
		}, "debug"},
		{"reset before the handshake", func(t *testing.T, addr, _ string) {
			c := dial(t, addr)
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}, "debug"},
		{"closed in the handshake", func(t *testing.T, addr, _ string) {
			c := dial(t, addr)
			_, _ = c.Write([]byte{0x16, 0x03, 0x01, 0x00, 0x40, 0x01}) // a ClientHello's first bytes
			c.Close()
		}, "debug"},
		{"plain HTTP", func(t *testing.T, addr, _ string) {
			c := dial(t, addr)
			defer c.Close()
			_, _ = io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
			_, _ = io.Copy(io.Discard, c)
		}, "debug"},
		{"certificate not loadable", func(t *testing.T, addr, dir string) {
			if err := os.Remove(filepath.Join(dir, "tls.crt")); err != nil {
				t.Fatal(err)
			}
			if c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}); err == nil {
				c.Close()
				t.Fatal("handshake succeeded without a certificate")
			}
		}, "error"},
		{"server's certificate refused", func(t *testing.T, addr, _ string) {
			if c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "localhost"}); err == nil {
				c.Close()
				t.Fatal("a self-signed certificate verified")
			}
		}, "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			testutil.WriteSelfSigned(t, dir)
			logs := &lockedBuffer{}
			srv := NewServer(http.NotFoundHandler(), Limits{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxConnections: 8}, log.NewLogfmtLogger(logs))
			srv.TLSConfig = &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				c, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
				return &c, err
			}}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go srv.ServeTLS(ln, "", "")
			defer srv.Close()
			tc.client(t, ln.Addr().String(), dir)
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(logs.String(), "TLS handshake error") {
				if time.Now().After(deadline) {
					t.Fatalf("no handshake error logged within 10 s:\n%s", logs)
				}
				time.Sleep(5 * time.Millisecond)
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "level="+tc.level+" ") {
				t.Errorf("log:\n%s\nwant one line at level %s", logs, tc.level)
			}
		})
	}
}

// Clients failing handshakes faster than the log's bound (a port scan) do
// not hold back the line of the server's own failure that follows.
func TestClientHandshakeFailuresHoldNoErrorBack(t *testing.T) {
	logs := &lockedBuffer{}
	l := newServerErrorLog(log.NewLogfmtLogger(logs))
	for range 10 * serverLogBurst {
		_, _ = l.Write([]byte("http: TLS handshake error from 10.0.0.7:51234: EOF\n"))
	}
	_, _ = l.Write([]byte("http: TLS handshake error from 10.0.0.7:51235: open /x/tls.crt: no such file or directory\n"))
	if n, e := strings.Count(logs.String(), "level=debug"), strings.Count(logs.String(), "level=error"); n != serverLogBurst || e != 1 {
		t.Errorf("%d debug lines, %d error lines, want %d and 1:\n%s", n, e, serverLogBurst, logs)
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// lockedBuffer is a log's buffer read while the server writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
