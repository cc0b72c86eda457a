package webconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// crlPEM is a certificate revocation list, as a CA bundle may hold beside
// its certificate.
func crlPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	issuer := &x509.Certificate{SerialNumber: big.NewInt(9), Subject: pkix.Name{CommonName: "CRL issuer"},
		KeyUsage: x509.KeyUsageCRLSign, SubjectKeyId: []byte{1, 2, 3, 4}, NotBefore: time.Unix(0, 0), NotAfter: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1),
		ThisUpdate: time.Unix(0, 0), NextUpdate: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}, issuer, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})
}

// warnings records what a Kept warns of.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) warn(msg string) { w.mu.Lock(); w.msgs = append(w.msgs, msg); w.mu.Unlock() }

// take returns the warnings so far and forgets them.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// A client CA bundle holding, beside its certificate, a block that
// exporter-toolkit skips (a CRL, a TRUSTED CERTIFICATE, a certificate Go
// does not parse, one with PEM headers) is taken as exporter-toolkit takes
// it: the exporter starts and verifies the clients its certificate signed,
// and each block skipped is warned of once, naming the file and the block,
// when the bundle is put in use (at the start, or by a check), not at each
// check or reload that finds it as it was. Before, the start was refused.
func TestClientCABundleSkipsWhatToolkitSkips(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra func(t *testing.T) []byte
		want  string // the warning, with DIR for the directory
	}{
		{"an X509 CRL", crlPEM, `client_ca_file DIR/ca.crt: PEM block 2 skipped: a "X509 CRL", not a CERTIFICATE`},
		{"a TRUSTED CERTIFICATE", func(*testing.T) []byte {
			return pem.EncodeToMemory(&pem.Block{Type: "TRUSTED CERTIFICATE", Bytes: []byte{0x30, 0}})
		}, `client_ca_file DIR/ca.crt: PEM block 2 skipped: a "TRUSTED CERTIFICATE", not a CERTIFICATE`},
		{"a certificate Go does not parse", func(*testing.T) []byte {
			return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{0, 0, 0}})
		}, `client_ca_file DIR/ca.crt: PEM block 2 skipped: a CERTIFICATE that does not parse (x509: malformed certificate)`},
		{"a certificate with PEM headers", func(t *testing.T) []byte {
			c, _ := testutil.SelfSignedPEM(t, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), true)
			b, _ := pem.Decode(c)
			b.Headers = map[string]string{"Proc-Type": "4,ENCRYPTED"}
			return pem.EncodeToMemory(b)
		}, `client_ca_file DIR/ca.crt: PEM block 2 skipped: a CERTIFICATE with PEM headers`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, when := range []string{"at the start", "by a check"} {
				t.Run(when, func(t *testing.T) {
					dir := t.TempDir()
					testutil.WriteSelfSigned(t, dir)
					client := writeCA(t, dir)
					ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
					if err != nil {
						t.Fatal(err)
					}
					bundle := append(ca, tc.extra(t)...)
					if when == "at the start" {
						write(t, filepath.Join(dir, "ca.crt"), string(bundle))
					}
					f := filepath.Join(dir, "web.yml")
					write(t, f, "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"+
						"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n")
					var w warnings
					k, err := Open(f, limit, w.warn)
					if err != nil {
						t.Fatalf("the start refused: %v", err)
					}
					t.Cleanup(func() { k.Close() })
					if when == "by a check" {
						if got := w.take(); len(got) != 0 {
							t.Errorf("warnings of a bundle with nothing skipped: %q", got)
						}
						write(t, filepath.Join(dir, "ca.crt"), string(bundle))
						k.Check()
						if changed, err := k.Check(); !changed || err != nil {
							t.Fatalf("the second check: changed %v, %v; want the bundle in use", changed, err)
						}
					}
					if got, want := w.take(), []string{strings.ReplaceAll(tc.want, "DIR", dir) + " (exporter-toolkit skips such blocks too; none verifies a client)"}; !slices.Equal(got, want) {
						t.Errorf("warnings %q, want %q", got, want)
					}
					if _, err := serveTLS(t, k, client)(); err != nil {
						t.Errorf("a client whose certificate the bundle's CA signed: %v", err)
					}
					if _, err := serveTLS(t, k, tls.Certificate{})(); err == nil {
						t.Error("a client without a certificate was served")
					}
					// Found as it is: not warned of again.
					k.Check()
					k.Check()
					if err := k.Reload(); err != nil {
						t.Fatal(err)
					}
					if got := w.take(); len(got) != 0 {
						t.Errorf("warned again of a bundle in use already: %q", got)
					}
				})
			}
		})
	}
}

// A client CA file from which no certificate is taken (garbage, a CRL
// alone) or with a block cut short (a truncated renewal) is still refused
// at the start and at a reload, naming the file.
func TestClientCABundleRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		ca   func(t *testing.T, ca []byte) []byte
		want string
	}{
		{"garbage", func(*testing.T, []byte) []byte { return []byte("not PEM\n") }, "client_ca_file DIR/ca.crt: no PEM certificate in it that parses"},
		{"a CRL alone", func(t *testing.T, _ []byte) []byte { return crlPEM(t) },
			`client_ca_file DIR/ca.crt: no PEM certificate in it that parses (PEM block 1 skipped: a "X509 CRL", not a CERTIFICATE)`},
		{"cut short", func(t *testing.T, ca []byte) []byte { return append(crlPEM(t), ca[:len(ca)/2]...) },
			"client_ca_file DIR/ca.crt: PEM block 2 does not decode (cut short?)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			testutil.WriteSelfSigned(t, dir)
			writeCA(t, dir)
			path := filepath.Join(dir, "ca.crt")
			good, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(dir, "web.yml")
			write(t, f, "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"+
				"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n")
			want := strings.ReplaceAll(tc.want, "DIR", dir)
			write(t, path, string(tc.ca(t, good)))
			if _, err := Open(f, limit, nil); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("the start: %v, want an error naming %q", err, want)
			}
			write(t, path, string(good))
			k, err := Open(f, limit, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			write(t, path, string(tc.ca(t, good)))
			if err := k.Reload(); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("a reload: %v, want an error naming %q", err, want)
			}
		})
	}
}

// A bundle of many blocks skipped is warned of in a bounded number of
// lines: the first maxSkippedNamed by name, then their number.
func TestClientCABundleSkippedBounded(t *testing.T) {
	dir := t.TempDir()
	testutil.WriteSelfSigned(t, dir)
	writeCA(t, dir)
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "ca.crt"), string(ca)+strings.Repeat(string(crlPEM(t)), 1000))
	f := filepath.Join(dir, "web.yml")
	write(t, f, "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"+
		"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n")
	var w warnings
	k, err := Open(f, limit, w.warn)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	got := w.take()
	if len(got) != maxSkippedNamed+1 || !strings.Contains(got[0], "PEM block 2 skipped") ||
		!strings.HasSuffix(got[len(got)-1], "990 more PEM blocks skipped (exporter-toolkit skips such blocks too; none verifies a client)") {
		t.Errorf("%d warnings, want %d, the last giving the number of the others: %q", len(got), maxSkippedNamed+1, got)
	}
}
