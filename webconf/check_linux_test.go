package webconf

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// A check reloads only what changed since the last reload or check: a
// good edit is put in use, a bad one (or a missing file) is reported once
// however many checks find it still so, the copy in use staying; a
// changed certificate is checked as a pair with its key.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	testutil.WriteSelfSigned(t, dir)
	f := filepath.Join(dir, "web.yml")
	tlsPart := "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"
	oldHash, newHash := hash(t, "s3cret"), hash(t, "n3w")
	good := tlsPart + "basic_auth_users:\n  prom: " + oldHash + "\n"
	edit := tlsPart + "basic_auth_users:\n  prom: " + newHash + "\n"
	key, err := os.ReadFile(filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, good)
	k, err := Open(f, limit, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	for i, step := range []struct {
		name    string
		do      func()
		changed bool
		errHas  string // "" when the check must succeed
		serving string // the hash the copy in use holds
	}{
		{"unchanged", func() {}, false, "", oldHash},
		{"bad edit", func() { write(t, f, "basic_auth_users:\n  prom: [\n") }, true, "line 2", oldHash},
		{"still bad", func() {}, false, "", oldHash},
		{"still bad, rewritten the same", func() { write(t, f, "basic_auth_users:\n  prom: [\n") }, false, "", oldHash},
		{"another bad edit", func() { write(t, f, tlsPart+"basic_auth_users:\n  prom: nohash\n") }, true, "hash", oldHash},
		{"good edit", func() { write(t, f, edit) }, true, "", newHash},
		{"unchanged after the edit", func() {}, false, "", newHash},
		{"missing file", func() { os.Remove(f) }, true, "no such file", newHash},
		{"still missing", func() {}, false, "", newHash},
		{"back", func() { write(t, f, edit) }, true, "", newHash},
		{"certificate renewed", func() { testutil.WriteSelfSigned(t, dir) }, true, "", newHash},
		{"key not matching the certificate", func() { write(t, filepath.Join(dir, "tls.key"), string(key)) }, true, "private key does not match", newHash},
		{"still not matching", func() {}, false, "", newHash},
		{"bad edit mended by a reload", func() {
			write(t, f, "basic_auth_users:\n  prom: [\n")
			k.Reload()
			testutil.WriteSelfSigned(t, dir)
			write(t, f, good)
			if err := k.Reload(); err != nil {
				t.Fatal(err)
			}
		}, false, "", oldHash},
	} {
		step.do()
		// A change settles for one check: the first finds it and keeps
		// what is in use, byte for byte.
		inUse := served(t, k)
		if changed, err := k.Check(); changed || err != nil {
			t.Errorf("%d %s: the first check after it: changed %v, %v; want it left for the next", i, step.name, changed, err)
		}
		if got := served(t, k); got != inUse {
			t.Errorf("%d %s: the first check put in use\n%s\nin place of\n%s", i, step.name, got, inUse)
		}
		changed, err := k.Check()
		if changed != step.changed {
			t.Errorf("%d %s: changed %v, want %v", i, step.name, changed, step.changed)
		}
		switch {
		case step.errHas == "" && err != nil:
			t.Errorf("%d %s: %v", i, step.name, err)
		case step.errHas != "" && (err == nil || !strings.Contains(err.Error(), step.errHas) || !strings.Contains(err.Error(), f)):
			t.Errorf("%d %s: %v, want an error naming %s and %q", i, step.name, err, f, step.errHas)
		}
		if got := served(t, k); !strings.Contains(got, step.serving) {
			t.Errorf("%d %s: serving\n%s\nwant the hash %s", i, step.name, got, step.serving)
		}
	}
	// Once closed (the exporter shutting down), a change is not reloaded.
	k.Close()
	write(t, f, edit)
	if changed, err := k.Check(); changed || err != nil {
		t.Errorf("a check after Close: changed %v, %v; want nothing done", changed, err)
	}
}

// A file a check finds half written (emptied before it is written again:
// an empty web configuration validates and asks no password) is not put
// in use: a change is reloaded only once two checks in a row find it.
func TestCheckSettles(t *testing.T) {
	f := filepath.Join(t.TempDir(), "web.yml")
	oldHash, newHash := hash(t, "s3cret"), hash(t, "n3w")
	write(t, f, "basic_auth_users:\n  prom: "+oldHash+"\n")
	k, err := Open(f, limit, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	write(t, f, "") // caught between the truncation and the write
	if changed, err := k.Check(); changed || err != nil {
		t.Errorf("a check finding the file emptied: changed %v, %v; want nothing done yet", changed, err)
	}
	if got := served(t, k); !strings.Contains(got, oldHash) {
		t.Fatalf("a file caught half written is in use:\n%q", got)
	}
	write(t, f, "basic_auth_users:\n  prom: "+newHash+"\n")
	if changed, err := k.Check(); changed || err != nil {
		t.Errorf("the written file's first check: changed %v, %v; want it left to settle", changed, err)
	}
	if changed, err := k.Check(); !changed || err != nil {
		t.Errorf("the written file's second check: changed %v, %v; want it in use", changed, err)
	}
	if got := served(t, k); !strings.Contains(got, newHash) {
		t.Errorf("serving\n%q\nwant the hash of the written file", got)
	}
	// Put back as it was before it settled: nothing to do.
	write(t, f, "basic_auth_users:\n  prom: "+oldHash+"\n")
	k.Check()
	write(t, f, "basic_auth_users:\n  prom: "+newHash+"\n")
	if changed, err := k.Check(); changed || err != nil {
		t.Errorf("a file back as in use: changed %v, %v; want nothing done", changed, err)
	}
}

// editedPassword keeps a file of one user's password hash, then edits it
// to another's, which it returns: the edit not yet reloaded or checked.
func editedPassword(t *testing.T) (*Kept, string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "web.yml")
	oldHash, newHash := hash(t, "s3cret"), hash(t, "n3w")
	write(t, f, "basic_auth_users:\n  prom: "+oldHash+"\n")
	k, err := Open(f, limit, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	write(t, f, "basic_auth_users:\n  prom: "+newHash+"\n")
	return k, newHash
}

// retriedInUse checks that the next check tries the edit, whose password
// hash is newHash, again and puts it in use.
func retriedInUse(t *testing.T, k *Kept, newHash string) {
	t.Helper()
	if changed, err := k.Check(); !changed || err != nil {
		t.Errorf("the check after: changed %v, %v; want the edit tried again and in use", changed, err)
	}
	if got := served(t, k); !strings.Contains(got, newHash) {
		t.Errorf("serving\n%q\nwant the hash of the edit", got)
	}
}

// A failure to make the copy (the system's: out of descriptors, as a
// memfd_create failing after the start's probe passed) is not the file's:
// the next check tries the edit again. Before, the edit was marked seen
// and never retried until the file changed again.
func TestCheckRetriesCopyFailure(t *testing.T) {
	for _, by := range []string{"reload", "check"} {
		t.Run(by, func(t *testing.T) {
			k, newHash := editedPassword(t)
			old := memfdCreate
			memfdCreate = func(string, int) (int, error) { memfdCreate = old; return -1, unix.EMFILE }
			defer func() { memfdCreate = old }()
			var err error
			if by == "reload" {
				err = k.Reload()
			} else {
				k.Check() // settles
				_, err = k.Check()
			}
			if err == nil || !strings.Contains(err.Error(), unix.EMFILE.Error()) {
				t.Fatalf("%s with memfd_create failing: %v, want its error", by, err)
			}
			retriedInUse(t, k, newHash)
		})
	}
}

// A step of the load out of descriptors or memory (EMFILE, ENFILE,
// ENOMEM), as exporter-toolkit's open of the copy just made or of the file,
// is the system's too: the next check tries the edit again. Before, only a
// failure to make the copy was, and such an edit (a password rotated) was
// marked seen and never put in use until the file changed again.
func TestCheckRetriesOutOfDescriptors(t *testing.T) {
	for _, tc := range []struct {
		name string
		copy bool // the open of the copy fails, else the file's
		err  unix.Errno
	}{
		{"the copy's open EMFILE", true, unix.EMFILE},
		{"the file's open EMFILE", false, unix.EMFILE},
		{"the copy's open ENFILE", true, unix.ENFILE},
		{"the file's open ENOMEM", false, unix.ENOMEM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, newHash := editedPassword(t)
			old := validate
			validate = func(p string) error {
				if strings.HasPrefix(p, fdDir) == tc.copy {
					validate = old
					return &os.PathError{Op: "open", Path: p, Err: tc.err}
				}
				return old(p)
			}
			defer func() { validate = old }()
			k.Check() // settles
			if changed, err := k.Check(); !changed || !errors.Is(err, tc.err) || !SystemFailure(err) {
				t.Errorf("check with the open failing: changed %v, %v; want its error, the system's", changed, err)
			}
			retriedInUse(t, k, newHash)
		})
	}
}

// A lasting failure of the system's is tried again at each check but
// reported, and counted as a reload, once for each distinct error, not at
// each check. Before, each check every 5 s logged it again and counted
// it (about 17,000 lines a day).
func TestCheckReportsLastingSystemFailureOnce(t *testing.T) {
	k, newHash := editedPassword(t)
	old := memfdCreate
	defer func() { memfdCreate = old }()
	k.Check() // settles
	counted := func(when, reloads, failures string) {
		t.Helper()
		want := `# HELP vgpu_web_config_reload_failures_total Reloads of --web.config.file that failed since the exporter started.
# TYPE vgpu_web_config_reload_failures_total counter
vgpu_web_config_reload_failures_total ` + failures + `
# HELP vgpu_web_config_reloads_total Reloads of --web.config.file since the exporter started (SIGHUP, POST /-/reload, or a change found by its check every 5 s), failed ones included; the check's retries of a failure of the system's (not the file's) counted once for each distinct error.
# TYPE vgpu_web_config_reloads_total counter
vgpu_web_config_reloads_total ` + reloads + `
`
		if err := promtestutil.CollectAndCompare(k.Collector(), strings.NewReader(want),
			"vgpu_web_config_reloads_total", "vgpu_web_config_reload_failures_total"); err != nil {
			t.Errorf("%s: %v", when, err)
		}
	}
	for _, step := range []struct {
		name              string
		err               unix.Errno // memfd_create's; 0: it makes one
		reports           int        // of ten checks
		reloads, failures string
	}{
		{"lasting", unix.EMFILE, 1, "1", "1"},
		{"another error", unix.ENFILE, 1, "2", "2"},
		{"the first again", unix.EMFILE, 1, "3", "3"},
		{"mended", 0, 1, "4", "3"},
	} {
		memfdCreate = func(name string, flags int) (int, error) {
			if step.err != 0 {
				return -1, step.err
			}
			return old(name, flags)
		}
		reports := 0
		for range 10 {
			changed, err := k.Check()
			if !changed {
				continue
			}
			reports++
			if step.err != 0 && !errors.Is(err, step.err) || step.err == 0 && err != nil {
				t.Errorf("%s: check reported %v, want memfd_create's error %v", step.name, err, step.err)
			}
		}
		if reports != step.reports {
			t.Errorf("%s: %d of ten checks reported, want %d", step.name, reports, step.reports)
		}
		counted(step.name, step.reloads, step.failures)
	}
	if got := served(t, k); !strings.Contains(got, newHash) {
		t.Errorf("serving\n%q\nwant the hash of the edit", got)
	}
}

// Watch checks at each tick, and reports only the changes it found.
func TestWatchReportsChangesOnce(t *testing.T) {
	f := filepath.Join(t.TempDir(), "web.yml")
	write(t, f, "basic_auth_users: {}\n")
	k, err := Open(f, limit, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	var mu sync.Mutex
	var reports []string
	ticks := make(chan time.Time) // a send returns once the previous check is done
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.Watch(ctx, ticks, func(err error) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, strings.Replace(errString(err), f, "FILE", 1))
		})
	}()
	tick := func(n int) {
		for range n {
			ticks <- time.Time{}
		}
	}
	// The edits are renamed over the file, as docs/web-config.md says to:
	// the last tick's check may be under way, and one that found the file
	// cut short by a rewrite in place would take what validates of it.
	tick(3)
	testutil.ReplaceFile(t, f, []byte("basic_auth_users: [\n"))
	tick(10)
	testutil.ReplaceFile(t, f, []byte("basic_auth_users: {prom: "+hash(t, "n3w")+"}\n"))
	tick(10)
	cancel()
	<-done
	want := []string{"FILE: yaml: line 1: did not find expected node content", "ok"}
	if strings.Join(reports, "|") != strings.Join(want, "|") {
		t.Errorf("reports %q, want %q", reports, want)
	}
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
