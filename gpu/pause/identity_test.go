package pause

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// The pauser tells the processes it pauses apart by the host's boot ID
// and each PID's start time (field 22 of /proc/PID/stat, counted after
// the command name's last ')', which may hold spaces and parentheses of
// its own), 0 for a PID that does not run; without a boot ID it cannot
// tell, an error.
func TestProcessStarts(t *testing.T) {
	proc := t.TempDir()
	const boot = "0b6f5a3e-3c1d-4a7e-9b2f-5d8c7e6a1f00"
	stat := func(comm string, start int) string {
		return "7 (" + comm + ") S 1 7 7 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 " + strconv.Itoa(start) + " 1000 100 18446744073709551615\n"
	}
	files := map[string]string{
		"sys/kernel/random/boot_id": boot + "\n",
		"7/stat":                    stat("python3", 4242),
		"8/stat":                    stat("a ) (b) c", 4343),
	}
	pauser, err := New(Options{Clock: gpu.NewManualClock(time.Unix(0, 0)), ProcRoot: proc})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pauser.ProcessStarts([]uint32{7}); err == nil {
		t.Error("no boot ID, and no error")
	}
	for p, s := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(proc, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, starts, err := pauser.ProcessStarts([]uint32{7, 8, 9})
	if err != nil || got != boot || !slices.Equal(starts, []uint64{4242, 4343, 0}) {
		t.Errorf("ProcessStarts = %q, %v, %v; want %q, [4242 4343 0]", got, starts, err, boot)
	}
	if err := os.WriteFile(filepath.Join(proc, "7", "stat"), []byte("7 (x) S 1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pauser.ProcessStarts([]uint32{7}); err == nil {
		t.Error("a stat line without a start time, and no error")
	}
}
