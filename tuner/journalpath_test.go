package tuner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A --tuner.journal that is a symbolic link (to a persistent volume) stays
// one: the compaction rewrites the file it links to. Before, the rename
// of the compacted file replaced the link with a regular file beside it,
// and the linked file kept its records, originals open, for whoever read
// it next. A link to a file not there yet creates that file, and a chain
// of links, relative ones included, is followed to its end.
func TestJournalThroughASymlinkCompactsItsTarget(t *testing.T) {
	closed := func(t *testing.T, p string) {
		t.Helper()
		j := openJournal(t, p)
		rec := originalRec("GPU-0", 700)
		if err := j.Append(rec); err != nil {
			t.Fatal(err)
		}
		rec.Event = EventRestored
		if err := j.Append(rec); err != nil {
			t.Fatal(err)
		}
		if err := j.Append(Record{Time: t0, Event: EventOriginal, Target: Target{GPU: "GPU-1", Knob: gpu.KnobPowerLimit}, From: encodeValue(Watts(300))}); err != nil {
			t.Fatal(err)
		}
		j.Close()
	}
	for _, tc := range []struct {
		name string
		link func(t *testing.T, dir, target string) string // the path given
		made bool                                          // the target written before the open
	}{
		{"an absolute link", func(t *testing.T, dir, target string) string {
			return symlink(t, target, filepath.Join(dir, "link"))
		}, true},
		{"a relative link, to a link", func(t *testing.T, dir, target string) string {
			rel, _ := filepath.Rel(dir, target)
			mid := symlink(t, rel, filepath.Join(dir, "mid"))
			return symlink(t, "mid", filepath.Join(filepath.Dir(mid), "link"))
		}, true},
		{"a link to no file yet", func(t *testing.T, dir, target string) string {
			return symlink(t, target, filepath.Join(dir, "link"))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			vol := filepath.Join(dir, "volume")
			if err := os.Mkdir(vol, 0o700); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(vol, "journal")
			if tc.made {
				closed(t, target)
			}
			p := tc.link(t, dir, target)
			if !tc.made {
				closed(t, p)
			}
			j := openJournal(t, p) // compacts: a record more than the open original
			j.Close()
			if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("%s is no longer a link (%v, %v)", p, fi.Mode(), err)
			}
			b, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(b), "\n"); n != 1 || !strings.Contains(string(b), "GPU-1") {
				t.Errorf("the linked file holds %d records, want GPU-1's original alone (compacted):\n%s", n, b)
			}
			if left, _ := filepath.Glob(target + ".tmp*"); len(left) > 0 {
				t.Errorf("the compaction's temporary file was left: %v", left)
			}
			origs, err := ReadJournalOriginals(p)
			if err != nil || len(origs) != 1 || origs[0].Target.GPU != "GPU-1" {
				t.Errorf("read through the link: %+v, %v; want GPU-1's original", origs, err)
			}
		})
	}
}

// symlink makes a link at p to to and returns p.
func symlink(t *testing.T, to, p string) string {
	t.Helper()
	if err := os.Symlink(to, p); err != nil {
		t.Fatal(err)
	}
	return p
}
