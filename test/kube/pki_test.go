//go:build kube

package kube

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the cluster's certificate authority and the files it issued,
// under dir.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  crypto.Signer
	serial int64
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "vgpu-kube-test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, caCert: ca, caKey: key, serial: 1}
	if err := writePEM(p.path("ca.crt"), "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return p, p.writeKey("ca.key", key)
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func (p *pki) writeKey(name string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(p.path(name), "PRIVATE KEY", der)
}

// keyPair is a certificate the CA issued and its key (name.crt, name.key).
type keyPair struct{ cert, key string }

// issue writes name.crt and name.key: a client certificate for cn in the
// groups orgs, or a serving one when hosts (IP addresses or DNS names) are
// given.
func (p *pki) issue(name, cn string, orgs []string, hosts ...string) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(hosts) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return keyPair{}, err
	}
	kp := keyPair{cert: p.path(name + ".crt"), key: p.path(name + ".key")}
	if err := writePEM(kp.cert, "CERTIFICATE", der); err != nil {
		return keyPair{}, err
	}
	return kp, p.writeKey(name+".key", key)
}

// signingKey writes a key pair for service account tokens (name.key,
// name.pub).
func (p *pki) signingKey(name string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	if err := writePEM(p.path(name+".pub"), "PUBLIC KEY", pub); err != nil {
		return err
	}
	return p.writeKey(name+".key", key)
}

// kubeconfig writes name.kubeconfig: the API server at server, as the
// holder of kp.
func (p *pki) kubeconfig(name, server string, kp keyPair) (string, error) {
	path := p.path(name + ".kubeconfig")
	user := fmt.Sprintf("{client-certificate: %q, client-key: %q}", kp.cert, kp.key)
	return path, writeKubeconfig(path, server, p.path("ca.crt"), name, user)
}

// writeKubeconfig writes a kubeconfig of one context: the API server at
// server, whose certificate ca signs, as user name with the credentials
// user (a YAML flow mapping).
func writeKubeconfig(path, server, ca, name, user string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, certificate-authority: %q}
users:
- name: %s
  user: %s
contexts:
- name: test
  context: {cluster: test, user: %s}
current-context: test
`, server, ca, name, user, name)
	return os.WriteFile(path, []byte(cfg), 0o600)
}
