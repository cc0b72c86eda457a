// Package urlmasktest holds what the tests of the URLs an operator
// configures (a latency source, dcgm-exporter, the pod metadata) share:
// URLs with secrets, what they are to be shown as and what their server is
// to be sent, a server that records what it was sent, and an address that
// refuses connections.
package urlmasktest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Secrets are the secrets the Cases' URLs hold: none may be shown.
var Secrets = []string{"hunter2", "s3cr3t"}

// Shows says whether text shows a secret of the Cases' URLs.
func Shows(text string) bool {
	for _, s := range Secrets {
		if strings.Contains(text, s) {
			return true
		}
	}
	return false
}

// A Case is a URL holding secrets. HOST in URL and Shown stands for the
// server's address (Host).
type Case struct {
	Name  string
	URL   string // as configured
	Shown string // as errors, logs and status are to show it
	Asked string // the basic-auth password and raw query the server is to be sent (Recorder)
}

// Host is URL or Shown with host for HOST.
func Host(s, host string) string { return strings.Replace(s, "HOST", host, 1) }

// Cases are a URL with user's password, one with a query token beside the
// query q (another parameter, its value masked too), and one with both,
// each with path.
func Cases(user, path, q string) []Case {
	shownQ := "token=xxxxx"
	for _, kv := range strings.Split(q, "&") {
		k, _, _ := strings.Cut(kv, "=")
		shownQ += "&" + k + "=xxxxx"
	}
	return []Case{
		{"password", "http://" + user + ":hunter2@HOST" + path, "http://" + user + ":xxxxx@HOST" + path, "hunter2 "},
		{"query token", "http://HOST" + path + "?token=s3cr3t&" + q, "http://HOST" + path + "?" + shownQ, " token=s3cr3t&" + q},
		{"both", "http://" + user + ":hunter2@HOST" + path + "?token=s3cr3t", "http://" + user + ":xxxxx@HOST" + path + "?token=xxxxx", "hunter2 token=s3cr3t"},
	}
}

// RefusedAddr is a local address nothing listens on.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Recorder records what the servers it starts were sent: each request's
// basic-auth password and raw query, "PASSWORD QUERY".
type Recorder struct {
	mu   sync.Mutex
	sent []string
}

// Serve starts a server that records each request, then has h answer it;
// it returns the server's address (host:port).
func (r *Recorder) Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, pw, _ := req.BasicAuth()
		r.mu.Lock()
		r.sent = append(r.sent, pw+" "+req.URL.RawQuery)
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// Sent returns what was recorded since the last Reset.
func (r *Recorder) Sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.sent...)
}

// Reset forgets what was recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = nil
}
