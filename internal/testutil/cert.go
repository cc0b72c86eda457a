package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// WriteSelfSigned writes a new self-signed certificate for localhost (a
// random serial, valid from 1970 to 9999) and its key to dir as tls.crt
// and tls.key, and returns the certificate (DER).
func WriteSelfSigned(t testing.TB, dir string) []byte {
	t.Helper()
	der, kder := selfSigned(t, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), false)
	for name, b := range map[string]*pem.Block{"tls.crt": {Type: "CERTIFICATE", Bytes: der}, "tls.key": {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return der
}

// SelfSignedPEM makes a new self-signed certificate for localhost (a
// random serial, valid from 1970 to notAfter; a CA when ca) and returns
// it and its key, as PEM.
func SelfSignedPEM(t testing.TB, notAfter time.Time, ca bool) (cert, key []byte) {
	t.Helper()
	der, kder := selfSigned(t, notAfter, ca)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// selfSigned makes the certificate of SelfSignedPEM and returns it and
// its key (DER).
func selfSigned(t testing.TB, notAfter time.Time, ca bool) (der, kder []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: time.Unix(0, 0), NotAfter: notAfter,
		IsCA: ca, BasicConstraintsValid: ca}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err = x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return der, kder
}
