package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command/commandtest"
)

// The MPS actuator the exporter detects tells its clients apart under
// --proc.root (a fake procfs here), so that the tuner journals a client's
// identity with its original cap and restarts it, to set the cap back,
// only where its PID still names it.
func TestMPSActuatorReadsProcRoot(t *testing.T) {
	f := commandtest.New(t)
	pipe := filepath.Join(f.Dir, "pipe")
	proc := filepath.Join(f.Dir, "proc")
	const boot = "0b6f5a3e-3c1d-4a7e-9b2f-5d8c7e6a1f00"
	for p, s := range map[string]string{
		"sys/kernel/random/boot_id": boot + "\n",
		"7/stat":                    "7 (python3) S 1 7 7 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 4242 1000 100 18446744073709551615\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(proc, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(pipe, 0o755); err != nil {
		t.Fatal(err)
	}
	mpsBin := f.Script(t, "mps-control", `echo 100.0`)
	cfg := &config{Backend: backendNVML, ProcRoot: proc, Actuators: actuatorConfig{MPSControlBinary: mpsBin, MPSPipeDirectory: pipe}}
	for _, b := range detectActuators(context.Background(), cfg, nil, log.NewNopLogger()) {
		if b.Name != "mps" {
			continue
		}
		s, ok := b.Impl.(gpu.ProcessStarter)
		if !ok {
			t.Fatalf("the MPS actuator %T tells no processes apart", b.Impl)
		}
		got, starts, err := s.ProcessStarts([]uint32{7})
		if err != nil || got != boot || len(starts) != 1 || starts[0] != 4242 {
			t.Errorf("ProcessStarts = %q, %v, %v; want %q, [4242] from --proc.root", got, starts, err, boot)
		}
		return
	}
	t.Fatal("no MPS actuator detected")
}
