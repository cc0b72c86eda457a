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
	case err != nil || p.Opaque != "" || cutUserInfo(u):
		// unparsed (http:user:pw@host, a password holding '/'), or parsed
		// with a piece of the password as the host, a port or the path
		// (u:1234?x@host, u:12#34@host, u:p@3/rest@host): by its text
		return maskText(u)
	case !hasPassword(p) && p.RawQuery == "":
		return u
	}
	p.RawQuery = maskQuery(p.RawQuery)
	return p.Redacted()
}

// cutUserInfo says whether u may hold user information that url.Parse
// did not read as such: u has no "scheme://" and holds an '@', or its
// authority (up to the first '/', '?' or '#') holds a ':' and an '@'
// follows. A password holding '/', '?' or '#' is
// read so, its first characters a port where they are digits
// ("u:1234?x@host", "u:000/00@host"). A URL with a port and an '@' in its
// path, query or fragment is masked by its text too: more than its
// secrets, never less.
func cutUserInfo(u string) bool {
	i := authorityStart(u)
	if i < 0 {
		// "user:pw@host" with the scheme left off, whatever the password
		// holds: url.Parse reads the user as the scheme
		return strings.Contains(u, "@")
	}
	rest := u[i:]
	j := strings.IndexAny(rest, "/?#")
	return j >= 0 && strings.Contains(rest[:j], ":") && strings.Contains(rest[j:], "@")
}

// authorityStart is where u's authority starts, after "scheme://", -1
// where u does not begin so (what comes before "://" is no scheme: a
// letter, then letters, digits, '+', '-' or '.').
func authorityStart(u string) int {
	i := strings.Index(u, "://")
	if i < 1 {
		return -1
	}
	for k, c := range u[:i] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || k > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return -1
		}
	}
	return i + len("://")
}

// URLParseReason is why url.Parse refused u, err being its error: the
// reason without the URL, which err quotes whole; where DisplayURL masks
// something of u, with what the reason quotes masked too (an "invalid
// port" may be a piece of a password holding '/').
func URLParseReason(u string, err error) string {
	err = Unwrap(err)
	if DisplayURL(u) == u {
		return err.Error()
	}
	return quoted.ReplaceAllLiteralString(err.Error(), `"`+masked+`"`)
}

// Unwrap is err without the *url.Error around it, which repeats the method
// and quotes the URL (url.Parse's whole, password and query included).
func Unwrap(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
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

// maskText masks, in a URL that url.Parse refused, read as opaque or read
// with a piece of the password elsewhere (cutUserInfo), what follows the
// first ':' of the user information up to the last '@', and each query
// value.
func maskText(u string) string {
	// where the user information starts: after "scheme://", after a
	// scheme of the web's without "//" ("http:user:pw@host"), else at
	// the start ("user:pw@host", the scheme left off: the user is what
	// url.Parse read as the scheme)
	start := 0
	if i := authorityStart(u); i >= 0 {
		start = i
	} else if scheme, _, ok := strings.Cut(u, ":"); ok && (strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https")) {
		start = len(scheme) + 1
	}
	// the user information ends at the last '@' of the whole text: a
	// password may hold '@', '/', '?', '#' or ':' (why it is read by its
	// text); an '@' in a path or query masks more than the password,
	// never less
	if at := strings.LastIndexByte(u, '@'); at > start {
		if c := strings.IndexByte(u[start:at], ':'); c >= 0 {
			u = u[:start+c+1] + masked + u[at:]
		}
	}
	head, query, hasQuery := strings.Cut(u, "?")
	if hasQuery {
		return head + "?" + maskQuery(query)
	}
	return head
}
