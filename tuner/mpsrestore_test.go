package tuner

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// recoverMPS journals embed's MPS original of PID pid with the identity
// {testBoot, start}, recovers it at the next start on snap with host
// (an error from it fails the test), and returns the journal and the log.
func recoverMPS(t *testing.T, pid uint32, start uint64, host *idClients, snap *tenant.Snapshot) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal")
	j := reopen(t, writeJournal(t, path, mpsOriginal(pid, Identity{Boot: testBoot, Starts: []uint64{start}})), path)
	var buf bytes.Buffer
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(host), Journal: j, Clock: gpu.NewManualClock(snap.Time), Mode: ModeEnforce,
		Logger: log.NewLogfmtLogger(log.NewSyncWriter(&buf))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.Recover(context.Background(), snap); err != nil {
		t.Errorf("Recover: %v, want none", err)
	}
	if o := j.Originals(); len(o) != 0 {
		t.Errorf("originals left open: %+v", o)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), buf.String()
}

// recoverRestarts recovers PID 10's MPS original, journaled with start
// 500, on snap with a procfs root of starts, checks that the PID was
// restarted where restart (else not), and returns the journal and the log.
func recoverRestarts(t *testing.T, snap *tenant.Snapshot, starts map[uint32]uint64, restart bool) (string, string) {
	t.Helper()
	host := &idClients{boot: testBoot, starts: starts}
	journal, logs := recoverMPS(t, 10, 500, host, snap)
	var want []string
	if restart {
		want = []string{"RestartClient(GPU-0,10)"}
	}
	if got := restartsOf(host.Calls); !slices.Equal(got, want) {
		t.Errorf("restarts %q, want %q\nlog: %s", got, want, logs)
	}
	return journal, logs
}

// At the next start, an MPS original whose PID is still its client (the
// same boot and start time) is set back, whatever tenant the snapshot
// gives the PID now: a tenant renamed by a reload, or a pod whose labels
// are not read yet, is still the client's (a rule that closed it as
// another tenant's left its cap on for good, and was not kept). A PID
// the first sample does not list is not restarted by what /proc shows (a
// job that left the GPU but runs on): TestMPSRestoreAtStartWaitsForListing.
func TestMPSRestoreAtStartTellsClient(t *testing.T) {
	at := t0.Add(time.Hour)
	for _, c := range []struct {
		name    string
		snap    *tenant.Snapshot
		starts  map[uint32]uint64 // journaled: PID 10, start 500
		restart bool
		closed  string // the restored record's reason, where not restarted
	}{
		{"its tenant renamed", tenantSnap(at, proc{10, "team-a"}, proc{8, "batch"}), map[uint32]uint64{10: 500, 8: 50}, true, ""},
		{"its own tenant's PID", tenantSnap(at, proc{10, "embed"}, proc{8, "batch"}), map[uint32]uint64{10: 500, 8: 50}, true, ""},
		{"an unassigned PID", tenantSnap(at, proc{10, tenant.Unassigned}, proc{8, "batch"}), map[uint32]uint64{10: 500, 8: 50}, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			journal, logs := recoverRestarts(t, c.snap, c.starts, c.restart)
			if c.closed != "" && !strings.Contains(journal, c.closed) {
				t.Errorf("journal lacks %q:\n%s", c.closed, journal)
			}
			if strings.Contains(logs, "level=warn") && strings.Contains(logs, "not restarted") { // (no row passes over a PID)
				t.Errorf("warned a client not restarted:\n%s", logs)
			}
		})
	}
}

// Whether the procfs root (--proc.root) shows the GPU's processes is
// judged by the others the snapshot lists on the GPU, not by the
// client's PID alone: where it shows some, a client that exited (NVML
// still listing it) is gone, not restarted (before: the warning that the
// root does not show the GPU's processes, and a restart of a PID nobody
// held); where it shows none, a process of another start time under the
// client's number is another PID namespace's, and the client is restarted
// by PID with that warning (before: closed as gone, its cap left on).
func TestMPSRestoreJudgesProcRootByGPU(t *testing.T) {
	at := t0.Add(time.Hour)
	both := tenantSnap(at, proc{10, "embed"}, proc{8, "batch"})
	const blind = "--proc.root does not show the GPU's processes"
	for _, c := range []struct {
		name    string
		snap    *tenant.Snapshot
		starts  map[uint32]uint64 // journaled: PID 10, start 500
		restart bool
		warn    string
	}{
		{"exited, still listed, the others shown", both, map[uint32]uint64{8: 50}, false, "not restarted"},
		{"another process under the PID, the others shown", both, map[uint32]uint64{10: 900, 8: 50}, false, "not restarted"},
		{"another process under the PID, none of the others shown", both, map[uint32]uint64{10: 900}, true, blind},
		{"none of the GPU's processes shown", both, map[uint32]uint64{}, true, blind},
		{"the only one listed, not shown", tenantSnap(at, proc{10, "embed"}), map[uint32]uint64{}, true, blind},
		{"the only one listed, another process under it", tenantSnap(at, proc{10, "embed"}), map[uint32]uint64{10: 900}, false, "not restarted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			journal, logs := recoverRestarts(t, c.snap, c.starts, c.restart)
			if closed := strings.Contains(journal, "process gone, not restarted: PID 10"); closed == c.restart {
				t.Errorf("closed as gone %v, want %v\njournal: %s", closed, !c.restart, journal)
			}
			for _, w := range []string{blind, "not restarted"} {
				if warned := strings.Contains(logs, w); warned != (w == c.warn) {
					t.Errorf("warned %q %v, want %v\nlog: %s", w, warned, w == c.warn, logs)
				}
			}
		})
	}
}

// At the next start, an MPS original whose PID the first snapshot does
// not list (a sample may miss a running client) is neither closed nor
// restarted then: it is judged over the rounds' snapshots, as any process
// is (forgetGone). One that lists it within GoneAfter of the start has
// its cap set back by a restart, where its identity is still the
// client's; where none lists it within GoneAfter it is closed as gone,
// not restarted; a round that does not read the GPU tells nothing; an
// exit before it is told leaves it open for the next start. Before, the
// first snapshot alone closed it as gone, the running client's cap left
// on for good.
func TestMPSRestoreAtStartWaitsForListing(t *testing.T) {
	at := t0.Add(time.Hour)
	none := func(after time.Duration) *tenant.Snapshot {
		return tenantSnap(at.Add(after), proc{8, "batch"})
	}
	listed := func(after time.Duration) *tenant.Snapshot {
		return tenantSnap(at.Add(after), proc{10, "embed"}, proc{8, "batch"})
	}
	down := func(after time.Duration) *tenant.Snapshot {
		return snapshot(at.Add(after), []gpu.Device{{UUID: uuid0, Up: false, Err: "timed out"}}, nil)
	}
	const gone, other = "process gone; nothing to restore", "process gone, not restarted: PID 10"
	for _, c := range []struct {
		name   string
		rounds []*tenant.Snapshot // after the start's, which lists PID 8 alone
		start  uint64             // PID 10's under the procfs root after the start (500 then, as journaled)
		exit   bool               // the exit's restore after the rounds
		// restart: PID 10 restarted; closed: the restored record's
		// reason ("" for none: left open)
		restart bool
		closed  string
	}{
		{"listed by a later round", []*tenant.Snapshot{none(15 * time.Second), listed(30 * time.Second)}, 500, false, true, "restored at start"},
		{"listed, another process", []*tenant.Snapshot{listed(30 * time.Second)}, 900, false, false, other},
		{"not listed within GoneAfter, the procfs unreadable", []*tenant.Snapshot{none(30 * time.Second), none(GoneAfter), listed(GoneAfter + 15*time.Second)}, 0, false, false, gone},
		{"not listed within GoneAfter, the procfs showing it", []*tenant.Snapshot{none(30 * time.Second), none(GoneAfter), listed(GoneAfter + 15*time.Second)}, 500, false, false, gone},
		{"its GPU read down, then listed", []*tenant.Snapshot{down(30 * time.Second), listed(GoneAfter + 10*time.Second)}, 500, false, true, "restored at start"},
		{"exit before a round lists it", []*tenant.Snapshot{none(15 * time.Second)}, 500, true, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal")
			j := reopen(t, writeJournal(t, path, mpsOriginal(10, Identity{Boot: testBoot, Starts: []uint64{500}})), path)
			host := &idClients{boot: testBoot, starts: map[uint32]uint64{10: 500, 8: 50}}
			clk := gpu.NewManualClock(at)
			var logs lockedBuffer
			tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(host), Journal: j, Clock: clk, Mode: ModeEnforce, Logger: log.NewLogfmtLogger(&logs)})
			if err != nil {
				t.Fatal(err)
			}
			_, _ = tu.Recover(context.Background(), none(0))
			host.starts[10] = c.start // (another process's once the client is gone)
			if c.start == 0 {
				host.err = errors.New("permission denied") // (the procfs tells nothing)
			}
			if got := restartsOf(host.Calls); len(got) != 0 || len(j.Originals()) != 1 || tu.Status().Unrestored != 1 {
				t.Fatalf("at start: restarts %q, %d open, %d unrestored; want none, the original open and unrestored\nlog: %s", got, len(j.Originals()), tu.Status().Unrestored, logs.String())
			}
			for _, s := range c.rounds {
				clk.Set(s.Time)
				if _, err := tu.RunOnce(context.Background(), s); err != nil {
					t.Fatal(err)
				}
			}
			if c.exit {
				_, _ = tu.Restore(context.Background())
			}
			var want []string
			if c.restart {
				want = []string{"RestartClient(GPU-0,10)"}
			}
			if got := restartsOf(host.Calls); !slices.Equal(got, want) {
				t.Errorf("restarts %q, want %q\nlog: %s", got, want, logs.String())
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			open := len(j.Originals())
			if c.closed == "" && open != 1 || c.closed != "" && (open != 0 || !strings.Contains(string(b), c.closed)) {
				t.Errorf("%d originals open, want closed %q\njournal: %s", open, c.closed, b)
			}
			if u := tu.Status().Unrestored; u != open {
				t.Errorf("%d unrestored in the status, %d open in the journal", u, open)
			}
		})
	}
}
