package mps

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// The controller tells a client from a later process of its PID by the
// host's boot ID and the PID's start time, read under the procfs root it
// is given (a fake one here): a PID taken again reads another start time,
// one that no longer runs 0. Without a root it tells none
// (gpu.ErrNotSupported), as the simulator's MPS actuator.
func TestProcessStarts(t *testing.T) {
	if _, _, err := New(Options{}).ProcessStarts([]uint32{7}); !errors.Is(err, gpu.ErrNotSupported) {
		t.Errorf("without a procfs root: %v, want ErrNotSupported", err)
	}
	proc := t.TempDir()
	const boot = "0b6f5a3e-3c1d-4a7e-9b2f-5d8c7e6a1f00"
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(proc, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat := func(start int) string {
		return "7 (python3) S 1 7 7 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 " + strconv.Itoa(start) + " 1000 100 18446744073709551615\n"
	}
	c := New(Options{Processes: kube.NewProcReader(proc)})
	if _, _, err := c.ProcessStarts([]uint32{7}); err == nil {
		t.Error("no boot ID, and no error")
	}
	write("sys/kernel/random/boot_id", boot+"\n")
	for _, tc := range []struct {
		name string
		stat string // "": no process 7
		want uint64
	}{
		{"client", stat(4242), 4242},
		{"PID taken again", stat(5151), 5151},
		{"gone", "", 0},
	} {
		_ = os.RemoveAll(filepath.Join(proc, "7"))
		if tc.stat != "" {
			write("7/stat", tc.stat)
		}
		got, starts, err := c.ProcessStarts([]uint32{7})
		if err != nil || got != boot || !slices.Equal(starts, []uint64{tc.want}) {
			t.Errorf("%s: ProcessStarts = %q, %v, %v; want %q, [%d]", tc.name, got, starts, err, boot, tc.want)
		}
	}
}
