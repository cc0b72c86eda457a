package urlmask

import (
	"net/url"
	"strings"
	"testing"
)

// TestDisplayURL: a configured URL as errors and logs write it.
func TestDisplayURL(t *testing.T) {
	tests := []struct{ url, want string }{
		{"http://10.0.0.5:8000/metrics", "http://10.0.0.5:8000/metrics"},
		{"sim://chat", "sim://chat"},
		{"http://user@h/metrics", "http://user@h/metrics"}, // as url.URL.Redacted: no password, nothing masked
		{"http://user:pw@h/metrics", "http://user:xxxxx@h/metrics"},
		{"https://user:@h/metrics", "https://user:xxxxx@h/metrics"},
		{"http://h/metrics?token=abc&x=&debug", "http://h/metrics?token=xxxxx&x=xxxxx&xxxxx"},
		{"http://h/metrics?a=1;b=2", "http://h/metrics?a=xxxxx"},
		{"http://u:pw@h:9/m?token=abc", "http://u:xxxxx@h:9/m?token=xxxxx"},
		// url.Parse refuses these, or reads them as opaque: masked by their text
		{"http://user:pa/ss@h/metrics", "http://user:xxxxx@h/metrics"},
		{"http:user:pw@h/metrics", "http:user:xxxxx@h/metrics"},
		{"http://user:pw@h/\x01?token=abc", "http://user:xxxxx@h/\x01?token=xxxxx"},
	}
	for _, tc := range tests {
		if got := DisplayURL(tc.url); got != tc.want {
			t.Errorf("DisplayURL(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}
}

// TestURLParseReason: url.Parse's reason for refusing a URL, without the
// URL it quotes, and with what it quotes masked where the URL holds a
// secret.
func TestURLParseReason(t *testing.T) {
	tests := []struct{ url, want string }{
		{"http://h:port/metrics", `invalid port ":port" after host`},
		{"http://user:pa/ss@h/metrics", `invalid port "xxxxx" after host`},
		{"http://h/\x01?token=abc", "net/url: invalid control character in URL"},
	}
	for _, tc := range tests {
		_, err := url.Parse(tc.url)
		if err == nil {
			t.Fatalf("url.Parse(%q) took it", tc.url)
		}
		got := URLParseReason(tc.url, err)
		if got != tc.want {
			t.Errorf("URLParseReason(%q) = %q, want %q", tc.url, got, tc.want)
		}
		if strings.Contains(got, "pa/ss") || strings.Contains(got, "abc") {
			t.Errorf("URLParseReason(%q) = %q quotes a secret", tc.url, got)
		}
	}
}
