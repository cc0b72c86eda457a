package webconf

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// reloadBy reloads k's file by a reload, by "reload", or else by the
// check that finds its edit settled, and returns its error.
func reloadBy(t *testing.T, k *Kept, by string) error {
	t.Helper()
	if by == "reload" {
		return k.Reload()
	}
	k.Check() // a change settles for one check
	changed, err := k.Check()
	if !changed {
		t.Fatalf("%s: the check found no change", by)
	}
	return err
}

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
				err = reloadBy(t, k, by)
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

// An edit that stops requiring a verified client certificate (client_auth_type
// RequireAndVerifyClientCert with a client CA) is refused until a restart,
// as the removal of basic auth is: the copy in use keeps requiring one, a
// client without one is still refused, and the reload, or the check that
// finds the edit settled, fails naming the file and the restart, counted
// as a failed reload. (Before, it was put in use: every request was served
// to clients without a verified certificate.) Another client CA, given in
// the file or inline, or a requirement added where there was none, is put
// in use.
func TestClientCertRequirementRemovalRefused(t *testing.T) {
	const tlsPair = "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"
	const required = tlsPair + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
	selfSigned, err := tls.X509KeyPair(testutil.SelfSignedPEM(t, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), false))
	if err != nil {
		t.Fatal(err)
	}
	// open writes the certificates and the file, start, in a new
	// directory and opens it.
	open := func(t *testing.T, start string) (k *Kept, f, dir string) {
		dir = t.TempDir()
		testutil.WriteSelfSigned(t, dir)
		writeCA(t, dir)
		f = filepath.Join(dir, "web.yml")
		write(t, f, start)
		k, err := Open(f, limit, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.Close() })
		return k, f, dir
	}
	for _, tc := range []struct{ name, edit, want string }{
		{"no client_auth_type", tlsPair, "no client_auth_type: NoClientCert"},
		{"NoClientCert", tlsPair + "  client_auth_type: NoClientCert\n", "client_auth_type NoClientCert"},
		{"RequestClientCert", tlsPair + "  client_auth_type: RequestClientCert\n  client_ca_file: ca.crt\n", "client_auth_type RequestClientCert"},
		{"VerifyClientCertIfGiven", tlsPair + "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n", "client_auth_type VerifyClientCertIfGiven"},
		{"RequireAnyClientCert", tlsPair + "  client_auth_type: RequireAnyClientCert\n  client_ca_file: ca.crt\n", "client_auth_type RequireAnyClientCert"},
		{"RequireClientCert", tlsPair + "  client_auth_type: RequireClientCert\n", "client_auth_type RequireClientCert"},
		{"no client CA", tlsPair + "  client_auth_type: RequireAndVerifyClientCert\n", "no client_ca_file or client_ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, by := range []string{"reload", "check"} {
				k, f, _ := open(t, required)
				noCert, unverified := serveTLS(t, k, tls.Certificate{}), serveTLS(t, k, selfSigned)
				before := served(t, k)
				write(t, f, tc.edit)
				err := reloadBy(t, k, by)
				if err == nil || !errors.Is(err, ErrRestart) || !strings.Contains(err.Error(), f) ||
					!strings.Contains(err.Error(), "no longer requires a verified client certificate ("+tc.want) {
					t.Errorf("%s: %v, want an error naming %s, the requirement dropped (%s) and the restart it takes", by, err, f, tc.want)
				}
				if got := served(t, k); got != before {
					t.Errorf("%s: the copy in use changed to %q", by, got)
				}
				if _, err := noCert(); err == nil {
					t.Errorf("%s: a client without a certificate was served", by)
				}
				if _, err := unverified(); err == nil {
					t.Errorf("%s: a client with a certificate no client CA signed was served", by)
				}
				if n := k.failures.Load(); n != 1 {
					t.Errorf("%s: %v failed reloads counted, want 1", by, n)
				}
			}
		})
	}

	for _, tc := range []struct {
		name  string
		edit  func(t *testing.T, dir string) string
		start string
	}{
		{"another client_ca_file", func(t *testing.T, dir string) string {
			if err := os.Mkdir(filepath.Join(dir, "new"), 0o700); err != nil {
				t.Fatal(err)
			}
			writeCA(t, filepath.Join(dir, "new"))
			return strings.Replace(required, "ca.crt", "new/ca.crt", 1)
		}, required},
		{"client CA inline", func(t *testing.T, dir string) string {
			ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
			if err != nil {
				t.Fatal(err)
			}
			return tlsPair + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca: |\n    " +
				strings.ReplaceAll(strings.TrimSpace(string(ca)), "\n", "\n    ") + "\n"
		}, required},
		{"client_allowed_sans added", func(*testing.T, string) string {
			return required + "  client_allowed_sans: [prometheus]\n"
		}, required},
		{"strengthened", func(*testing.T, string) string { return required },
			tlsPair + "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, by := range []string{"reload", "check"} {
				k, f, dir := open(t, tc.start)
				before := served(t, k)
				write(t, f, tc.edit(t, dir))
				if err := reloadBy(t, k, by); err != nil {
					t.Errorf("%s: %v", by, err)
				}
				if got := served(t, k); got == before {
					t.Errorf("%s: the copy in use did not change", by)
				}
				write(t, f, tlsPair)
				if err := k.Reload(); !errors.Is(err, ErrRestart) {
					t.Errorf("%s, then the requirement dropped: %v, want it refused until a restart", by, err)
				}
			}
		})
	}

	// Where exporter-toolkit reads the file itself (no memfd) the edit is
	// in use all the same: the reload says so.
	old := memfdCreate
	memfdCreate = func(string, int) (int, error) { return -1, unix.EPERM }
	defer func() { memfdCreate = old }()
	k, f, _ := open(t, required)
	write(t, f, tlsPair)
	if err := k.Reload(); !errors.Is(err, ErrRestart) || !strings.Contains(err.Error(), InvalidInUse) {
		t.Errorf("without memfd: %v, want the requirement dropped refused, the edit said to be in use", err)
	}
}
