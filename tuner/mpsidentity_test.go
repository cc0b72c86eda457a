package tuner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// idClients is an MPS actuator that tells its clients apart (as the
// host's procfs does): the boot ID and the start time of each running
// PID; its restarts go on under a new PID where next names one.
type idClients struct {
	successorHost
	boot   string
	starts map[uint32]uint64
	err    error
}

var _ gpu.ProcessStarter = (*idClients)(nil)

func (c *idClients) ProcessStarts(pids []uint32) (string, []uint64, error) {
	return processStarts(c.boot, c.starts, c.err, pids)
}

// mpsOriginal is the original record of the MPS client pid's cap (100%),
// with id.
func mpsOriginal(pid uint32, id Identity) Record {
	return Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: pid}, Tenant: "embed", From: encodeValue(Fraction(1))}.withIdentity(id)
}

// mpsCapHalved is a tuner over host in enforce mode with a journal at a
// new path (returned) that halves the MPS client PID 7's cap (its restart
// goes on as another PID where host.next names one), then sees pid on the
// GPU with that cap for two rounds, deciding nothing more.
func mpsCapHalved(t *testing.T, host *idClients, pid uint32) (*Tuner, *Journal, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, path)
	t.Cleanup(func() { _ = j.Close() })
	clk := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: fixed{mpsAction(7, 1, 0.5)}, Actuators: ActuatorsOf(host), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	tu.o.Policy = fixed(nil)
	half := 0.5
	for range 2 {
		clk.Advance(15 * time.Second)
		s := snapshot(clk.Now(), []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(pid, &half), mpsProc(8, nil)}}}, nil)
		if _, err := tu.RunOnce(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	return tu, j, path
}

// restartsOf are the client restarts among calls.
func restartsOf(calls []string) []string {
	return slices.DeleteFunc(slices.Clone(calls), func(c string) bool { return !strings.HasPrefix(c, "RestartClient(") })
}

// An MPS original journaled with its client's identity is set back at
// the next start (a client restart by PID) only where the PID still
// names that client: one another process holds now (another start time,
// or another boot) is not restarted, its original closed as gone, saying
// which PID and why, and a warning logged. An unchanged client is still
// restarted, and so is a record without identity (an earlier version's),
// or one the actuator cannot check now.
func TestMPSRestoreAtStartChecksIdentity(t *testing.T) {
	ided := Identity{Boot: testBoot, Starts: []uint64{100}}
	for _, c := range []struct {
		name    string
		id      Identity
		boot    string
		start   uint64
		err     error
		restart bool
		why     string
		// left: the restore_failed reason (the original stays open)
		left string
		// recoverErr: Recover's error ("": none)
		recoverErr string
	}{
		{"reused PID", ided, testBoot, 200, nil, false, "PID 7 (another process holds it now, or none)", "", ""},
		{"after a reboot", ided, otherBoot, 100, nil, false, "PID 7 (journaled before the host's last boot)", "", ""},
		{"unchanged client", ided, testBoot, 100, nil, true, "", "", ""},
		{"record without identity", Identity{}, testBoot, 200, nil, true, "", "", ""},
		{"record without identity, unreadable now", Identity{}, "", 0, errors.New("no procfs"), true, "", "", ""},
		// journaled and not readable now (boot_id unreadable, EACCES):
		// left for the next start, as a PID no snapshot tells running
		{"identity unreadable now", ided, "", 0, errors.New("no procfs"), false, "",
			"the identity of PID 7 journaled with its original cannot be read now (no procfs)",
			"restore GPU-0/mps_active_threads/pid7 to 100%: the identity of PID 7 journaled with its original cannot be read now (no procfs), and a client restart by PID could restart another process: left for the next start"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal")
			j := reopen(t, writeJournal(t, path, mpsOriginal(7, c.id)), path)
			host := &idClients{boot: c.boot, starts: map[uint32]uint64{7: c.start, 8: 50}, err: c.err} // (a host's root: PID 8 too)
			var buf bytes.Buffer
			at := t0.Add(time.Hour)
			tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(host), Journal: j, Clock: gpu.NewManualClock(at), Mode: ModeEnforce,
				Logger: log.NewLogfmtLogger(log.NewSyncWriter(&buf))})
			if err != nil {
				t.Fatal(err)
			}
			_, err = tu.Recover(context.Background(), emptySnap(at)) // (PID 7 listed on the GPU)
			if got := fmt.Sprint(err); err == nil && c.recoverErr != "" || err != nil && got != c.recoverErr {
				t.Errorf("Recover: %v, want %q", got, c.recoverErr)
			}
			var want []string
			if c.restart {
				want = []string{"RestartClient(GPU-0,7)"}
			}
			if got := restartsOf(host.Calls); !slices.Equal(got, want) {
				t.Errorf("restarts %q, want %q", got, want)
			}
			if o := j.Originals(); len(o) != 0 && c.left == "" || len(o) != 1 && c.left != "" {
				t.Errorf("originals left open: %+v, want one: %v", o, c.left != "")
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if failed := strings.Contains(string(b), `"restore_failed"`) && strings.Contains(string(b), c.left); failed != (c.left != "") {
				t.Errorf("restore_failed (%s) %v, want %v\njournal: %s", c.left, failed, c.left != "", b)
			}
			closed := strings.Contains(string(b), "process gone, not restarted: "+c.why)
			warned := strings.Contains(buf.String(), "not restarted")
			if gone := c.why != ""; closed != gone || warned != gone {
				t.Errorf("closed as gone (%s) %v, warned %v; want %v\njournal: %s\nlog: %s", c.why, closed, warned, gone, b, buf.String())
			}
		})
	}
}

// The identity is read just before the cap is first changed and journaled
// with the original, and a client's successor's as its original follows
// it; the restore at exit restarts the PID only where its process is
// still the one journaled. Where the actuator could not tell the client
// then, the original has none and is restored by PID, as before.
func TestMPSRestoreAtExitChecksIdentity(t *testing.T) {
	for _, c := range []struct {
		name string
		// successor: the change's restart goes on as PID 9
		successor bool
		errFirst  bool   // no identity when the cap is changed
		later     uint64 // the start time of the PID at exit
		restart   bool
	}{
		{"reused PID", false, false, 200, false},
		{"unchanged client", false, false, 100, true},
		{"original without identity", false, true, 200, true},
		{"successor's PID reused", true, false, 400, false},
		{"successor unchanged", true, false, 300, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			host := &idClients{boot: testBoot, starts: map[uint32]uint64{7: 100, 8: 50, 9: 300}}
			pid, start := uint32(7), uint64(100)
			if c.successor {
				host.next, pid, start = map[uint32]uint32{7: 9}, 9, 300
			}
			if c.errFirst {
				host.err = errors.New("no procfs")
			}
			tu, j, _ := mpsCapHalved(t, host, pid)
			o := j.Originals()
			wantID := Identity{Boot: testBoot, Starts: []uint64{start}}
			if c.errFirst {
				wantID = Identity{}
			}
			if len(o) != 1 || o[0].Target.PID != pid || o[0].Boot != wantID.Boot || !slices.Equal(o[0].Starts, wantID.Starts) {
				t.Fatalf("journaled originals %+v, want PID %d's with %+v", o, pid, wantID)
			}
			host.err, host.starts[pid], host.Calls = nil, c.later, nil
			if _, err := tu.Restore(context.Background()); err != nil {
				t.Errorf("restore at exit: %v, want none", err)
			}
			var want []string
			if c.restart {
				want = []string{fmt.Sprintf("RestartClient(GPU-0,%d)", pid)}
			}
			if got := restartsOf(host.Calls); !slices.Equal(got, want) {
				t.Errorf("restarts at exit %q, want %q", got, want)
			}
			if o := j.Originals(); len(o) != 0 {
				t.Errorf("originals left open: %+v", o)
			}
		})
	}
}

// A journal takes an MPS client's identity only in its original, for the
// target's PID, in "client": a boot ID that is a UUID and a start time
// within bounds, not 0. Not in "boot" and "starts", which stay a pause's
// alone, by the rule and with the words of earlier versions.
func TestMPSIdentityRecords(t *testing.T) {
	ided := Identity{Boot: testBoot, Starts: []uint64{100}}
	client := func(boot string, start uint64) Record {
		r := mpsOriginal(7, Identity{})
		r.Client = &ClientIdentity{Boot: boot, Start: start}
		return r
	}
	restored := mpsOriginal(7, ided)
	restored.Event = EventRestored
	pause := Record{Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 7}, Tenant: "train", From: encodeValue(Duty(0)), PIDs: []uint32{7},
		Client: &ClientIdentity{Boot: testBoot, Start: 100}}
	oldField := mpsOriginal(7, Identity{})
	oldField.Identity = ided
	const refused = "process start times in a original record of mps_active_threads: only a pause's original and processes records have them"
	for _, c := range []struct {
		name string
		r    Record
		err  string // "": valid
	}{
		{"original", mpsOriginal(7, ided), ""},
		{"original without", mpsOriginal(7, Identity{}), ""},
		{"start time at the bound", client(testBoot, maxJournalTicks), ""},
		{"start time 0", client(testBoot, 0), `client identity ("client"): start time 0 out of range`},
		{"start time beyond the bound", client(testBoot, maxJournalTicks+1), `client identity ("client"): start time 281474976710657 out of range`},
		{"boot not a UUID", client("x", 100), `client identity ("client"): boot ID "x" is not a UUID`},
		{"boot in capitals", client(strings.ToUpper(testBoot), 100), "is not a UUID"},
		{"no boot", client("", 100), "is not a UUID"},
		{"restored record", restored, `client identity ("client") in a restored record of GPU-0/mps_active_threads/pid7: only an MPS client's original`},
		{"no PID", mpsOriginal(0, ided), `client identity ("client") in a original record of GPU-0/mps_active_threads:`},
		{"a pause's original", pause, `client identity ("client") in a original record of GPU-0/pause_duty/pid7:`},
		{"boot and starts (a pause's fields)", oldField, refused},
	} {
		err := validRecord(c.r)
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: validRecord = %v, want %q", c.name, err, c.err)
		}
	}
}

// mpsOriginalLines are the MPS original records in the journal at path,
// each as its JSON object, keyed by PID.
func mpsOriginalLines(t *testing.T, path string) map[uint32][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint32][]byte{}
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		rec, why := parseRecord(line)
		if why != "" || rec.Event != EventOriginal || rec.Target.Knob != gpu.KnobMPSActiveThreads {
			continue
		}
		out[rec.Target.PID] = bytes.TrimSpace(line[bytes.IndexByte(line, '{'):])
	}
	return out
}

// An MPS original written by the tuner (as the cap is first changed, as
// it follows the client's successor, as the journal is compacted) names
// its client in "client", which an older version ignores, never in "boot"
// and "starts", which an older version refuses outside a pause's records,
// and so would drop the original as invalid and never set that cap back.
// Read as an older version reads it ("client" left out), each is valid and
// keeps its original (restored by PID); read as this one, its identity.
func TestMPSOriginalReadByAnOlderVersion(t *testing.T) {
	host := &idClients{boot: testBoot, starts: map[uint32]uint64{7: 100, 9: 300}}
	host.next = map[uint32]uint32{7: 9} // the change's restart goes on as PID 9
	_, j, path := mpsCapHalved(t, host, 9)
	check := func(when string, want map[uint32]uint64) {
		t.Helper()
		lines := mpsOriginalLines(t, path)
		if len(lines) != len(want) {
			t.Fatalf("%s: MPS originals of PIDs %v, want %v", when, slices.Sorted(maps.Keys(lines)), slices.Sorted(maps.Keys(want)))
		}
		for pid, start := range want {
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(lines[pid], &fields); err != nil {
				t.Fatal(err)
			}
			_, boot := fields["boot"]
			_, starts := fields["starts"]
			_, client := fields["client"]
			if boot || starts || !client {
				t.Errorf("%s: PID %d's original %s: boot %v, starts %v, client %v; want client alone", when, pid, lines[pid], boot, starts, client)
			}
			delete(fields, "client") // as an older version reads it: a field it does not know
			older, err := json.Marshal(fields)
			if err != nil {
				t.Fatal(err)
			}
			var rec Record
			if err := json.Unmarshal(older, &rec); err != nil {
				t.Fatal(err)
			}
			if err := validRecord(rec); err != nil {
				t.Errorf("%s: PID %d's original read by an older version: %v (%s)", when, pid, err, older)
			}
			if err := json.Unmarshal(lines[pid], &rec); err != nil {
				t.Fatal(err)
			}
			if id := rec.identity(); id.Boot != testBoot || !slices.Equal(id.Starts, []uint64{start}) || validRecord(rec) != nil {
				t.Errorf("%s: PID %d's original reads back as %+v (%v), want start %d", when, pid, id, validRecord(rec), start)
			}
		}
	}
	check("as written", map[uint32]uint64{7: 100, 9: 300})
	if err := j.Compact(); err != nil {
		t.Fatal(err)
	}
	check("compacted", map[uint32]uint64{9: 300})
	if o := reopen(t, j, path).Originals(); len(o) != 1 || o[0].Target.PID != 9 || o[0].Boot != testBoot || !slices.Equal(o[0].Starts, []uint64{300}) {
		t.Errorf("originals read again %+v, want PID 9's with its identity", o)
	}
}

// An MPS original adopted from a journal renamed over this one is set
// back at exit by the same rule: its PID restarted only where it still
// names the client journaled with it.
func TestMPSAdoptedOriginalChecksIdentity(t *testing.T) {
	for _, c := range []struct {
		name    string
		start   uint64 // PID 8's at exit; journaled: 100
		restart bool
	}{
		{"reused PID", 200, false},
		{"unchanged client", 100, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			host := &idClients{boot: testBoot, starts: map[uint32]uint64{7: 50, 8: c.start}}
			var logs lockedBuffer
			tu, p := replacedJournalTuner(t, host, fixed(nil), &logs)
			if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
				t.Fatal(err)
			}
			put := filepath.Join(filepath.Dir(p), "put")
			writeJournal(t, put, mpsOriginal(8, Identity{Boot: testBoot, Starts: []uint64{100}})).Close()
			if err := os.Rename(put, p); err != nil {
				t.Fatal(err)
			}
			if _, err := tu.Restore(context.Background()); err != nil {
				t.Errorf("restore at exit: %v, want none", err)
			}
			var want []string
			if c.restart {
				want = []string{"RestartClient(GPU-0,8)"}
			}
			if got := restartsOf(host.Calls); !slices.Equal(got, want) {
				t.Errorf("restarts at exit %q, want %q (log: %s)", got, want, logs.String())
			}
			if o := journalOriginalsAt(t, p); len(o) != 0 {
				t.Errorf("journal originals after the exit %+v, want none", o)
			}
		})
	}
}
