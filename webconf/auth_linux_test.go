package webconf

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// An edit that removes basic auth from the configuration in use is
// refused until a restart, as one turning TLS on or off is: the copy in
// use keeps its users, and the reload, or the check that finds the edit
// settled, fails naming the file and the restart, counted as a failed
// reload. (Before, it was put in use: a file emptied while the exporter
// ran, `: > web.yml`, served every request without authentication within
// 10 s, logged at info as a change now in use.) Another user list, or
// basic auth added where there was none, is put in use.
func TestBasicAuthRemovalRefused(t *testing.T) {
	users := "basic_auth_users:\n  prom: " + hash(t, "s3cret") + "\n"
	for _, tc := range []struct{ name, edit string }{
		{"emptied", ""},
		{"comments only", "# no users\n"},
		{"no user", "basic_auth_users: {}\n"},
		{"null users", "basic_auth_users:\n"},
		{"headers only", "http_server_config:\n  headers:\n    X-Frame-Options: deny\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, by := range []string{"reload", "check"} {
				f := filepath.Join(t.TempDir(), "web.yml")
				write(t, f, users)
				k, err := Open(f, limit, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer k.Close()
				before := served(t, k)
				write(t, f, tc.edit)
				if by == "reload" {
					err = k.Reload()
				} else {
					k.Check() // a change settles for one check
					var changed bool
					if changed, err = k.Check(); !changed {
						t.Fatalf("%s: the check found no change", by)
					}
				}
				if err == nil || !errors.Is(err, ErrRestart) || !strings.Contains(err.Error(), f) || !strings.Contains(err.Error(), "removes basic auth") {
					t.Errorf("%s: %v, want an error naming %s, the removal of basic auth and the restart it takes", by, err, f)
				}
				if got := served(t, k); got != before {
					t.Errorf("%s: the copy in use changed to %q", by, got)
				}
				if n := k.failures.Load(); n != 1 {
					t.Errorf("%s: %v failed reloads counted, want 1", by, n)
				}
			}
		})
	}

	f := filepath.Join(t.TempDir(), "web.yml")
	write(t, f, "")
	k, err := Open(f, limit, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	for _, edit := range []string{users, "basic_auth_users:\n  other: " + hash(t, "n3w") + "\n"} {
		write(t, f, edit)
		if err := k.Reload(); err != nil {
			t.Errorf("reload of %q: %v", edit, err)
		}
		if got := served(t, k); got != edit {
			t.Errorf("in use %q, want %q", got, edit)
		}
	}
	write(t, f, "")
	if err := k.Reload(); !errors.Is(err, ErrRestart) {
		t.Errorf("basic auth added by a reload, then removed: %v, want it refused until a restart", err)
	}
}

// The start warns of a file that sets neither TLS nor basic auth: it
// protects nothing (a file emptied or written without its users before a
// restart). One that sets either is not warned of.
func TestOpenWarnsWithoutProtection(t *testing.T) {
	dir := t.TempDir()
	testutil.WriteSelfSigned(t, dir)
	for _, tc := range []struct {
		content string
		warn    bool
	}{
		{"", true},
		{"basic_auth_users: {}\n", true},
		{"http_server_config:\n  http2: false\n", true},
		{"basic_auth_users:\n  prom: " + hash(t, "s3cret") + "\n", false},
		{"tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n", false},
	} {
		f := filepath.Join(dir, "web.yml")
		write(t, f, tc.content)
		var warned []string
		k, err := Open(f, limit, func(msg string) { warned = append(warned, msg) })
		if err != nil {
			t.Fatalf("%q: %v", tc.content, err)
		}
		k.Close()
		got := strings.Contains(strings.Join(warned, "\n"), NoProtection)
		if got != tc.warn {
			t.Errorf("%q: warned %q, want the warning of no protection: %v", tc.content, warned, tc.warn)
		}
	}
}
