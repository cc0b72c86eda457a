// Package systemd tests the systemd unit files of this directory.
package systemd

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/deploy/internal/repo"
)

const installedBin = "/usr/local/bin/vgpu_exporter"

func TestMain(m *testing.M) {
	code := m.Run()
	repo.Cleanup()
	os.Exit(code)
}

// settings reads key=value lines of a unit or environment file (comments
// and section headers left out); a key given twice keeps every value.
func settings(t *testing.T, file string) map[string][]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: line %q is not key=value", file, line)
		}
		out[k] = append(out[k], v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHardening checks what the unit promises: a read-only system, no new
// privileges, no capabilities, only the GPUs' device nodes, flags from the
// environment file.
func TestHardening(t *testing.T) {
	s := settings(t, "vgpu_exporter.service")
	for _, tc := range []struct{ key, want string }{
		{"ProtectSystem", "strict"},
		{"NoNewPrivileges", "yes"},
		{"CapabilityBoundingSet", ""},
		{"AmbientCapabilities", ""},
		{"DynamicUser", "yes"},
		{"DevicePolicy", "closed"},
		{"EnvironmentFile", "-/etc/default/vgpu_exporter"},
		{"ExecStart", installedBin + " $VGPU_EXPORTER_ARGS"},
	} {
		if got := s[tc.key]; len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s=%q, want %q", tc.key, got, tc.want)
		}
	}
}

// TestEnvironmentFile: the default flags are flags of the exporter.
func TestEnvironmentFile(t *testing.T) {
	s := settings(t, "vgpu_exporter.default")
	args := s["VGPU_EXPORTER_ARGS"]
	if len(args) != 1 {
		t.Fatalf("VGPU_EXPORTER_ARGS set %d times, want once", len(args))
	}
	flags, err := repo.ExporterFlags(repo.Exporter(t))
	if err != nil {
		t.Fatal(err)
	}
	list := strings.Fields(strings.Trim(args[0], `"`))
	if bad := repo.UnknownFlags(flags, list); len(bad) > 0 {
		t.Errorf("VGPU_EXPORTER_ARGS has %q, which are not flags of vgpu_exporter", bad)
	}
	for _, f := range []string{"web.systemd-socket", "web.config.file", "tenants.config"} {
		if !flags[f] {
			t.Errorf("the unit's docs rely on --%s, which vgpu_exporter does not have", f)
		}
	}
}

// TestVerify runs systemd-analyze verify on the units (with ExecStart
// pointing at a built exporter: verify checks that the program exists) and
// its offline security review.
func TestVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (Debian package systemd); the units were not verified")
	}
	bin := repo.Exporter(t)
	dir := t.TempDir()
	for _, f := range []string{"vgpu_exporter.service", "vgpu_exporter.socket", "vgpu_exporter.service.d/socket.conf", "vgpu_exporter.service.d/profiling.conf"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, []byte(strings.ReplaceAll(string(b), installedBin, bin)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	units := []string{filepath.Join(dir, "vgpu_exporter.service"), filepath.Join(dir, "vgpu_exporter.socket")}
	out, err := exec.Command(analyze, append([]string{"verify", "--man=no"}, units...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// Exposure 0 (best) to 10; the unit alone scores 2.0 with systemd 252.
	out, err = exec.Command(analyze, "security", "--offline=yes", "--threshold=25", units[0]).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.5 or error: %v\n%s", err, out)
	}
}

// TestSocketActivation serves the simulator on a socket handed over as
// systemd does (systemd-socket-activate), with the flag of the drop-in.
func TestSocketActivation(t *testing.T) {
	activate, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Skip("systemd-socket-activate not installed (Debian package systemd); socket activation not run")
	}
	drop := settings(t, "vgpu_exporter.service.d/socket.conf")["ExecStart"]
	if len(drop) != 2 || drop[0] != "" || !strings.HasPrefix(drop[1], installedBin+" --web.systemd-socket ") {
		t.Fatalf("socket.conf ExecStart=%q, want it reset, then %s --web.systemd-socket ...", drop, installedBin)
	}
	addr := repo.FreeAddr(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var logs strings.Builder
	cmd := exec.CommandContext(ctx, activate, "--listen="+addr, repo.Exporter(t), "--web.systemd-socket", "--backend=sim")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := repo.WaitReady(ctx, "http://"+addr+"/-/ready"); err != nil {
		t.Fatalf("exporter on the activated socket: %v\n%s", err, logs.String())
	}
}
