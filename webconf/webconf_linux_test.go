package webconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/sys/unix"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

const limit = 1 << 20

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func hash(t *testing.T, pass string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func served(t *testing.T, k *Kept) string {
	t.Helper()
	b, err := os.ReadFile(k.Path())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A reload of a file edited into something invalid keeps the copy in use
// as it was, still valid, and names the file and the problem.
func TestReloadKeepsLastGood(t *testing.T) {
	dir := t.TempDir()
	testutil.WriteSelfSigned(t, dir)
	write(t, filepath.Join(dir, "garbage.crt"), "not a certificate\n")
	tlsPart := "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"
	good := tlsPart + "basic_auth_users:\n  prom: " + hash(t, "s3cret") + "\n"
	for _, tc := range []struct{ name, edit, want string }{
		{"bad YAML", "basic_auth_users:\n  prom: [\n", "line 2"},
		{"bad bcrypt hash", tlsPart + "basic_auth_users:\n  prom: nohash\n", "hash"},
		{"missing cert file", strings.Replace(good, "tls.crt", "missing.crt", 1), "missing.crt"},
		{"cert file that is no certificate", strings.Replace(good, "tls.crt", "garbage.crt", 1), "cert_file " + filepath.Join(dir, "garbage.crt")},
		{"TLS turned off", "basic_auth_users:\n  prom: " + hash(t, "s3cret") + "\n", "TLS off"},
		{"unknown key", good + "no_such_key: 1\n", "no_such_key"},
		{"missing file", "", "no such file"},
		{"named pipe", "fifo", "named pipe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(dir, "web.yml")
			write(t, f, good)
			k, err := Open(f, limit, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			before := served(t, k)
			switch tc.edit {
			case "", "fifo":
				os.Remove(f)
				if tc.edit == "fifo" {
					if err := unix.Mkfifo(f, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			default:
				write(t, f, tc.edit)
			}
			err = k.Reload()
			if err == nil || !strings.Contains(err.Error(), f) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("reload: %v, want an error naming %s and %q", err, f, tc.want)
			}
			if got := served(t, k); got != before {
				t.Errorf("the copy in use changed to\n%s", got)
			}
			if err := web.Validate(k.Path()); err != nil {
				t.Errorf("the copy in use no longer validates: %v", err)
			}
		})
	}
}

// A valid edit takes effect at the reload, not before.
func TestReloadTakesGoodEdit(t *testing.T) {
	f := filepath.Join(t.TempDir(), "web.yml")
	write(t, f, "basic_auth_users:\n  prom: "+hash(t, "s3cret")+"\n")
	k, err := Open(f, limit, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	path := k.Path()
	edit := "basic_auth_users:\n  prom: " + hash(t, "n3w") + "\n"
	write(t, f, edit)
	if served(t, k) == edit {
		t.Error("the edit is in use before a reload")
	}
	if err := k.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := served(t, k); got != edit {
		t.Errorf("after the reload the copy is\n%s\nwant\n%s", got, edit)
	}
	if k.Path() != path {
		t.Errorf("the path changed from %s to %s: exporter-toolkit holds the first", path, k.Path())
	}
}

// copiesOf checks that the copy in use names, for each key of files, a
// private copy of that file (a memfd holding its content), not the file.
func copiesOf(t *testing.T, k *Kept, files map[string]string) {
	t.Helper()
	var c struct {
		TLS web.TLSConfig `yaml:"tls_server_config"`
	}
	got := served(t, k)
	if err := yaml.Unmarshal([]byte(got), &c); err != nil {
		t.Fatal(err)
	}
	named := map[string]string{"cert_file": c.TLS.TLSCertPath, "key_file": c.TLS.TLSKeyPath, "client_ca_file": c.TLS.ClientCAs}
	for key, file := range files {
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(named[key], fdDir) {
			t.Errorf("the copy names %s %q, not a private copy of %s:\n%s", key, named[key], file, got)
			continue
		}
		if b, err := os.ReadFile(named[key]); err != nil || string(b) != string(want) {
			t.Errorf("%s %s holds %d bytes (%v), not those of %s", key, named[key], len(b), err, file)
		}
	}
}

// The copy lives elsewhere: the certificate and key paths relative to the
// file's directory (as exporter-toolkit takes them) name the files whose
// copies it names, also for a file given relative to the working
// directory.
func TestRelativePathsResolved(t *testing.T) {
	dir := t.TempDir()
	testutil.WriteSelfSigned(t, dir)
	write(t, filepath.Join(dir, "web.yml"), "tls_server_config:\n  cert_file: tls.crt\n  key_file: 'tls.key'\n  client_auth_type: NoClientCert\n")
	t.Chdir(dir)
	k, err := Open("web.yml", limit, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	copiesOf(t, k, map[string]string{"cert_file": filepath.Join(dir, "tls.crt"), "key_file": filepath.Join(dir, "tls.key")})
	if got := served(t, k); !strings.Contains(got, "NoClientCert") {
		t.Errorf("the copy lost the other keys:\n%s", got)
	}
}

// A file exporter-toolkit accepts is accepted, its relative paths
// resolved wherever YAML puts them (a merge key, an alias) and a null one
// left out, as exporter-toolkit reads them; and a certificate so named is
// watched for a change. Before, the paths of a merge key stayed relative
// (the start failed reading /proc/self/fd/tls.crt), and a null
// client_ca_file became the file "null".
func TestYAMLFormsAccepted(t *testing.T) {
	for _, tc := range []struct{ name, tls string }{
		{"merge key", "  <<: {cert_file: tls.crt, key_file: tls.key}\n"},
		{"merge key of a list", "  <<: [{cert_file: tls.crt}, {key_file: tls.key}]\n"},
		{"alias", "  cert_file: &c tls.crt\n  key_file: tls.key\n  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: *c\n"},
		{"null client CA", "  cert_file: tls.crt\n  key_file: tls.key\n  client_ca_file: null\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			testutil.WriteSelfSigned(t, dir)
			write(t, filepath.Join(dir, "web.yml"), "tls_server_config:\n"+tc.tls)
			t.Chdir(dir)
			if err := web.Validate("web.yml"); err != nil {
				t.Fatalf("exporter-toolkit refuses the file: %v", err)
			}
			k, err := Open("web.yml", limit, nil)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			defer k.Close()
			files := map[string]string{"cert_file": filepath.Join(dir, "tls.crt"), "key_file": filepath.Join(dir, "tls.key")}
			if strings.Contains(tc.tls, "client_ca_file: *c") {
				files["client_ca_file"] = files["cert_file"]
			}
			copiesOf(t, k, files)
			testutil.WriteSelfSigned(t, dir)
			k.Check() // a change settles for one check
			if changed, err := k.Check(); !changed || err != nil {
				t.Errorf("a renewed certificate: changed %v, %v; want a change in use", changed, err)
			}
		})
	}
}

// exporter-toolkit reads the first YAML document of the file only: a
// section after a document end ("...") or a second document start
// ("---") was dropped unread, basic_auth_users with it (no password
// asked) or tls_server_config (plain HTTP). Such a file is refused at the
// start, at a reload and at a check, naming the line, the last good one
// staying in use; a document end followed by comments only, and a leading
// document start, are accepted.
func TestMoreThanOneDocumentRefused(t *testing.T) {
	dir := t.TempDir()
	testutil.WriteSelfSigned(t, dir)
	f := filepath.Join(dir, "web.yml")
	good := "http_server_config:\n  http2: true\n"
	sections := map[string]string{
		"basic_auth_users":   "basic_auth_users:\n  prom: " + hash(t, "s3cret") + "\n",
		"tls_server_config":  "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n",
		"http_server_config": "http_server_config:\n  headers:\n    X-Frame-Options: deny\n",
	}
	type row struct{ name, file, want string } // want "": accepted
	var rows []row
	for _, key := range []string{"basic_auth_users", "tls_server_config", "http_server_config"} {
		rows = append(rows,
			row{key + " after ...", good + "...\n" + sections[key], "line 4: only one YAML document is allowed: this line follows the document end"},
			row{key + " after ---", good + "---\n" + sections[key], "line 3: only one YAML document is allowed"},
			row{key + " after ... and comments", good + "# end\n...\n\n# users\n" + sections[key], "line 7: only one YAML document is allowed: this line follows the document end"})
	}
	rows = append(rows,
		row{"... followed by comments only", good + "...\n# end\n\n", ""},
		row{"leading ---", "---\n" + sections["basic_auth_users"], ""},
		row{"leading --- and a closing ...", "# web\n---\n" + sections["basic_auth_users"] + "...\n", ""},
		row{"--- last", sections["basic_auth_users"] + "---\n", ""},
		row{"--- followed by comments only", sections["basic_auth_users"] + "---\n# end\n\n", ""},
		row{"leading --- and a last ---", "---\n" + sections["basic_auth_users"] + "---\n", ""},
		row{"basic_auth_users after an empty document", good + "---\n# users\n---\n" + sections["basic_auth_users"], "line 5: only one YAML document is allowed"})
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			write(t, f, tc.file)
			k, err := Open(f, limit, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				k.Close()
				return
			}
			if err == nil {
				k.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("start: %v, want %q", err, tc.want)
			}
			for _, how := range []string{"reload", "check"} {
				write(t, f, good)
				k, err := Open(f, limit, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer k.Close()
				write(t, f, tc.file)
				if how == "reload" {
					err = k.Reload()
				} else {
					k.Check() // a change settles for one check
					_, err = k.Check()
				}
				if err == nil || !strings.Contains(err.Error(), f+": "+tc.want) {
					t.Errorf("%s: %v, want an error naming %s and %q", how, err, f, tc.want)
				}
				if got := served(t, k); got != good {
					t.Errorf("%s: the copy in use changed to\n%s", how, got)
				}
			}
		})
	}
}

// The copy is not inherited by the programs the exporter runs, before or
// after a reload, cannot be written, and is gone once closed.
func TestCopyPrivate(t *testing.T) {
	f := filepath.Join(t.TempDir(), "web.yml")
	write(t, f, "basic_auth_users: {}\n")
	k, err := Open(f, limit, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		flags, err := unix.FcntlInt(uintptr(k.copy.fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("reload %d: the copy's descriptor flags %#x (%v) lack close-on-exec", i, flags, err)
		}
		if err := k.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	path := k.Path()
	// Neither appended to (the file's size sealed) nor overwritten in
	// place (its content sealed), by one who can open it for writing.
	for _, flag := range []int{os.O_APPEND, 0} {
		if f, err := os.OpenFile(path, os.O_WRONLY|flag, 0); err == nil {
			_, werr := f.WriteString("#") // a byte: growing is a seal of its own
			f.Close()
			if werr == nil {
				t.Errorf("the copy in use could be written (open flags %#x)", os.O_WRONLY|flag)
			}
		}
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(path); err == nil {
		t.Errorf("%s is still readable once closed", path)
	}
}

// A certificate, key or client CA file that is no regular file is
// refused, naming it, at the start and at a reload or check: exporter-
// toolkit reads these files whole, and a read of a FIFO waits for a
// writer, which held the start, or the reload, every later one and the
// shutdown, for good.
func TestTLSFileNotRegular(t *testing.T) {
	for _, key := range []string{"cert_file", "key_file", "client_ca_file"} {
		t.Run(key, func(t *testing.T) {
			dir := t.TempDir()
			testutil.WriteSelfSigned(t, dir)
			if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
				t.Fatal(err)
			}
			good := "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"
			bad := map[string]string{
				"cert_file":      "tls_server_config:\n  cert_file: fifo\n  key_file: tls.key\n",
				"key_file":       "tls_server_config:\n  cert_file: tls.crt\n  key_file: fifo\n",
				"client_ca_file": good + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: fifo\n",
			}[key]
			f := filepath.Join(dir, "web.yml")
			within := func(what string, call func() error) {
				t.Helper()
				done := make(chan error, 1)
				go func() { done <- call() }()
				select {
				case err := <-done:
					if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "fifo")) || !strings.Contains(err.Error(), "named pipe") {
						t.Errorf("%s: %v, want an error naming %s a named pipe", what, err, filepath.Join(dir, "fifo"))
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: still blocked after 5 s", what)
				}
			}
			write(t, f, bad)
			within("open", func() error { _, err := Open(f, limit, nil); return err })
			write(t, f, good)
			k, err := Open(f, limit, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			write(t, f, bad)
			within("check", func() error { k.Check(); _, err := k.Check(); return err }) // the first lets it settle
			within("reload", k.Reload)
		})
	}
}

// Without /proc the copy cannot be read by its path: the start fails
// saying so, not only that a /proc/self/fd path does not exist.
func TestNoProc(t *testing.T) {
	f := filepath.Join(t.TempDir(), "web.yml")
	write(t, f, "basic_auth_users: {}\n")
	old := fdDir
	fdDir = filepath.Join(t.TempDir(), "no-proc") + "/"
	defer func() { fdDir = old }()
	k, err := Open(f, limit, nil)
	if err == nil {
		k.Close()
		t.Fatal("opened without /proc")
	}
	if !strings.Contains(err.Error(), "is /proc mounted?") {
		t.Errorf("%v, want it to say /proc is needed", err)
	}
}

// Where the system refuses memfd_create itself (a seccomp profile, an old
// kernel), the start goes on as outside Linux, saying so: exporter-toolkit
// reads the file, a reload still validates and reports, saying the
// invalid edit is in use (before, its error implied the last good was
// kept). Another failure of the call is the copy's own and fails the
// start, naming it.
func TestMemfdRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		fallback bool
		cause    string // what the warning says of it
	}{
		{"seccomp EPERM", unix.EPERM, true, "seccomp"},
		{"seccomp or old kernel ENOSYS", unix.ENOSYS, true, "kernel before 3.17"},
		{"security policy EACCES", unix.EACCES, true, "a security module's policy, such as SELinux's or AppArmor's)"},
		{"out of descriptors", unix.EMFILE, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := memfdCreate
			memfdCreate = func(string, int) (int, error) { return -1, tc.err }
			defer func() { memfdCreate = old }()
			dir := t.TempDir()
			testutil.WriteSelfSigned(t, dir) // expires 9999-01-01
			at := func(y int) time.Time { return time.Date(y, 3, 1, 12, 0, 0, 0, time.UTC) }
			ca, _ := testutil.SelfSignedPEM(t, at(2033), true)
			write(t, filepath.Join(dir, "ca.crt"), string(ca))
			f := filepath.Join(dir, "web.yml")
			tlsPart := "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n" +
				"  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n"
			write(t, f, tlsPart+"basic_auth_users:\n  prom: "+hash(t, "s3cret")+"\n")
			var warned []string
			k, err := Open(f, limit, func(msg string) { warned = append(warned, msg) })
			if !tc.fallback {
				if err == nil {
					k.Close()
					t.Fatal("opened without a copy")
				}
				if !strings.Contains(err.Error(), "memfd_create") || !strings.Contains(err.Error(), tc.err.Error()) {
					t.Errorf("%v, want memfd_create's error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer k.Close()
			if k.Path() != f {
				t.Errorf("exporter-toolkit is given %s, want the file %s", k.Path(), f)
			}
			if len(warned) != 1 || !strings.Contains(warned[0], "memfd_create: "+tc.err.Error()) || !strings.Contains(warned[0], "no longer kept from use") {
				t.Errorf("warned %q, want one warning naming memfd_create's refusal and what it costs", warned)
			} else if !strings.Contains(warned[0], tc.cause) || tc.err != unix.EPERM && strings.Contains(warned[0], "seccomp profile that does not allow") || strings.Contains(warned[0], "memfd_noexec") {
				t.Errorf("warned %q, want it to name the cause %q, and no seccomp profile refusing the call, nor vm.memfd_noexec (which the flag passed satisfies)", warned[0], tc.cause)
			}
			// exporter-toolkit reads the file as it is: a reload of an
			// invalid edit says that edit is in use, not that the last
			// good one is kept.
			for _, e := range []struct{ edit, want string }{
				{tlsPart + "basic_auth_users:\n  prom: nohash\n", "hash"},
				{"basic_auth_users: {}\n", "TLS off"},
			} {
				write(t, f, e.edit)
				err := k.Reload()
				if err == nil || !strings.Contains(err.Error(), f) || !strings.Contains(err.Error(), e.want) || !strings.Contains(err.Error(), "the invalid edit is in use") {
					t.Errorf("reload of %q: %v, want an error naming %s and %q, and saying the edit is in use", e.edit, err, f, e.want)
				}
			}
			// The expiry is that of the files exporter-toolkit reads (before,
			// it was not served for a certificate in a file): a valid
			// renewal moves it.
			expiry := func(when string, server, clientCA time.Time) {
				t.Helper()
				if err := promtestutil.CollectAndCompare(k.Collector(), strings.NewReader(wantExpiry(server.Unix(), clientCA.Unix())),
					"vgpu_web_config_certificate_expiry_timestamp_seconds"); err != nil {
					t.Errorf("%s: %v", when, err)
				}
			}
			expiry("at start", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), at(2033))
			ca, _ = testutil.SelfSignedPEM(t, at(2034), true)
			write(t, filepath.Join(dir, "ca.crt"), string(ca))
			write(t, f, tlsPart+"basic_auth_users:\n  prom: "+hash(t, "n3w")+"\n")
			if err := k.Reload(); err != nil {
				t.Errorf("reload of a good edit: %v", err)
			}
			expiry("after a renewal of the client CA", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), at(2034))
			if k.Path() != f || k.InMemory() {
				t.Errorf("after the reloads exporter-toolkit is given %s (in memory: %v), want %s", k.Path(), k.InMemory(), f)
			}
		})
	}
}

// The copies are made with MFD_NOEXEC_SEAL where the kernel knows it:
// with vm.memfd_noexec=2 (Linux 6.3 on) a call without it is refused,
// EACCES, and the start fell back to exporter-toolkit reading the files.
// A kernel before 6.3 answers the flag EINVAL: the call goes again
// without it.
func TestMemfdNoexecSeal(t *testing.T) {
	for _, tc := range []struct {
		name string
		// with and without are the errors of a call with the flag and of
		// one without it; nil: the call is made.
		with, without error
	}{
		{"vm.memfd_noexec=2", nil, unix.EACCES},
		{"kernel before 6.3", unix.EINVAL, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := memfdCreate
			memfdCreate = func(name string, flags int) (int, error) {
				err := tc.without
				if flags&unix.MFD_NOEXEC_SEAL != 0 {
					err = tc.with
				}
				if err != nil {
					return -1, err
				}
				// Made without the flag, which the kernel running the
				// test may not know.
				return old(name, flags&^unix.MFD_NOEXEC_SEAL)
			}
			defer func() { memfdCreate = old }()
			dir := t.TempDir()
			testutil.WriteSelfSigned(t, dir)
			f := filepath.Join(dir, "web.yml")
			write(t, f, "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n")
			var warned []string
			k, err := Open(f, limit, func(msg string) { warned = append(warned, msg) })
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer k.Close()
			if k.Path() == f || !k.InMemory() || len(warned) != 0 {
				t.Errorf("exporter-toolkit is given %s (in memory: %v), warned %q; want a private copy, no warning", k.Path(), k.InMemory(), warned)
			}
		})
	}
}
