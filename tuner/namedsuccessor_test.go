package tuner

import (
	"path/filepath"
	"strings"
	"testing"
)

// A successor the restart hook names (pid=N) is checked against the
// snapshots: named and listed on the GPU, it holds the original and is set
// back at exit, and nothing is said. Named and never listed there within
// the bound (the hook printed its wrapper's PID: systemctl's MainPID, a
// shell's $!), it is said at warning level, naming both PIDs, and the
// successor is looked for as if the hook had named none: the one new
// process of the tenant holds the original and is set back at exit; with
// none, the original is dropped once the named PID is taken for gone.
// (Before, the original went to the named PID and was dropped a minute
// later as "process gone", the real successor keeping the tuner's cap, and
// nothing above info level said so.)
func TestNamedSuccessorChecked(t *testing.T) {
	for _, c := range []struct {
		name   string
		named  uint32
		rounds []proc // every 15 s after the restart, six times
		open   uint32 // the PID holding the original after the rounds, 0 for none
		calls  []string
		warn   string // what the warning names, "" for none
	}{
		{"named and listed", 9, []proc{batch(8), embed(9)}, 9, restoredOn9, ""},
		{"a wrapper's PID named, one new process", 99, []proc{batch(8), embed(9)}, 9, restoredOn9, "named=99 successor=9"},
		{"a wrapper's PID named, no new process", 99, []proc{batch(8)}, 0, nil, "named=99 candidates="},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newUnnamedRun(t, filepath.Join(t.TempDir(), "journal"))
			r.host.next = map[uint32]uint32{7: c.named}
			r.restart(t, embed(7), batch(8))
			for range 6 {
				r.round(t, c.rounds...)
			}
			// a minute more: a named PID not listed is then taken for gone
			for range 4 {
				r.round(t, c.rounds...)
			}
			r.exit(t, c.open, c.calls)
			out := r.log.String()
			warned := strings.Contains(out, "restart hook named a successor")
			if warned != (c.warn != "") {
				t.Fatalf("warned %v, want %v:\n%s", warned, c.warn != "", out)
			}
			for _, w := range strings.Fields(c.warn) {
				if !strings.Contains(out, w) || !strings.Contains(out, "level=warn") || !strings.Contains(out, "pid=7") {
					t.Errorf("log lacks %q (or the warning, or pid=7):\n%s", w, out)
				}
			}
			if strings.Contains(out, unnamedLog) {
				t.Errorf("a named successor logged as none named:\n%s", out)
			}
		})
	}
}

// A successor the restart hook names that the rounds saw on the GPU before
// the restart (another tenant's process, or one of the client's tenant
// that was running already: the hook printed the wrong PID) is refused at
// the restart, at warning level naming both PIDs and both tenants, and the
// successor is looked for as if the hook had named none: the one new
// process of the tenant holds the original and is set back at exit; with
// none, the original is dropped once the client's process is gone. The
// named process is never set back. (Before, a named PID listed on the GPU
// was taken at once: the original went to another tenant's process, and
// the restore at exit set that process's cap and restarted it.)
func TestNamedSuccessorThereBefore(t *testing.T) {
	for _, c := range []struct {
		name   string
		named  uint32
		before []proc // at the restart, with embed(7)
		rounds []proc // every 15 s after the restart, ten times
		open   uint32
		calls  []string
		warn   string
	}{
		{"another tenant's process, one new process", 8, []proc{batch(8)}, []proc{batch(8), embed(9)}, 9, restoredOn9,
			`pid=7 named=8 named_tenant=batch tenant=embed`},
		{"another tenant's process, no new process", 8, []proc{batch(8)}, []proc{batch(8)}, 0, nil,
			`pid=7 named=8 named_tenant=batch`},
		{"the tenant's process already running", 5, []proc{embed(5), batch(8)}, []proc{embed(5), batch(8), embed(9)}, 9, restoredOn9,
			`pid=7 named=5 named_tenant=embed`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newUnnamedRun(t, filepath.Join(t.TempDir(), "journal"))
			r.host.next = map[uint32]uint32{7: c.named}
			r.restart(t, append([]proc{embed(7)}, c.before...)...)
			out := r.log.String()
			if !strings.Contains(out, "level=warn") || !strings.Contains(out, "on its GPU before the restart: not taken") {
				t.Fatalf("no warning at the restart:\n%s", out)
			}
			for _, w := range strings.Fields(c.warn) {
				if !strings.Contains(out, w) {
					t.Errorf("warning lacks %q:\n%s", w, out)
				}
			}
			for _, o := range r.j.Originals() {
				if o.Target.PID == c.named {
					t.Fatalf("the original went to the named PID %d: %+v", c.named, o)
				}
			}
			for range 10 {
				r.round(t, c.rounds...)
			}
			r.exit(t, c.open, c.calls)
		})
	}
}

// A named successor that first appears after the restart, attributed to
// another tenant (a new process of that tenant: the hook printed the wrong
// PID), is refused once a snapshot lists it so, at warning level naming
// both PIDs and tenants: what the tuner keeps goes back to the client's
// PID, and the successor is looked for as if the hook had named none.
// (Before, the first snapshot that listed it ended the check: the other
// tenant's process held the client's original and was set back at exit.)
func TestNamedSuccessorOfAnotherTenant(t *testing.T) {
	for _, c := range []struct {
		name   string
		rounds []proc
		open   uint32
		calls  []string
	}{
		{"one new process of the tenant", []proc{batch(8), batch(10), embed(9)}, 9, restoredOn9},
		{"no new process of the tenant", []proc{batch(8), batch(10)}, 0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newUnnamedRun(t, filepath.Join(t.TempDir(), "journal"))
			r.host.next = map[uint32]uint32{7: 10}
			r.restart(t, embed(7), batch(8))
			for range 10 {
				r.round(t, c.rounds...)
			}
			out := r.log.String()
			for _, w := range []string{"level=warn", "listed on its GPU after the restart: not taken", "pid=7", "named=10", "named_tenant=batch", "tenant=embed"} {
				if !strings.Contains(out, w) {
					t.Errorf("log lacks %q:\n%s", w, out)
				}
			}
			r.exit(t, c.open, c.calls)
		})
	}
}
