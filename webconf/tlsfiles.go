package webconf

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
)

// tlsCopies are the private copies of the certificate, key and client CA
// files the configuration in use names, as they were when it was put in
// use: its copy names them in their stead, so a renewal that writes a bad
// certificate or key, or removes them, fails no handshake; it is refused
// as a bad edit of the configuration is.
type tlsCopies struct {
	// sum is that of the files' contents, each with its key: a reload
	// finding them as they are copied keeps these copies.
	sum    [sha256.Size]byte
	paths  map[string]string // the copy of each key's file
	copies []*memCopy
	expiry notAfter // of the certificates they (or the configuration) hold
}

// close releases the copies; nil does nothing.
func (c *tlsCopies) close() {
	if c == nil {
		return
	}
	for _, m := range c.copies {
		m.close()
	}
}

// copyTLSFiles reads the certificate, key and client CA files tc names
// (its paths joined to the configuration's directory), each once,
// validates what it read as exporter-toolkit will use it (the
// certificate and key as a pair, the client CA as PEM certificates), and
// returns copies of it: reuse itself when the files are as it holds them.
// nil when tc names none. Errors name the key and the file, never their
// content.
func copyTLSFiles(tc *web.TLSConfig, limit int64, reuse *tlsCopies) (*tlsCopies, error) {
	named := map[string]string{"cert_file": tc.TLSCertPath, "key_file": tc.TLSKeyPath, "client_ca_file": tc.ClientCAs}
	data := map[string][]byte{}
	h := sha256.New()
	for _, key := range tlsFileKeys {
		path := named[key]
		if path == "" {
			continue
		}
		b, err := fileread.Regular(path, limit)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		data[key] = b
		fmt.Fprintf(h, "%s %d\n", key, len(b))
		h.Write(b)
	}
	defer func() {
		for _, b := range data {
			clear(b) // the key's bytes are kept in its copy only
		}
	}()
	if len(data) == 0 {
		return nil, nil
	}
	if err := validateTLSFiles(tc, data); err != nil {
		return nil, err
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	if reuse != nil && reuse.sum == sum {
		return reuse, nil
	}
	c := &tlsCopies{sum: sum, paths: map[string]string{}, expiry: expiryOf(tc, data)}
	for _, key := range tlsFileKeys {
		b, ok := data[key]
		if !ok {
			continue
		}
		m, err := newMemCopy(key, b)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("copying %s %s: %w", key, named[key], err)
		}
		c.copies = append(c.copies, m)
		c.paths[key] = m.path()
	}
	return c, nil
}

// pathMap is where each key's file is copied; nil for nil.
func (c *tlsCopies) pathMap() map[string]string {
	if c == nil {
		return nil
	}
	return c.paths
}

// tlsFileKeys are the keys of tls_server_config that name files, in the
// order they are read.
var tlsFileKeys = []string{"cert_file", "key_file", "client_ca_file"}

// validateTLSFiles checks the files' contents (data, by key) as
// exporter-toolkit reads them: the certificate with the key as a pair
// (either may be given in the configuration itself), the client CA as
// PEM certificates. exporter-toolkit skips what it cannot parse of a
// client CA file: a garbage one would verify no client, a truncated one
// fewer, and neither would be reported.
func validateTLSFiles(tc *web.TLSConfig, data map[string][]byte) error {
	cert, certFile := data["cert_file"], data["cert_file"] != nil
	if !certFile {
		cert = []byte(tc.TLSCert)
	}
	key, keyFile := data["key_file"], data["key_file"] != nil
	if !keyFile {
		key = []byte(tc.TLSKey)
	}
	if (certFile || keyFile) && len(cert) > 0 && len(key) > 0 {
		if _, err := tls.X509KeyPair(cert, key); err != nil {
			return fmt.Errorf("%s do not load as a certificate and its key: %w", pairName(tc, certFile, keyFile), err)
		}
	}
	if ca, ok := data["client_ca_file"]; ok {
		if err := parseCAs(ca); err != nil {
			return fmt.Errorf("client_ca_file %s: %w", tc.ClientCAs, err)
		}
	}
	return nil
}

// pairName names the certificate and key's files, or the configuration
// where one of them is in it.
func pairName(tc *web.TLSConfig, certFile, keyFile bool) string {
	c, k := "cert (in the configuration)", "key (in the configuration)"
	if certFile {
		c = "cert_file " + tc.TLSCertPath
	}
	if keyFile {
		k = "key_file " + tc.TLSKeyPath
	}
	return c + " and " + k
}

// parseCAs checks that data holds PEM certificates, at least one, each
// of which exporter-toolkit's pool takes (a block of PEM headers it
// skips), and no block cut short.
func parseCAs(data []byte) error {
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			if bytes.Contains(rest, []byte("-----BEGIN")) {
				return fmt.Errorf("PEM block %d does not decode (cut short?)", n+1)
			}
			break
		}
		n++
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("PEM block %d is a %q, not a CERTIFICATE", n, b.Type)
		}
		if len(b.Headers) > 0 {
			return fmt.Errorf("PEM certificate %d has headers (it would be skipped)", n)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return fmt.Errorf("PEM certificate %d: %w", n, err)
		}
	}
	if n == 0 {
		return errNoCA
	}
	return nil
}

var errNoCA = errors.New("no PEM certificate in it")
