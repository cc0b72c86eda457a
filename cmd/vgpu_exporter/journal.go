package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// journalCommand is the first argument that runs the operator's view of
// the tuner journal (runJournal) instead of the exporter.
const journalCommand = "journal"

// runJournal lists the originals the tuner journal holds open, what the
// next start restores, and with --drop or --drop-gpu closes those no start
// can restore (set back by hand, a GPU gone for good). It returns the
// process exit status.
func runJournal(args []string, stdout, stderr io.Writer, now func() time.Time) int {
	app := kingpin.New("vgpu_exporter "+journalCommand, "Lists the settings the tuner journal holds open (the originals the next start restores) and drops those no start can restore. Dropping needs the exporter stopped: it takes the journal's lock.")
	app.UsageWriter(stdout)
	app.ErrorWriter(stderr)
	helped := false
	app.Terminate(func(int) { helped = true })
	app.HelpFlag.Short('h')
	path := app.Flag("tuner.journal", "The tuner journal file (the exporter's --tuner.journal).").PlaceHolder("FILE").Required().String()
	keys := app.Flag("drop", "Close the original of this target, as listed (GPU/knob or GPU/knob/pidN); repeatable.").PlaceHolder("TARGET").Strings()
	gpus := app.Flag("drop-gpu", "Close every original of this GPU (UUID); repeatable.").PlaceHolder("UUID").Strings()
	why := app.Flag("reason", "Why the originals are dropped, kept in the journal (needed with --drop and --drop-gpu).").PlaceHolder("TEXT").String()
	_, err := app.Parse(args)
	if helped {
		return 0
	}
	if err == nil && *path == "" {
		// an unset variable: not "no journal there, nothing to restore"
		err = errors.New("--tuner.journal needs a file: the exporter's journal")
	}
	if err != nil {
		fmt.Fprintf(stderr, "vgpu_exporter %s: %v\n", journalCommand, err)
		return 2
	}
	if len(*keys) == 0 && len(*gpus) == 0 {
		if _, err := os.Lstat(*path); errors.Is(err, fs.ErrNotExist) {
			return noJournal(*path, stdout, stderr)
		}
		open, st, err := tuner.ReadJournal(*path)
		if err != nil {
			fmt.Fprintf(stderr, "vgpu_exporter %s: %v\n", journalCommand, err)
			return 1
		}
		writeOriginals(stdout, open)
		return droppedRecords(stderr, *path, st, "not listed")
	}
	dropped, st, err := tuner.DropJournalOriginals(*path, *keys, *gpus, *why, now())
	if len(dropped) > 0 {
		fmt.Fprintf(stdout, "dropped from %s (set them back by hand if not done; the next start will not):\n", *path)
		writeOriginals(stdout, dropped)
	}
	// the drop's open removed them from the file, as a start's does: said
	rc := droppedRecords(stderr, *path, st, "removed from the file as the drop opened it")
	if err != nil {
		fmt.Fprintf(stderr, "vgpu_exporter %s: %v\n", journalCommand, err)
		return 1
	}
	return rc
}

// noJournal says that no journal is at path, and returns the exit status:
// 0 where its directory is there (none written yet: nothing for a start to
// restore), with the path made absolute, so that another path than the
// exporter's shows; 1 where the directory is not there either (a mistyped
// path, not the all clear of a journal never written).
func noJournal(path string, stdout, stderr io.Writer) int {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	dir := filepath.Dir(abs)
	if _, err := os.Stat(dir); err != nil {
		fmt.Fprintf(stderr, "vgpu_exporter %s: no journal at %s, and its directory %s is not there either: a mistyped --tuner.journal? (give the exporter's)\n", journalCommand, abs, dir)
		return 1
	}
	fmt.Fprintf(stdout, "no journal at %s (none written yet, or not the exporter's --tuner.journal): nothing for a start to restore\n", abs)
	return 0
}

// droppedRecords says what the read of the journal at path dropped (done:
// not listed, or removed), and
// returns the exit status: 1 where a record inside the file could not be
// trusted (an original it held is lost, and not listed), 0 where at most
// a torn tail was cut (a write a crash cut short, whose change was not
// made).
func droppedRecords(w io.Writer, path string, st tuner.JournalStats, done string) int {
	var bad []string
	for _, r := range tuner.JournalDropReasons {
		if n := st.Dropped[r]; n > 0 && r != "torn" {
			bad = append(bad, fmt.Sprintf("%d %s", n, r))
		}
	}
	if st.TornBytes > 0 {
		fmt.Fprintf(w, "vgpu_exporter %s: %s ends in a torn record of %d bytes (a write a crash or a full disk cut short), %s\n", journalCommand, path, st.TornBytes, cmp.Or(strings.TrimPrefix(done, "not listed"), "not read"))
	}
	if len(bad) == 0 {
		return 0
	}
	fmt.Fprintf(w, "vgpu_exporter %s: %s holds records that cannot be trusted (%s), %s: an original one of them held is lost, and no start restores it: check the GPUs' settings by hand\n", journalCommand, path, strings.Join(bad, ", "), done)
	for _, b := range st.Bad {
		fmt.Fprintf(w, "  %s:%d (byte %d): %s: %s\n", path, b.Line, b.Offset, b.Reason, b.Detail)
	}
	return 1
}

// writeOriginals writes the originals as a table, or says there are none.
func writeOriginals(w io.Writer, open []tuner.Original) {
	if len(open) == 0 {
		fmt.Fprintln(w, "no original open: nothing for a start to restore")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tTENANT\tORIGINAL\tLAST SET\tSINCE\tPIDS")
	for _, o := range open {
		var pids []string
		for _, p := range o.PIDs {
			pids = append(pids, fmt.Sprint(p))
		}
		v := ""
		if o.Value != nil {
			v = o.Value.String()
		}
		set := "" // the value the tuner last set, as journaled
		if o.Set != nil {
			set = o.Set.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", o.Target, dash(o.Tenant), dash(v), dash(set), o.At.UTC().Format(time.RFC3339), dash(strings.Join(pids, ",")))
	}
	tw.Flush()
}

// dash is s, or "-" for an empty s.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
