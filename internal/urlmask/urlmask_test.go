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
		// a password holding '?': the user information is not the query's
		{"http://scraper:S3cretPart?rest@10.0.0.5:8000/metrics", "http://scraper:xxxxx@10.0.0.5:8000/metrics"},
		{"http://u:p?x@h/m?token=abc", "http://u:xxxxx@h/m?token=xxxxx"},
		// an '@' in the query of such a URL masks more, never the password less
		{"http://user:pa/ss@h/m?mail=a@b", "http://user:xxxxx@b"},
		// parsed, the password's first digits read as a port
		{"http://u:1234?x@h/m", "http://u:xxxxx@h/m"},
		{"http://user:00#000@h:8000/metrics", "http://user:xxxxx@h:8000/metrics"},
		{"http://user:000/00@h:8000/metrics", "http://user:xxxxx@h:8000/metrics"},
		// an '@' in a query with no port is no user information; with a
		// port it cannot be told from a password's: masked by the text
		{"http://h/m?e=a@b", "http://h/m?e=xxxxx"},
		{"http://h:8000/m?e=a@b", "http://h:xxxxx@b"},
		// a password holding '@' and then '/' or '?': parsed with a piece
		// of it as the host
		{"http://exporter:Xy@3/kLsecret@dcgm:9400/metrics", "http://exporter:xxxxx@dcgm:9400/metrics"},
		{"http://exporter:p@ss?tokpiece@dcgm:9400/metrics", "http://exporter:xxxxx@dcgm:9400/metrics"},
		{"http://u:pw@h:80/m?e=a@b", "http://u:xxxxx@b"},
		// the scheme left off: the user read as the scheme
		{"vllm:hunter2@10.0.0.5:8000/metrics", "vllm:xxxxx@10.0.0.5:8000/metrics"},
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

// FuzzDisplayURL: whatever a password holds, the URL as shown never holds
// it (parsed or masked by its text), with its scheme or with the scheme
// left off, and the host of a URL with its scheme is shown.
func FuzzDisplayURL(f *testing.F) {
	for _, pw := range []string{"hunter2", "pa/ss", "S3cret?rest", "p#w", "a:b", "%41bcdef", "x y z", "Xy@3/kLsecret", "p@ss?tokpiece"} {
		f.Add(pw)
	}
	f.Fuzz(func(t *testing.T, pw string) {
		const host = "@gpu-node-7.example:8000/metrics"
		if len(pw) < 6 || strings.Contains("http://user:"+host+masked, pw) {
			t.Skip()
		}
		us := []string{"http://user:" + pw + host}
		if !strings.HasPrefix(pw, "/") { // ("user://pw@host" has a user, pw, and no password)
			us = append(us, "user:"+pw+host)
		}
		for _, u := range us {
			got := DisplayURL(u)
			if strings.Contains(got, pw) {
				t.Errorf("DisplayURL(%q) = %q: shows the password", u, got)
			}
			if strings.HasPrefix(u, "http://") && !strings.Contains(got, "gpu-node-7.example") {
				t.Errorf("DisplayURL(%q) = %q: the host is not shown", u, got)
			}
		}
	})
}
