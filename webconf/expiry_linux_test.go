package webconf

import (
	"encoding/pem"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	vtestutil "github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// wantExpiry is the exposition of the expiry series at server and
// clientCA (Unix seconds; 0 leaves it out).
func wantExpiry(server, clientCA int64) string {
	s := `# HELP vgpu_web_config_certificate_expiry_timestamp_seconds Unix time at which a certificate of the web configuration in use expires (its NotAfter): certificate="server" the one served, certificate="client_ca" the earliest of the client CA's. Absent without TLS. A refused renewal leaves the old certificate, and its expiry, in use; where exporter-toolkit reads the files itself (memfd_create refused, outside Linux), it reads the renewal all the same, and this is of the files as the last valid reload read them.
# TYPE vgpu_web_config_certificate_expiry_timestamp_seconds gauge
`
	if clientCA != 0 {
		s += fmt.Sprintf("vgpu_web_config_certificate_expiry_timestamp_seconds{certificate=\"client_ca\"} %d\n", clientCA)
	}
	if server != 0 {
		s += fmt.Sprintf("vgpu_web_config_certificate_expiry_timestamp_seconds{certificate=\"server\"} %d\n", server)
	}
	return s
}

// The expiry of the certificates in use is served, read from the copies
// kept: a renewal refused leaves the old expiry, as it leaves the old
// certificate serving; a valid one moves it. The client CA's is its
// earliest certificate's. Before, nothing said when the certificate in
// use expired.
func TestCertificateExpiry(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "web.yml")
	at := func(y int) time.Time { return time.Date(y, 3, 1, 12, 0, 0, 0, time.UTC) }
	cert, key := vtestutil.SelfSignedPEM(t, at(2030), false)
	write(t, filepath.Join(dir, "tls.crt"), string(cert))
	write(t, filepath.Join(dir, "tls.key"), string(key))
	ca1, _ := vtestutil.SelfSignedPEM(t, at(2035), true)
	ca2, _ := vtestutil.SelfSignedPEM(t, at(2033), true)
	write(t, filepath.Join(dir, "ca.crt"), string(ca1)+string(ca2))
	write(t, f, "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"+
		"  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n")
	k, err := Open(f, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	check := func(when string, server, clientCA time.Time) {
		t.Helper()
		if err := testutil.CollectAndCompare(k.Collector(), strings.NewReader(wantExpiry(server.Unix(), clientCA.Unix())),
			"vgpu_web_config_certificate_expiry_timestamp_seconds"); err != nil {
			t.Errorf("%s: %v", when, err)
		}
	}
	check("at start", at(2030), at(2033))

	// A renewal of the certificate without its key is refused.
	renewed, _ := vtestutil.SelfSignedPEM(t, at(2031), false)
	write(t, filepath.Join(dir, "tls.crt"), string(renewed))
	if err := k.Reload(); err == nil {
		t.Fatal("a certificate not matching its key was taken")
	}
	check("after a refused renewal", at(2030), at(2033))

	// A valid renewal of both, and of the client CA, moves them.
	cert, key = vtestutil.SelfSignedPEM(t, at(2032), false)
	write(t, filepath.Join(dir, "tls.crt"), string(cert))
	write(t, filepath.Join(dir, "tls.key"), string(key))
	write(t, filepath.Join(dir, "ca.crt"), string(ca1))
	if err := k.Reload(); err != nil {
		t.Fatal(err)
	}
	check("after a valid renewal", at(2032), at(2035))

	// A certificate of the client CA that exporter-toolkit skips (one
	// with PEM headers) verifies no client: its expiry is not the CA's.
	skipped, _ := vtestutil.SelfSignedPEM(t, at(2031), true)
	b, _ := pem.Decode(skipped)
	b.Headers = map[string]string{"Proc-Type": "4,ENCRYPTED"}
	write(t, filepath.Join(dir, "ca.crt"), string(ca1)+string(pem.EncodeToMemory(b)))
	if err := k.Reload(); err != nil {
		t.Fatal(err)
	}
	check("with a certificate skipped", at(2032), at(2035))
}

// Certificates written in the configuration itself (cert, client_ca) are
// read as the files are.
func TestCertificateExpiryInline(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "web.yml")
	at := time.Date(2029, 7, 4, 0, 0, 0, 0, time.UTC)
	cert, key := vtestutil.SelfSignedPEM(t, at, false)
	indent := func(b []byte) string {
		return "    " + strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", "\n    ") + "\n"
	}
	write(t, f, "tls_server_config:\n  cert: |\n"+indent(cert)+"  key: |\n"+indent(key))
	k, err := Open(f, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := testutil.CollectAndCompare(k.Collector(), strings.NewReader(wantExpiry(at.Unix(), 0)),
		"vgpu_web_config_certificate_expiry_timestamp_seconds"); err != nil {
		t.Error(err)
	}
}
