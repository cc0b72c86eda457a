package webconf

import (
	"bytes"
	"slices"
	"testing"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v3"
)

// FuzzResolve: whatever the file holds, resolve does not panic, and the
// copy it returns of a file that reads as a web configuration names the
// same files from any directory as the file does from its own: no
// relative path is left (a merge key, an alias, a list of merges),
// nothing else is made a path.
func FuzzResolve(f *testing.F) {
	for _, seed := range []string{
		"tls_server_config:\n  cert_file: tls.crt\n  key_file: /abs/tls.key\n",
		"tls_server_config:\n  <<: {cert_file: tls.crt, key_file: tls.key}\n",
		"tls_server_config:\n  <<: [{cert_file: a}, &m {key_file: b}]\n  client_ca_file: c\n",
		"tls_server_config:\n  cert_file: &c tls.crt\n  client_ca_file: *c\n",
		"tls_server_config:\n  client_ca_file: null\n  cert_file: ~\n",
		"tls_server_config: [\n",
		"basic_auth_users: {a: b}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		out, _, err := resolve(data, "/conf", nil)
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err != nil || dec.Decode(&web.Config{}) != nil {
			return // exporter-toolkit names the problem
		}
		want := tlsFiles(data, "/conf")
		if got := tlsFiles(out, "/elsewhere"); !slices.Equal(got, want) {
			t.Errorf("the copy names %q, the file %q\ncopy:\n%s", got, want, out)
		}
	})
}
