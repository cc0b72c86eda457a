// Package headercap bounds the headers of the answers a client reads from
// a peer (a latency source, dcgm-exporter), which the bound on a body does
// not: Go's transport reads up to 10 MiB of them by default, and a peer
// that sends that much on every scrape costs tens of MiB each time.
package headercap

import "net/http"

// MaxBytes bounds the headers of an answer. A real answer's are well
// under 1 KiB.
const MaxBytes = 64 << 10

// Client is a copy of c (a plain client where nil) that reads through its
// own copy of c's transport (of http.DefaultTransport where it has none)
// whose answers' headers may hold at most MaxBytes, proxies, TLS and
// timeouts kept. Another kind of RoundTripper is used as it is.
func Client(c *http.Client) *http.Client {
	out := &http.Client{}
	if c != nil {
		*out = *c
	}
	rt := out.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if t, ok := rt.(*http.Transport); ok {
		t = t.Clone()
		t.MaxResponseHeaderBytes = MaxBytes
		out.Transport = t
	}
	return out
}
