package webconf

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// writeCA writes a CA certificate as ca.crt in dir and returns a client
// certificate it signed.
func writeCA(t *testing.T, dir string) tls.Certificate {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		NotBefore: time.Unix(0, 0), NotAfter: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "ca.crt"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	client := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "prometheus"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotBefore:   time.Unix(0, 0), NotAfter: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	der, err := x509.CreateCertificate(rand.Reader, client, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serveTLS serves k's copy with exporter-toolkit, as the exporter does,
// and returns a function making one request over a new connection with
// client's certificate: the server's certificate (DER), or the error.
func serveTLS(t *testing.T, k *Kept, client tls.Certificate) func() ([]byte, error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		ErrorLog: log.New(io.Discard, "", 0), // the handshakes refused
	}
	path, socket := k.Path(), false
	flags := &web.FlagConfig{WebListenAddresses: &[]string{}, WebSystemdSocket: &socket, WebConfigFile: &path}
	go web.Serve(l, srv, flags, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { srv.Close() })
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true, // a handshake each
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{client}},
	}}
	t.Cleanup(c.CloseIdleConnections)
	return func() ([]byte, error) {
		resp, err := c.Get("https://" + l.Addr().String() + "/")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if _, err := io.ReadAll(resp.Body); err != nil {
			return nil, err
		}
		return resp.TLS.PeerCertificates[0].Raw, nil
	}
}

// The certificate, key and client CA files the configuration names are
// kept as it is: a renewal that writes a bad one, a key not matching the
// certificate, or removes one, is refused once, naming the file, and
// handshakes go on with the certificate (and client CA) in use; a valid
// one is served once two checks find it alike, and not before. Before,
// exporter-toolkit read them at each handshake: every handshake failed
// until they were mended (and a garbage client CA was taken without a
// word, verifying no client), and a renewal caught half written was
// served.
func TestTLSFilesKeptLastGood(t *testing.T) {
	garbage := func(name string) func(*testing.T, string) {
		return func(t *testing.T, dir string) {
			testutil.ReplaceFile(t, filepath.Join(dir, name), []byte("not PEM\n"))
		}
	}
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, dir string)
		want string // the error's (with DIR for the directory); "" when the renewal is valid
	}{
		{"certificate replaced by garbage", garbage("tls.crt"), "cert_file DIR/tls.crt and key_file DIR/tls.key do not load"},
		{"key replaced by garbage", garbage("tls.key"), "cert_file DIR/tls.crt and key_file DIR/tls.key do not load"},
		{"certificate removed", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "tls.crt")) }, "cert_file: stat DIR/tls.crt: no such file"},
		{"certificate renewed, not its key", func(t *testing.T, dir string) {
			key, err := os.ReadFile(filepath.Join(dir, "tls.key"))
			if err != nil {
				t.Fatal(err)
			}
			testutil.WriteSelfSigned(t, dir)
			testutil.ReplaceFile(t, filepath.Join(dir, "tls.key"), key)
		}, "private key does not match public key"},
		{"client CA replaced by garbage", garbage("ca.crt"), "client_ca_file DIR/ca.crt: no PEM certificate"},
		{"client CA cut short", func(t *testing.T, dir string) {
			ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
			if err != nil {
				t.Fatal(err)
			}
			testutil.ReplaceFile(t, filepath.Join(dir, "ca.crt"), append(ca, ca[:len(ca)/2]...))
		}, "client_ca_file DIR/ca.crt: PEM block 2 does not decode"},
		{"client CA with PEM headers", func(t *testing.T, dir string) {
			ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := pem.Decode(ca)
			b.Headers = map[string]string{"Proc-Type": "4,ENCRYPTED"}
			testutil.ReplaceFile(t, filepath.Join(dir, "ca.crt"), pem.EncodeToMemory(b))
		}, "client_ca_file DIR/ca.crt: no PEM certificate in it that parses (PEM block 1 skipped: a CERTIFICATE with PEM headers)"},
		{"client CA holding a key", func(t *testing.T, dir string) {
			testutil.ReplaceFile(t, filepath.Join(dir, "ca.crt"), []byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"))
		}, `client_ca_file DIR/ca.crt: no PEM certificate in it that parses (PEM block 1 skipped: a "EC PRIVATE KEY", not a CERTIFICATE)`},
		{"certificate and key renewed", func(t *testing.T, dir string) {
			// As cert-manager writes a Secret: each file renamed over.
			tmp := t.TempDir()
			testutil.WriteSelfSigned(t, tmp)
			for _, f := range []string{"tls.crt", "tls.key"} {
				b, err := os.ReadFile(filepath.Join(tmp, f))
				if err != nil {
					t.Fatal(err)
				}
				testutil.ReplaceFile(t, filepath.Join(dir, f), b)
			}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			old := testutil.WriteSelfSigned(t, dir)
			client := writeCA(t, dir)
			f := filepath.Join(dir, "web.yml")
			write(t, f, "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"+
				"  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n")
			k, err := Open(f, limit, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { k.Close() })
			get := serveTLS(t, k, client)
			servedCert := func(when string, want []byte) {
				t.Helper()
				got, err := get()
				if err != nil {
					t.Fatalf("%s: a handshake failed: %v", when, err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s: served a certificate other than the one in use", when)
				}
			}
			servedCert("before", old)
			tc.edit(t, dir)
			if changed, err := k.Check(); changed || err != nil { // a change settles for one check
				t.Fatalf("the first check: changed %v, %v; want it left to settle", changed, err)
			}
			servedCert("after the first check", old)
			changed, err := k.Check()
			if !changed {
				t.Fatal("the second check found no change")
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("a valid renewal refused: %v", err)
				}
				crt, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := pem.Decode(crt)
				servedCert("after the second check", b.Bytes)
				return
			}
			want := strings.ReplaceAll(tc.want, "DIR", dir)
			if err == nil || !strings.Contains(err.Error(), f) || !strings.Contains(err.Error(), want) {
				t.Errorf("the second check: %v, want an error naming %s and %q", err, f, want)
			}
			if err != nil && strings.Contains(err.Error(), "PRIVATE KEY-----") {
				t.Errorf("the error shows key material: %v", err)
			}
			if n := k.failures.Load(); n != 1 || !k.lastFailed.Load() {
				t.Errorf("%d failures counted (last failed: %v), want 1", n, k.lastFailed.Load())
			}
			servedCert("after the second check", old)
			if changed, err := k.Check(); changed || err != nil {
				t.Errorf("a check finding it still so: changed %v, %v; want nothing reported again", changed, err)
			}
			servedCert("after the third check", old)
			err = k.Reload()
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("a reload: %v, want an error naming %q", err, want)
			}
			servedCert("after a reload", old)
		})
	}
}

// certCopy is the path of the certificate's copy that k's copy names.
func certCopy(t *testing.T, k *Kept) string {
	t.Helper()
	for line := range strings.Lines(served(t, k)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "cert_file: "); ok {
			return p
		}
	}
	t.Fatalf("the copy names no cert_file:\n%s", served(t, k))
	return ""
}

// The copies of a certificate, key and client CA replaced by a renewal
// stay open for one more renewal (a handshake under way that read the
// configuration before may read them still) and are closed at the next:
// renewals do not pile up descriptors. A reload finding them as they are
// keeps their copies.
func TestTLSCopiesReplaced(t *testing.T) {
	dir := t.TempDir()
	testutil.WriteSelfSigned(t, dir)
	writeCA(t, dir)
	f := filepath.Join(dir, "web.yml")
	write(t, f, "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"+
		"  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n")
	k, err := Open(f, limit, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	first := certCopy(t, k)
	if err := k.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := certCopy(t, k); got != first {
		t.Errorf("a reload of files unchanged made new copies (%s, was %s)", got, first)
	}
	openFDs := func() int {
		t.Helper()
		es, err := os.ReadDir(fdDir)
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	renew := func() {
		t.Helper()
		testutil.WriteSelfSigned(t, dir)
		if err := k.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	renew()
	if _, err := os.ReadFile(first); err != nil {
		t.Errorf("the copy replaced by the last renewal is closed already: %v", err)
	}
	renew()
	if _, err := os.ReadFile(first); err == nil {
		t.Errorf("the copy replaced two renewals ago is still open (%s)", first)
	}
	fds := openFDs()
	for range 5 {
		renew()
	}
	if n := openFDs(); n != fds {
		t.Errorf("%d descriptors open after 5 more renewals, %d before", n, fds)
	}
	k.Close()
	if n := openFDs(); n != fds-7 { // the configuration, and two sets of cert, key and CA
		t.Errorf("%d descriptors open once closed, want %d", n, fds-7)
	}
}
