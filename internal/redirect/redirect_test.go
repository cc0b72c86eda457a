package redirect

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A redirect is followed to the same scheme, host and port only, a few
// times at most; the error of one refused names where it led.
func TestSameOrigin(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer other.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/same", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/other-port", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/ok", http.StatusFound)
	})
	mux.HandleFunc("/other-host", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://example.invalid/ok", http.StatusFound)
	})
	mux.HandleFunc("/https", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://"+r.Host+"/ok", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := Client(srv.Client())
	for _, tc := range []struct{ path, err string }{
		{"/same", ""},
		{"/loop", "stopped after 5 redirects"},
		{"/other-port", "refused a redirect to another scheme, host or port (" + other.URL + ")"},
		{"/other-host", "refused a redirect to another scheme, host or port (http://example.invalid)"},
		{"/https", "refused a redirect to another scheme, host or port (https://"},
	} {
		resp, err := c.Get(srv.URL + tc.path)
		if err == nil {
			resp.Body.Close()
		}
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.path, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one with %q", tc.path, err, tc.err)
		}
	}
	if Client(nil).CheckRedirect == nil || srv.Client().CheckRedirect != nil {
		t.Error("Client must set the policy on a copy")
	}
}

// Ports are compared as the client dials them: a default port given or
// left out is the same origin, the other scheme's default is not; hosts
// compare without case, IPv6 ones too.
func TestSameOriginURLs(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"https://api.example:443/x", "https://api.example/y", true},
		{"https://api.example/x", "https://api.example:443/y", true},
		{"http://node:80/pods", "http://node/pods", true},
		{"https://API.Example/x", "https://api.example/y", true},
		{"HTTPS://api.example/x", "https://api.example/y", true},
		{"https://[fd00::1]/x", "https://[FD00::1]:443/y", true},
		{"https://api.example/x", "https://api.example:80/y", false},
		{"https://api.example/x", "http://api.example:443/y", false},
		{"http://node/x", "http://node:443/y", false},
		{"https://[fd00::1]:6443/x", "https://[fd00::1]/y", false},
		{"https://[fd00::1]/x", "https://[fd00::2]/y", false},
		{"https://api.example/x", "https://api.example.evil/y", false},
	} {
		mk := func(s string) *http.Request {
			r, err := http.NewRequest(http.MethodGet, s, nil)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		err := SameOrigin(mk(tc.to), []*http.Request{mk(tc.from)})
		if (err == nil) != tc.ok {
			t.Errorf("%s -> %s: error %v, want followed %v", tc.from, tc.to, err, tc.ok)
		}
	}
}
