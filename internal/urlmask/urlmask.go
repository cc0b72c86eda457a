// Package urlmask writes a URL an operator configured (a latency source,
// dcgm-exporter, the pod metadata) in errors, logs and status without the
// secrets it may hold: the password of its user information, sent as basic
// auth, and its query values, where tokens are passed. The request itself
// is made to the URL as configured.
package urlmask

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// masked stands for a secret in a DisplayURL, as url.URL.Redacted writes
// a password.
const masked = "xxxxx"

// DisplayURL is how a URL u is written in errors, logs and status: with
// its password (user:PASSWORD@, which Go's client sends as basic auth)
// masked as url.URL.Redacted masks it, and the value of each query
// parameter (the whole of one without '='), where tokens are passed,
// masked as well; the scheme, user, host, port, path and parameter names
// stay, to tell the URLs apart. A URL with nothing to mask is u as
// written.
func DisplayURL(u string) string {
	p, err := url.Parse(u)
	switch {
	case err != nil || p.Opaque != "":
		// unparsed (http:user:pw@host, a password holding '/'): by its text
		return maskText(u)
	case !hasPassword(p) && p.RawQuery == "":
		return u
	}
	p.RawQuery = maskQuery(p.RawQuery)
	return p.Redacted()
}

// URLParseReason is why url.Parse refused u, err being its error: the
// reason without the URL, which err quotes whole; where DisplayURL masks
// something of u, with what the reason quotes masked too (an "invalid
// port" may be a piece of a password holding '/').
func URLParseReason(u string, err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if DisplayURL(u) == u {
		return err.Error()
	}
	return quoted.ReplaceAllLiteralString(err.Error(), `"`+masked+`"`)
}

// quoted is a %q-quoted string.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

func hasPassword(p *url.URL) bool {
	_, set := p.User.Password()
	return set
}

// maskQuery masks each parameter's value in the raw query q.
func maskQuery(q string) string {
	if q == "" {
		return q
	}
	params := strings.Split(q, "&")
	for i, kv := range params {
		if k, _, ok := strings.Cut(kv, "="); ok {
			params[i] = k + "=" + masked
		} else if kv != "" {
			params[i] = masked
		}
	}
	return strings.Join(params, "&")
}

// maskText masks, in a URL that url.Parse refused or read as opaque, what
// follows the first ':' of the user information (from after "scheme://",
// or "scheme:", to the last '@' before any '?') and each query value.
func maskText(u string) string {
	head, query, hasQuery := strings.Cut(u, "?")
	start := 0
	if i := strings.Index(head, "://"); i >= 0 {
		start = i + len("://")
	} else if i := strings.IndexByte(head, ':'); i >= 0 {
		start = i + 1
	}
	if at := strings.LastIndexByte(head, '@'); at > start {
		if c := strings.IndexByte(head[start:at], ':'); c >= 0 {
			head = head[:start+c+1] + masked + head[at:]
		}
	}
	if hasQuery {
		return head + "?" + maskQuery(query)
	}
	return head
}
