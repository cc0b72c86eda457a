// Package webconf keeps the web configuration (exporter-toolkit's
// --web.config.file: TLS, basic auth, headers) last known good.
// exporter-toolkit reads the file it is given again for every request and
// TLS handshake, so a file edited into something invalid while the
// exporter runs would refuse every scrape. It is given instead a private
// copy, held in memory (a memfd read through /proc/self/fd: no writable
// directory is needed, nothing is left on disk), that is replaced only by
// a version of the file that validates, when a reload asks for it or a
// periodic check (Watch) finds the file changed. The certificate, key and
// client CA files the configuration names, which exporter-toolkit reads at
// each TLS handshake, are kept so too (tlsCopies): the copy names private
// copies of them, replaced with the configuration's, and the check finds a
// change of theirs as one of the file's.
package webconf

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	config_util "github.com/prometheus/common/config"
	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v3"

	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
	"github.com/vgpu-exporter/vgpu_exporter/internal/yamlconf"
)

// Kept is the web configuration in use: a copy of the file as it was at
// the start or the last reload that validated.
type Kept struct {
	file  string // the user's file, as given
	limit int64
	warn  func(msg string) // what a configuration put in use warns of; nil: nothing
	mu    sync.Mutex       // serializes reloads
	copy  *memCopy         // nil where there is no memfd: exporter-toolkit reads file
	// inMemory says whether exporter-toolkit is given private copies:
	// not outside Linux, nor where the system refuses memfd_create.
	inMemory bool
	tls      bool // whether the configuration in use sets up TLS
	auth     bool // whether it sets basic auth (a user in basic_auth_users)
	// clientCert is whether it requires a verified client certificate
	// (clientCertRequired).
	clientCert bool
	// files are the copies of the certificate, key and client CA files
	// that copy names (nil: none); previous are those it named before the
	// last change of them, left open for a handshake under way that read
	// the copy before, and closed at the next change.
	files, previous *tlsCopies
	// seen is the digest of the files as the last reload or check found
	// them, whatever its outcome: a check reloads only when it differs.
	seen [sha256.Size]byte
	// pending is what a check found differing from seen: a change is
	// reloaded only when the next check finds the same files again, so a
	// file caught half written (emptied, then written: an empty one
	// validates; a reload refuses it only where basic auth was in use)
	// is never put in use.
	pending    [sha256.Size]byte
	hasPending bool
	// systemErr is the text of the last reported failure that was the
	// system's (SystemFailure); "" after a success or another failure.
	systemErr string
	closed    bool
	// The reloads and their outcome, read by the collector while a
	// reload runs.
	reloads, failures atomic.Uint64
	lastFailed        atomic.Bool
	// expiry is that of the certificates in use, read by the collector.
	expiry atomic.Pointer[notAfter]
}

// Open reads and validates file (at most limit bytes) and keeps it. Its
// errors are exporter-toolkit's, the read's, or that of content after the
// first YAML document (which exporter-toolkit would drop unread); the
// caller names the file.
// warn (nil: none) is told, once each time a client CA file is put in use
// (here, or by a reload or check), of each of its PEM blocks that
// exporter-toolkit skips, naming the file and the block; and, here, when
// the file sets neither TLS nor basic auth (NoProtection).
//
// Where the system refuses memfd_create (a seccomp profile or a security
// policy that does not allow it, a kernel before 3.17), exporter-toolkit
// reads the files itself, as outside Linux, and warn is told so.
func Open(file string, limit int64, warn func(msg string)) (*Kept, error) {
	k := &Kept{file: file, limit: limit, warn: warn, inMemory: haveMemCopy}
	if err := memfdRefused(); err != nil {
		k.inMemory = false
		if warn != nil {
			warn(fmt.Sprintf("the system refuses in-memory files (%v): exporter-toolkit reads the web configuration and the files it names itself, so an invalid edit is no longer kept from use; a reload or check still validates it and reports", err))
		}
	}
	k.seen = k.digest() // before the read: an edit in between is found by the next check
	l, err := k.load()
	if err != nil {
		return nil, err
	}
	k.copy, k.files, k.tls, k.auth, k.clientCert = l.cfg, l.files, l.tls, l.auth, l.clientCert
	k.expiry.Store(&l.expiry)
	k.warnSkipped(k.files)
	if !k.tls && !k.auth && warn != nil {
		warn(NoProtection)
	}
	return k, nil
}

// NoProtection is the warning of a file that sets neither TLS nor basic
// auth: it protects nothing.
const NoProtection = "the web configuration sets neither TLS (tls_server_config) nor basic auth (basic_auth_users): plain HTTP without authentication, as without the flag"

// warnSkipped tells k.warn of the client CA blocks skipped of files, just
// put in use.
func (k *Kept) warnSkipped(files *tlsCopies) {
	if files == nil || k.warn == nil {
		return
	}
	for _, s := range files.skipped {
		k.warn(s)
	}
}

// File is the user's file.
func (k *Kept) File() string { return k.file }

// TLS says whether the configuration sets up TLS: fixed at Open (a reload
// that would change it is refused).
func (k *Kept) TLS() bool { return k.tls }

// ErrRestart is the error, wrapped, of a reload refused because its
// change takes a restart: TLS turned on or off, basic auth removed, a
// verified client certificate no longer required.
var ErrRestart = errors.New("that takes a restart")

// InMemory says whether exporter-toolkit is given private copies, so that
// an invalid edit is kept from use: not outside Linux, nor where the
// system refuses memfd_create (there it reads the files themselves, and
// an invalid edit is in use, though a reload or check reports it).
func (k *Kept) InMemory() bool { return k.inMemory }

// Path is the file to hand exporter-toolkit: the private copy.
func (k *Kept) Path() string {
	if k.copy == nil {
		return k.file
	}
	return k.copy.path()
}

// Reload reads and validates the user's file again and, when it is
// valid, puts it in use; otherwise the configuration in use stays and
// the error, which names the file, says why. Where exporter-toolkit reads
// the file itself (not InMemory) an invalid edit is in use all the same:
// the error says so too (errInUse).
func (k *Kept) Reload() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, err := k.reloadSeen(k.digest(), false)
	if err != nil && !k.inMemory && !errors.Is(err, errClosed) {
		return fmt.Errorf("%w; %s", err, InvalidInUse)
	}
	return err
}

// InvalidInUse is what a refused edit costs where exporter-toolkit reads
// the file itself (not InMemory).
const InvalidInUse = "exporter-toolkit reads the file as it is (no in-memory copy): the invalid edit is in use"

// Check reloads the file, as Reload does, when it or a certificate, key
// or client CA file it names differs from what the last reload found and
// the check before found it the same (changed): a change settles for one
// check first. A file that stays as it was, good or bad, is not read
// again as a reload, so its failure is reported once. A failure that is
// the system's (SystemFailure) leaves the change to be tried again at
// each check; a retry that fails with the error reported last is neither
// reported (changed is false) nor counted as a reload, so a lasting one
// is reported, and counted, once for each distinct error, until a reload
// succeeds or fails otherwise. After Close it does nothing.
func (k *Kept) Check() (changed bool, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return false, nil
	}
	d := k.digest()
	switch {
	case d == k.seen:
		k.hasPending = false
		return false, nil
	case !k.hasPending || d != k.pending:
		k.pending, k.hasPending = d, true
		return false, nil
	}
	if reported, err := k.reloadSeen(d, true); reported {
		return true, err
	}
	return false, nil
}

// CheckInterval is how often the exporter checks the file (and the
// certificate, key and client CA files it names) for a change, with
// Watch: a valid change is in use within twice it, settled for one check
// (docs/web-config.md).
const CheckInterval = 5 * time.Second

// Watch calls Check at each tick until ctx is done, and report with its
// error each time it found a change (nil: the change is in use).
func (k *Kept) Watch(ctx context.Context, ticks <-chan time.Time, report func(error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			if changed, err := k.Check(); changed {
				report(err)
			}
		}
	}
}

// reloadSeen reloads the file, whose digest, taken before, is seen. A
// failure that is the system's, not the file's (SystemFailure), leaves
// seen as it was, and the change settled: the next check tries it again.
// A check's (check) that fails with the system's error reported last is
// not counted, and not reported (reported false).
func (k *Kept) reloadSeen(seen [sha256.Size]byte, check bool) (reported bool, err error) {
	err = k.reload()
	k.lastFailed.Store(err != nil)
	if err == nil || !SystemFailure(err) {
		k.seen, k.hasPending = seen, false
	} else {
		k.pending, k.hasPending = seen, true // (tried again at the next check)
	}
	if err == nil {
		k.systemErr = ""
		k.reloads.Add(1)
		return true, nil
	}
	err = fmt.Errorf("%s: %w", k.file, err)
	if SystemFailure(err) {
		if check && err.Error() == k.systemErr {
			return false, err
		}
		k.systemErr = err.Error()
	} else {
		k.systemErr = ""
	}
	k.reloads.Add(1)
	k.failures.Add(1)
	return true, err
}

// copyError is a failure to make or replace a private copy: the system's
// (descriptors, memory, /proc), not the content's.
type copyError struct{ err error }

func (e copyError) Error() string { return e.err.Error() }
func (e copyError) Unwrap() error { return e.err }

// SystemFailure says whether err, a reload's or a check's, is the
// system's, not the file's: a failure to make or replace a private copy
// (copyError), or any step of the load (the open of the file, of a file
// it names, of the copy) out of descriptors or memory (EMFILE, ENFILE,
// ENOMEM). A check tries such a change again.
func SystemFailure(err error) bool {
	return errors.As(err, new(copyError)) ||
		errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOMEM)
}

// validate is web.Validate; a test fails its open as the system would.
var validate = web.Validate

func (k *Kept) reload() error {
	if k.closed {
		return errClosed
	}
	next, err := k.load()
	if err != nil {
		return err
	}
	if why := k.takesRestart(next); why != "" {
		k.discard(next)
		return fmt.Errorf("%s: %w", why, ErrRestart)
	}
	if next.cfg == nil {
		k.take(next)
		return nil
	}
	if err := k.copy.replace(next.cfg); err != nil { // next.cfg released either way
		next.cfg = nil
		k.discard(next)
		return err
	}
	k.take(next)
	if next.files != k.files {
		// A handshake reads the copy, then the files it names, and may
		// read them again after a round trip with the client: the ones
		// the copy named until now stay open until the next change.
		k.previous.close()
		k.previous, k.files = k.files, next.files
		k.warnSkipped(k.files)
	}
	return nil
}

// loaded is what load made of the file: the copy to serve, the copies of
// the files it names, whether it sets up TLS and basic auth and requires
// a verified client certificate, when its certificates expire.
type loaded struct {
	cfg        *memCopy   // nil where there is no memfd
	files      *tlsCopies // nil when it names none; k.files when those hold them
	tls, auth  bool
	clientCert bool
	clientAuth string   // what it asks of a client (clientCertRequired)
	expiry     notAfter // zero without TLS
}

// takesRestart says why next's change takes a restart (ErrRestart), ""
// where it does not.
func (k *Kept) takesRestart(next loaded) string {
	switch {
	case next.tls != k.tls:
		// exporter-toolkit decides at start whether the port speaks TLS:
		// a copy without it would fail every handshake, one with it would
		// still be served over plain HTTP.
		return fmt.Sprintf("it turns TLS %s (tls_server_config)", onOff(next.tls))
	case k.auth && !next.auth:
		// Every request would be served without authentication, from a
		// check that caught the file emptied, a Secret written without
		// its users, as from an edit meant so: an operator who wants
		// that restarts the exporter.
		return "it removes basic auth (no user in basic_auth_users), which would serve every request without authentication"
	case k.clientCert && !next.clientCert:
		// As basic auth removed: every request would be served to a
		// client without a certificate its CA verifies.
		return fmt.Sprintf("it no longer requires a verified client certificate (%s), which would serve clients without one", next.clientAuth)
	}
	return ""
}

// discard releases what load made for l and is not in use.
func (k *Kept) discard(l loaded) {
	l.cfg.close()
	if l.files != k.files {
		l.files.close()
	}
}

// load reads the file and validates what would be served from it: a new
// copy naming copies of the certificate, key and client CA files, or the
// file itself where there is no memfd (cfg is then nil). Those files are
// validated first, as read for their copies, for errors naming them; then
// the file, for errors whose lines are the file's; then the copy, being
// what is served. A FIFO, a device or a file over the limit is refused
// before exporter-toolkit reads it, and so is a file of more than one
// YAML document (yamlconf.OneDocument: "line N: ...").
func (k *Kept) load() (loaded, error) {
	if err := fileread.Check(k.file, k.limit); err != nil {
		return loaded{}, err
	}
	// One read: the copy is made of the content whose files were checked.
	data, err := fileread.Regular(k.file, k.limit)
	if err != nil {
		return loaded{}, err
	}
	// exporter-toolkit reads the first YAML document only: what follows
	// a second document start ("---") or a document end ("...") would be
	// dropped unread, and with it the basic_auth_users or
	// tls_server_config it sets.
	if err := yamlconf.OneDocument(data); err != nil {
		return loaded{}, err
	}
	if err := k.checkTLSFiles(data); err != nil {
		return loaded{}, err
	}
	dir, err := k.dir()
	if err != nil {
		return loaded{}, err
	}
	var l loaded
	tc := tlsSection(data, dir)
	if tc != nil && k.inMemory {
		if l.files, err = copyTLSFiles(tc, k.limit, k.files); err != nil {
			return loaded{}, err
		}
	}
	if err := validate(k.file); err != nil {
		k.discard(l)
		return loaded{}, err
	}
	l.auth = basicAuth(data)
	l.clientCert, l.clientAuth = clientCertRequired(tc)
	if data, l.tls, err = resolve(data, dir, l.files.pathMap()); err != nil {
		k.discard(l)
		return loaded{}, err
	}
	switch {
	case l.files != nil:
		l.expiry = l.files.expiry
	case l.tls && !k.inMemory:
		// exporter-toolkit reads the files themselves: their certificates
		// are those served.
		l.expiry = expiryOf(tc, readCertFiles(tc, k.limit))
	case l.tls:
		l.expiry = expiryOf(tc, nil) // the certificates the file holds
	}
	if !k.inMemory {
		// Outside Linux, or memfd_create refused: exporter-toolkit reads
		// the file itself, as it would without this package; a reload
		// only validates it.
		return l, nil
	}
	if l.cfg, err = newMemCopy("web-config", data); err != nil {
		k.discard(l)
		return loaded{}, err
	}
	if err := validate(l.cfg.path()); err != nil {
		k.discard(l)
		return loaded{}, err
	}
	return l, nil
}

// checkTLSFiles refuses a certificate, key or client CA file data (the
// file's content) names that is not a regular file of at most the limit
// (after symlinks), as the file itself is refused: exporter-toolkit reads
// them whole (web.Validate), and its read of a FIFO would wait for a
// writer, holding the reload (and every later one, and the shutdown) for
// good. On Linux copyTLSFiles, which follows, reads those tlsSection
// decodes, refusing the same and a missing one too; this check covers the
// rest: outside Linux all of them, and on Linux the paths of a section
// tlsSection does not decode, which exporter-toolkit's validation may
// still read. A missing one is left to the read that follows
// (copyTLSFiles, or exporter-toolkit's).
func (k *Kept) checkTLSFiles(data []byte) error {
	for _, p := range k.tlsFiles(data) {
		if err := fileread.Check(p, k.limit); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Close releases the copies; exporter-toolkit must be done with them. A
// reload or check that comes after fails, one under way finishes first.
func (k *Kept) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil
	}
	k.closed = true
	k.files.close()
	k.previous.close()
	return k.copy.close()
}

// dir is the directory the file's relative certificate, key and client
// CA paths are joined to (the copy lives elsewhere; exporter-toolkit takes
// a relative one from the file's directory).
func (k *Kept) dir() (string, error) {
	abs, err := filepath.Abs(k.file)
	return filepath.Dir(abs), err
}

// digest sums the file's content and that of the certificate, key and
// client CA files it names, each as the limit allows it to be read, or
// the error that read met (a missing file is a state as any other).
func (k *Kept) digest() [sha256.Size]byte {
	h := sha256.New()
	add := func(path string) []byte {
		data, err := fileread.Regular(path, k.limit)
		if err != nil {
			data = []byte("error: " + err.Error())
		}
		fmt.Fprintf(h, "%q %d\n", path, len(data))
		h.Write(data)
		return data
	}
	for _, p := range k.tlsFiles(add(k.file)) {
		add(p)
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// tlsFiles are the files named by data, the file's content (tlsFiles).
func (k *Kept) tlsFiles(data []byte) []string {
	dir, err := k.dir()
	if err != nil {
		return nil
	}
	return tlsFiles(data, dir)
}

// tlsFiles are the files named by data's tls_server_config, relative
// ones joined to dir; none when data does not parse.
func tlsFiles(data []byte, dir string) []string {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil
	}
	var files []string
	for _, p := range pathValues(mapValue(doc.Content[0], "tls_server_config")) {
		files = append(files, config_util.JoinDir(dir, p.val.Value))
	}
	return files
}

// tlsSection is data's tls_server_config, its paths joined to dir; nil
// when it sets nothing or does not decode (for exporter-toolkit to name
// the problem).
func tlsSection(data []byte, dir string) *web.TLSConfig {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil
	}
	n := mapValue(doc.Content[0], "tls_server_config")
	var tc web.TLSConfig
	if n == nil || n.Decode(&tc) != nil {
		return nil
	}
	tc.SetDirectory(dir)
	if !tc.IsEnabled() {
		return nil
	}
	return &tc
}

// pathValue is a scalar node of a file path and the key it is set by.
type pathValue struct {
	key string
	val *yaml.Node
}

// pathValues are the scalar nodes of the file paths (tlsFileKeys) that the
// tls_server_config mapping m sets, with those of the mappings it merges
// (<<, as exporter-toolkit's YAML reads them), each mapping walked once
// however many aliases name it; a null one is left out, as it sets
// nothing. An alias as a path is replaced in m by a copy of its scalar,
// so that joining a directory to it changes nothing else that shares its
// anchor.
func pathValues(m *yaml.Node) []pathValue {
	var vals []pathValue
	seen := map[*yaml.Node]bool{}
	var walk func(m *yaml.Node)
	walk = func(m *yaml.Node) {
		m = yamlconf.Resolve(m)
		if m == nil || m.Kind != yaml.MappingNode || seen[m] {
			return
		}
		seen[m] = true
		for i := 0; i+1 < len(m.Content); i += 2 {
			key, val := m.Content[i], m.Content[i+1]
			if key.ShortTag() == "!!merge" {
				if val.Kind == yaml.SequenceNode {
					for _, mm := range val.Content {
						walk(mm)
					}
				} else {
					walk(val)
				}
				continue
			}
			if !slices.Contains(tlsFileKeys, key.Value) {
				continue
			}
			if r := yamlconf.Resolve(val); r != val && r != nil && r.Kind == yaml.ScalarNode {
				c := *r
				c.Anchor = ""
				val = &c
				m.Content[i+1] = val
			}
			if val.Kind == yaml.ScalarNode && val.Value != "" && !yamlconf.IsNull(val) {
				vals = append(vals, pathValue{key.Value, val})
			}
		}
	}
	walk(m)
	return vals
}

// errClosed is the error of a reload after Close.
var errClosed = errors.New("the exporter is shutting down")

// resolve sets the file paths of data's tls_server_config to their
// copies (copies, by key) or else joins dir to the relative ones, and
// says whether that section sets up TLS. data is returned as it is when
// no path changes; a document that does not parse is returned as it is
// too, for exporter-toolkit to name its error.
func resolve(data []byte, dir string, copies map[string]string) ([]byte, bool, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return data, false, nil
	}
	tlsNode := mapValue(doc.Content[0], "tls_server_config")
	if tlsNode == nil {
		return data, false, nil
	}
	var tc web.TLSConfig
	if err := tlsNode.Decode(&tc); err != nil {
		return data, false, nil
	}
	changed := false
	for _, p := range pathValues(tlsNode) {
		path, ok := copies[p.key]
		if !ok {
			path = config_util.JoinDir(dir, p.val.Value)
		}
		if path != p.val.Value {
			p.val.Value, p.val.Tag, p.val.Style = path, "!!str", 0
			changed = true
		}
	}
	if !changed {
		return data, tc.IsEnabled(), nil
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	if err := enc.Encode(&doc); err != nil {
		return nil, false, err
	}
	if err := enc.Close(); err != nil {
		return nil, false, err
	}
	return out.Bytes(), tc.IsEnabled(), nil
}

// basicAuth says whether data, a file that validated, sets basic auth:
// a user in basic_auth_users (exporter-toolkit asks for none without
// one). A document that does not decode sets none.
func basicAuth(data []byte) bool {
	var c struct {
		Users map[any]any `yaml:"basic_auth_users"`
	}
	return yaml.Unmarshal(data, &c) == nil && len(c.Users) > 0
}

// clientCertRequired says whether tc, the tls_server_config of a file
// that validated (tlsSection; nil: none set), requires of every client a certificate
// verified against a client CA: client_auth_type RequireAndVerifyClientCert
// with a client_ca_file or client_ca. exporter-toolkit takes an unset
// client_auth_type as NoClientCert, and with RequireAndVerifyClientCert
// but no client CA Go verifies a client's certificate against the
// system's roots, any public CA's. what says, for an error, what tc asks
// instead.
func clientCertRequired(tc *web.TLSConfig) (required bool, what string) {
	switch {
	case tc == nil:
		return false, "no tls_server_config"
	case tc.ClientAuth == "":
		return false, "no client_auth_type: NoClientCert"
	case tc.ClientAuth != "RequireAndVerifyClientCert":
		return false, "client_auth_type " + tc.ClientAuth
	case tc.ClientCAs == "" && tc.ClientCAsText == "":
		return false, "no client_ca_file or client_ca: verified against the system's roots"
	}
	return true, "client_auth_type RequireAndVerifyClientCert"
}

// mapValue is the value of key in the mapping node m (nil when absent).
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// take puts next's checks in use: its users, its client certificate
// requirement and its certificates' expiry.
func (k *Kept) take(next loaded) {
	k.auth, k.clientCert = next.auth, next.clientCert
	k.expiry.Store(&next.expiry)
}
