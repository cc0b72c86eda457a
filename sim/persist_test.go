package sim

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
)

// TestReadPersistedRefusesWhatIsNotItsFile: --sim.settings-file naming a
// FIFO, a directory or a file over the limit is refused at once, naming
// the path; the read of a FIFO used to block the exporter's start for
// good, before it served anything.
func TestReadPersistedRefusesWhatIsNotItsFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte("["+strings.Repeat(" ", maxPersistedBytes)+"]"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
		tooLarge         bool
	}{
		{"a FIFO", fifo, "not a regular file", false},
		{"a directory", dir, "is a directory", false},
		{"over the limit", big, "larger than the limit", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := ReadPersisted(tc.path)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("ReadPersisted(%s): %v, want an error naming it and %q", tc.path, err, tc.want)
				}
				if tc.tooLarge && !errors.Is(err, fileread.ErrTooLarge) {
					t.Errorf("ReadPersisted(%s): %v, want fileread.ErrTooLarge", tc.path, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("ReadPersisted(%s) still reading after 5s", tc.path)
			}
		})
	}
	// A file not there yet is no settings, not an error.
	if set, err := ReadPersisted(filepath.Join(dir, "none")); set != nil || err != nil {
		t.Errorf("ReadPersisted of no file: %v, %v; want nothing", set, err)
	}
}
