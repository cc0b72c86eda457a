package webconf

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
)

// FuzzParseCAs: whatever a client CA file holds, parseCAs does not panic,
// and a file it accepts gives exporter-toolkit's pool (AppendCertsFromPEM)
// each of its PEM blocks as a certificate: none skipped without a word.
func FuzzParseCAs(f *testing.F) {
	for _, seed := range []string{
		"",
		"not PEM\n",
		"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
		"-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\n\nAAAA\n-----END CERTIFICATE-----\n",
		"subject=CN\n-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n-----BEGIN CERT",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if parseCAs(data) != nil {
			return
		}
		want := x509.NewCertPool()
		blocks := 0
		for rest := data; ; blocks++ {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				t.Fatalf("accepted, but block %d does not parse: %v", blocks+1, err)
			}
			want.AddCert(c)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) || blocks == 0 || !pool.Equal(want) {
			t.Errorf("accepted, but the pool does not take each of its %d blocks", blocks)
		}
	})
}
