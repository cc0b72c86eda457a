package webconf

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
)

// FuzzParseCAs: whatever a client CA file holds, parseCAs does not panic;
// it accepts exactly the files from which exporter-toolkit's pool
// (AppendCertsFromPEM) takes a certificate and in which no PEM block is
// cut short, and then names each block the pool skips (a block not a
// CERTIFICATE, one with PEM headers, one that does not parse): none
// skipped without a word.
func FuzzParseCAs(f *testing.F) {
	for _, seed := range []string{
		"",
		"not PEM\n",
		"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
		"-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\n\nAAAA\n-----END CERTIFICATE-----\n",
		"-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n",
		strings.Repeat("-----BEGIN X-----\n-----END X-----\n", 12) + "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
		"subject=CN\n-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n-----BEGIN CERT",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		skipped, err := parseCAs(data)
		pool := x509.NewCertPool()
		takes := pool.AppendCertsFromPEM(data)
		want := x509.NewCertPool()
		blocks, taken := 0, 0
		rest := data
		for ; ; blocks++ {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			if b.Type != "CERTIFICATE" || len(b.Headers) > 0 {
				continue
			}
			if c, err := x509.ParseCertificate(b.Bytes); err == nil {
				want.AddCert(c)
				taken++
			}
		}
		cutShort := bytes.Contains(rest, []byte("-----BEGIN"))
		if accept := takes && !cutShort; (err == nil) != accept {
			t.Fatalf("parseCAs: %v; the pool takes a certificate: %v, a block cut short: %v", err, takes, cutShort)
		}
		if err != nil {
			return
		}
		if !pool.Equal(want) {
			t.Errorf("accepted, but the pool holds other certificates than the %d blocks taken", taken)
		}
		named := len(skipped)
		if n := blocks - taken; n > maxSkippedNamed {
			want := fmt.Sprintf("%d more PEM blocks skipped", n-maxSkippedNamed)
			if named != maxSkippedNamed+1 || skipped[named-1] != want {
				t.Errorf("%d of %d blocks taken, but %d named as skipped: %q; want %d and %q", taken, blocks, named, skipped, maxSkippedNamed, want)
			}
		} else if named != n {
			t.Errorf("%d of %d blocks taken, but %d named as skipped: %q", taken, blocks, named, skipped)
		}
	})
}
