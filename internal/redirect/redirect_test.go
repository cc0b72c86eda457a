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
