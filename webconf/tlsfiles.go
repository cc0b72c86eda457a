package webconf

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

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
	// skipped names each PEM block of the client CA file that
	// exporter-toolkit skips (parseCAs), with the file: warned of when
	// these copies are put in use.
	skipped []string
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
	// The bytes read here are cleared when done, whatever the outcome (a
	// failed read of a later file too), and that is all: the key is read
	// again, and not cleared, by digest from its file at every check, by
	// the pair's validation, and by exporter-toolkit from its copy at every
	// handshake.
	defer func() {
		for _, b := range data {
			clear(b)
		}
	}()
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
	if len(data) == 0 {
		return nil, nil
	}
	skipped, err := validateTLSFiles(tc, data)
	if err != nil {
		return nil, err
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	if reuse != nil && reuse.sum == sum {
		return reuse, nil
	}
	c := &tlsCopies{sum: sum, paths: map[string]string{}, expiry: expiryOf(tc, data), skipped: skipped}
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
// PEM certificates (parseCAs). skipped names, with the file, each block of
// the client CA that exporter-toolkit skips.
func validateTLSFiles(tc *web.TLSConfig, data map[string][]byte) (skipped []string, err error) {
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
			return nil, fmt.Errorf("%s do not load as a certificate and its key: %w", pairName(tc, certFile, keyFile), err)
		}
	}
	if ca, ok := data["client_ca_file"]; ok {
		s, err := parseCAs(ca)
		if err != nil {
			return nil, fmt.Errorf("client_ca_file %s: %w", tc.ClientCAs, err)
		}
		for _, b := range s {
			skipped = append(skipped, fmt.Sprintf("client_ca_file %s: %s (exporter-toolkit skips such blocks too; none verifies a client)", tc.ClientCAs, b))
		}
	}
	return skipped, nil
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

// parseCAs reads data, a client CA file, as exporter-toolkit's pool does
// (x509.CertPool.AppendCertsFromPEM): a PEM block that is not a
// CERTIFICATE (an X509 CRL, a TRUSTED CERTIFICATE), has PEM headers, or
// does not parse is skipped, and named in skipped, as "PEM block N
// skipped: why" (the first maxSkippedNamed, then their number: a file of
// a thousand is no thousand lines). It refuses data in which no certificate is taken (a
// garbage file verifies no client) or a block is cut short (a truncated
// renewal verifies fewer than it should), which the pool would take
// without a word.
func parseCAs(data []byte) (skipped []string, err error) {
	n, taken, more := 0, 0, 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			if bytes.Contains(rest, []byte("-----BEGIN")) {
				return nil, fmt.Errorf("PEM block %d does not decode (cut short?)", n+1)
			}
			break
		}
		n++
		why := ""
		switch {
		case b.Type != "CERTIFICATE":
			why = fmt.Sprintf("a %q, not a CERTIFICATE", b.Type)
		case len(b.Headers) > 0:
			why = "a CERTIFICATE with PEM headers"
		default:
			if _, err := x509.ParseCertificate(b.Bytes); err != nil {
				why = fmt.Sprintf("a CERTIFICATE that does not parse (%v)", err)
			}
		}
		switch {
		case why == "":
			taken++
		case len(skipped) < maxSkippedNamed:
			skipped = append(skipped, fmt.Sprintf("PEM block %d skipped: %s", n, why))
		default:
			more++
		}
	}
	if more > 0 {
		skipped = append(skipped, fmt.Sprintf("%d more PEM blocks skipped", more))
	}
	if taken == 0 {
		if len(skipped) > 0 {
			return nil, fmt.Errorf("%w (%s)", errNoCA, strings.Join(skipped, "; "))
		}
		return nil, errNoCA
	}
	return skipped, nil
}

var errNoCA = errors.New("no PEM certificate in it that parses")

// maxSkippedNamed bounds the skipped blocks parseCAs names one by one.
const maxSkippedNamed = 10
