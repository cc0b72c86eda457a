package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `vgpu_exporter journal` lists what the next start restores, and drops,
// with a reason, what no start can; the drop is kept in the journal.
func TestJournalCommand(t *testing.T) {
	const (
		power = `{"time":"2026-01-01T00:00:00Z","event":"original","target":{"gpu":"GPU-0","knob":"power_limit"},"from":{"kind":"watts","num":700}}` + "\n"
		pause = `{"time":"2026-01-01T00:00:00Z","event":"original","target":{"gpu":"GPU-1","knob":"pause_duty","pid":7},"tenant":"train","from":{"kind":"duty","num":0},"pids":[7,8]}` + "\n"
		// the value the tuner last set, listed beside the original
		set = `{"time":"2026-01-01T00:00:01Z","event":"applied","target":{"gpu":"GPU-0","knob":"power_limit"},"from":{"kind":"watts","num":700},"to":{"kind":"watts","num":490}}` + "\n"
	)
	journal := filepath.Join(t.TempDir(), "journal")
	if err := os.WriteFile(journal, []byte(power+pause+set), 0o600); err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC) }
	steps := []struct {
		args     []string
		rc       int
		out, err string // substrings
		notOut   string
	}{
		{args: nil, rc: 2, err: "--tuner.journal"},
		// an unset variable: not "no journal there, nothing to restore"
		{args: []string{"--tuner.journal="}, rc: 2, err: "--tuner.journal needs a file"},
		{args: []string{"--help"}, rc: 0, out: "--drop-gpu"},
		{args: []string{"--tuner.journal=" + journal}, rc: 0, out: "GPU-1/pause_duty/pid7  train   0%        -"},
		{args: []string{"--tuner.journal=" + journal}, rc: 0, out: "GPU-0/power_limit      -       700W      490W"},
		{args: []string{"--tuner.journal=" + journal, "--drop-gpu=GPU-1"}, rc: 1, err: "a reason is needed"},
		{args: []string{"--tuner.journal=" + journal, "--drop-gpu=GPU-9", "--drop=GPU-0/power_limit", "--reason=x"}, rc: 1, err: `GPU "GPU-9" has no open original`},
		{args: []string{"--tuner.journal=" + journal}, rc: 0, out: "GPU-0/power_limit", notOut: "no original open"},
		{args: []string{"--tuner.journal=" + journal, "--drop-gpu=GPU-1", "--reason=thawed by hand"}, rc: 0, out: "dropped from"},
		{args: []string{"--tuner.journal=" + journal}, rc: 0, out: "GPU-0/power_limit", notOut: "GPU-1"},
		{args: []string{"--tuner.journal=" + journal, "--drop=GPU-0/power_limit", "--reason=GPU replaced"}, rc: 0, out: "700W"},
		{args: []string{"--tuner.journal=" + journal}, rc: 0, out: "no original open"},
		// none written yet in the journal's directory: said, by the
		// absolute path, exit 0; a directory not there either is a
		// mistyped path, not the all clear
		{args: []string{"--tuner.journal=" + journal + ".missing"}, rc: 0, out: "no journal at " + journal + ".missing (none written yet"},
		{args: []string{"--tuner.journal=" + filepath.Join(filepath.Dir(journal)+".typo", "journal")}, rc: 1,
			err: "no journal at " + filepath.Join(filepath.Dir(journal)+".typo", "journal") + ", and its directory " + filepath.Dir(journal) + ".typo is not there either: a mistyped --tuner.journal?"},
	}
	for i, s := range steps {
		var out, errb bytes.Buffer
		if rc := runJournal(s.args, &out, &errb, now); rc != s.rc {
			t.Fatalf("step %d %q: exit %d, want %d; stdout %q stderr %q", i, s.args, rc, s.rc, out.String(), errb.String())
		}
		if !strings.Contains(out.String(), s.out) || !strings.Contains(errb.String(), s.err) {
			t.Errorf("step %d %q: stdout %q stderr %q, want %q and %q", i, s.args, out.String(), errb.String(), s.out, s.err)
		}
		if s.notOut != "" && strings.Contains(out.String(), s.notOut) {
			t.Errorf("step %d %q: stdout %q has %q", i, s.args, out.String(), s.notOut)
		}
	}
	b, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	// (the first drop's record went with the compaction of the next open)
	if !strings.Contains(string(b), `"reason":"dropped by hand, not restored by the tuner: GPU replaced"`) {
		t.Errorf("the last drop is not in the journal:\n%s", b)
	}
}

// The listing says what it could not read: records inside the file that
// cannot be trusted (an original they held is not listed) end it with
// exit status 1, and so does a file that is not a journal; a torn tail (a write a crash cut short) is said, exit 0.
func TestJournalCommandDroppedRecords(t *testing.T) {
	const power = `{"time":"2026-01-01T00:00:00Z","event":"original","target":{"gpu":"GPU-0","knob":"power_limit"},"from":{"kind":"watts","num":700}}` + "\n"
	for _, c := range []struct {
		name, text string
		rc         int
		err        string
	}{
		{"whole", power, 0, ""},
		{"a corrupt record inside", "not a record\n" + power, 1, "cannot be trusted (1 corrupt)"},
		// where it was, and what it was: the setting to check by hand
		{"named by its line", power + "not a record\n" + power, 1, `journal:2 (byte 131): corrupt: not a record: "not a record"`},
		{"naming its setting", power + strings.Replace(power, "GPU-0", "GPU-1", 1) + strings.Replace(power, "700", "20000", 1) + power, 1,
			`journal:3 (byte 262): invalid: watts value 20000W out of range; it reads as "original" of "GPU-0/power_limit"`},
		{"not a journal", "hello\nworld\n", 1, "not a tuner journal, left as it is"},
		{"a torn tail", power + `{"time":"2026-01-01T00:00:01Z","ev`, 0, "ends in a torn record of"},
	} {
		t.Run(c.name, func(t *testing.T) {
			journal := filepath.Join(t.TempDir(), "journal")
			if err := os.WriteFile(journal, []byte(c.text), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			rc := runJournal([]string{"--tuner.journal=" + journal}, &out, &errb, time.Now)
			if rc != c.rc || !strings.Contains(errb.String(), c.err) || c.err == "" && errb.Len() > 0 {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", rc, errb.String(), c.rc, c.err)
			}
		})
	}
}

// A drop opens the journal as a start does, whose compaction removes the
// records that cannot be trusted from the file: the drop says so, naming
// each, with exit status 1, as the listing does. Before, it said nothing:
// the records, and the settings they named, were gone without a word.
func TestJournalDropSaysWhatItRemoved(t *testing.T) {
	const power = `{"time":"2026-01-01T00:00:00Z","event":"original","target":{"gpu":"GPU-0","knob":"power_limit"},"from":{"kind":"watts","num":700}}` + "\n"
	journal := filepath.Join(t.TempDir(), "journal")
	text := power + "not a record\n" + strings.Replace(power, "GPU-0", "GPU-1", 1) + `{"time":"2026-01-01T00:00:01Z","ev`
	if err := os.WriteFile(journal, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	rc := runJournal([]string{"--tuner.journal=" + journal, "--drop-gpu=GPU-1", "--reason=set back by hand"}, &out, &errb, time.Now)
	for _, w := range []string{
		"cannot be trusted (1 corrupt), removed from the file as the drop opened it",
		journal + `:2 (byte 131): corrupt: not a record: "not a record"`,
		"ends in a torn record of 34 bytes (a write a crash or a full disk cut short), removed from the file as the drop opened it",
	} {
		if !strings.Contains(errb.String(), w) {
			t.Errorf("stderr %q, want %q", errb.String(), w)
		}
	}
	if rc != 1 || !strings.Contains(out.String(), "dropped from") || !strings.Contains(out.String(), "GPU-1/power_limit") {
		t.Errorf("exit %d, stdout %q; want 1 and GPU-1's original dropped", rc, out.String())
	}
	b, err := os.ReadFile(journal)
	if err != nil {
		t.Fatalf("reading the journal at %s after the drop: %v", journal, err)
	}
	if strings.Contains(string(b), "not a record") {
		t.Errorf("the file still holds the record said removed:\n%s", b)
	}
}

// A relative --tuner.journal with no journal there is said by its
// absolute path, so that a path other than the exporter's shows.
func TestJournalCommandNoJournalAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	var out, errb bytes.Buffer
	if rc := runJournal([]string{"--tuner.journal=journal"}, &out, &errb, func() time.Time { return time.Time{} }); rc != 0 {
		t.Fatalf("exit %d, want 0; stderr %q", rc, errb.String())
	}
	if want := "no journal at " + filepath.Join(dir, "journal") + " "; !strings.Contains(out.String(), want) {
		t.Errorf("stdout %q lacks %q", out.String(), want)
	}
}
