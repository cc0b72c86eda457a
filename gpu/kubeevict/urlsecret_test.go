package kubeevict

import (
	"net/http"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/internal/urlmask/urlmasktest"
)

// TestNewURLSecretsNotShown: an API server URL with a password
// (user:PASSWORD@) or a query token is refused, and the error, which the
// exporter logs, shows neither, whatever refuses it: the scheme, a path,
// a query, the user information (the token file authenticates; a URL with
// nothing else wrong was taken, its password sent nowhere) or url.Parse.
func TestNewURLSecretsNotShown(t *testing.T) {
	const host = "api:6443"
	type tc struct{ name, url, shown, reason string }
	cases := []tc{
		{"https, query token", "https://api:6443?token=s3cr3t", "https://api:6443?token=xxxxx", "not an https://HOST[:PORT] URL"},
		{"https, password", "https://admin:hunter2@api:6443", "https://admin:xxxxx@api:6443", "holds user information: the bearer token file authenticates"},
		{"https, password and path", "https://admin:hunter2@api:6443/api", "https://admin:xxxxx@api:6443/api", "holds user information"},
		{"url.Parse refuses", "https://admin:hunter2/x@api:6443?a=s3cr3t", "https://admin:xxxxx@api:6443?a=xxxxx", "invalid port"},
	}
	for _, u := range urlmasktest.Cases("admin", "/api", "a=1") {
		plain := tc{"http, " + u.Name, urlmasktest.Host(u.URL, host), urlmasktest.Host(u.Shown, host), ""}
		tls := tc{"https, " + u.Name + ", with a path", "https" + strings.TrimPrefix(plain.url, "http"), "https" + strings.TrimPrefix(plain.shown, "http"), ""}
		cases = append(cases, plain, tls)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(Options{APIServer: c.url, TokenFile: "t", HTTPClient: http.DefaultClient})
			if err == nil {
				t.Fatalf("%s taken", c.url)
			}
			if urlmasktest.Shows(err.Error()) {
				t.Errorf("the error shows a secret of the URL: %v", err)
			}
			if c.shown != "" && !strings.Contains(err.Error(), `"`+c.shown+`"`) {
				t.Errorf("error %v, want it to name the API server as %q", err, c.shown)
			}
			if !strings.Contains(err.Error(), c.reason) {
				t.Errorf("error %v, want it to say %q", err, c.reason)
			}
		})
	}
}
