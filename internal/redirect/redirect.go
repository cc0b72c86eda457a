// Package redirect is the redirect policy of the exporter's HTTP clients
// that read a peer it was pointed at (dcgm-exporter, the kubelet, the API
// server): a redirect is followed only to the same scheme, host and port,
// a few times at most. Go's client follows any redirect, up to ten, and
// keeps a request's Authorization header on one to the same host name
// whatever its scheme and port: a bearer token could go out in plain
// text (https to http), and a page be read from another host than the one
// configured.
package redirect

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
)

// Max is how many redirects one request follows.
const Max = 5

// SameOrigin is an http.Client CheckRedirect that follows at most Max
// redirects, each to the scheme, host and port of the first request.
func SameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= Max {
		return fmt.Errorf("stopped after %d redirects", Max)
	}
	from, to := via[0].URL, req.URL
	if from.Scheme != to.Scheme || !strings.EqualFold(from.Hostname(), to.Hostname()) || port(from) != port(to) {
		return fmt.Errorf("refused a redirect to another scheme, host or port (%s)", clip.Text(to.Scheme+"://"+to.Host, 120))
	}
	return nil
}

// Client returns a copy of c (a plain client when nil) whose redirects
// follow SameOrigin.
func Client(c *http.Client) *http.Client {
	out := &http.Client{}
	if c != nil {
		*out = *c
	}
	out.CheckRedirect = SameOrigin
	return out
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}
