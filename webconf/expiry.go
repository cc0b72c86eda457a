package webconf

import (
	"crypto/x509"
	"encoding/pem"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
)

// notAfter is when the certificates of a configuration expire: server,
// the leaf it serves (the first certificate of its cert_file or cert);
// clientCA, the earliest of its client CA's (client_ca_file or
// client_ca). Zero where it has none, or none that parses.
type notAfter struct{ server, clientCA time.Time }

// expiryOf reads tc's certificates from data, the files' contents by key
// (tlsFileKeys), or else from tc itself where it holds them; nil tc has
// none.
func expiryOf(tc *web.TLSConfig, data map[string][]byte) notAfter {
	if tc == nil {
		return notAfter{}
	}
	cert, ok := data["cert_file"]
	if !ok {
		cert = []byte(tc.TLSCert)
	}
	ca, ok := data["client_ca_file"]
	if !ok {
		ca = []byte(tc.ClientCAsText)
	}
	var n notAfter
	if certs := pemCerts(cert, false); len(certs) > 0 {
		n.server = certs[0].NotAfter
	}
	for _, c := range pemCerts(ca, true) {
		if n.clientCA.IsZero() || c.NotAfter.Before(n.clientCA) {
			n.clientCA = c.NotAfter
		}
	}
	return n
}

// pemCerts are the certificates data's PEM CERTIFICATE blocks hold, in
// order, those that do not parse left out, and, for a pool (a client CA,
// read as exporter-toolkit's x509.CertPool reads it), those with PEM
// headers too.
func pemCerts(data []byte, pool bool) []*x509.Certificate {
	var certs []*x509.Certificate
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return certs
		}
		if b.Type != "CERTIFICATE" || pool && len(b.Headers) > 0 {
			continue
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			certs = append(certs, c)
		}
	}
}

// readCertFiles reads the certificate and client CA files tc names (its
// paths joined to the configuration's directory), regular files of at
// most limit bytes, for expiryOf where exporter-toolkit reads them itself
// (there are no copies to read them from). One that cannot be read is
// left out, its expiry with it: exporter-toolkit fails on it too.
func readCertFiles(tc *web.TLSConfig, limit int64) map[string][]byte {
	data := map[string][]byte{}
	for key, path := range map[string]string{"cert_file": tc.TLSCertPath, "client_ca_file": tc.ClientCAs} {
		if path == "" {
			continue
		}
		if b, err := fileread.Regular(path, limit); err == nil {
			data[key] = b
		}
	}
	return data
}
