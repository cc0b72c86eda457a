// Package systemd tests the systemd unit files of this directory.
package systemd

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
		{"Type", "notify"}, // TestNotify: the exporter says when it serves
		{"NotifyAccess", "main"},
	} {
		if got := s[tc.key]; len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s=%q, want %q", tc.key, got, tc.want)
		}
	}
}

// TestDeviceAllow: the unit lets the exporter open the GPUs' device nodes
// under the name the loaded driver gives their major number in
// /proc/devices, which DeviceAllow=char-NAME matches: "nvidia" (and
// "nvidiactl") since the driver registers them as character devices of
// their own, "nvidia-frontend" before; the MIG capability nodes read-only.
// A name no line of /proc/devices has allows nothing, so NVML could not
// open /dev/nvidiactl.
func TestDeviceAllow(t *testing.T) {
	got := settings(t, "vgpu_exporter.service")["DeviceAllow"]
	for _, want := range []string{"char-nvidia rw", "char-nvidiactl rw", "char-nvidia-frontend rw", "char-nvidia-caps r"} {
		if !slices.Contains(got, want) {
			t.Errorf("DeviceAllow=%q: no %q", got, want)
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
	// Every flag the comments of these files show.
	files, _ := filepath.Glob("vgpu_exporter.service.d/*.conf")
	for _, f := range append(files, "vgpu_exporter.default") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range flagRef.FindAllStringSubmatch(string(b), -1) {
			if !flags[m[1]] {
				t.Errorf("%s shows --%s, which vgpu_exporter does not have", f, m[1])
			}
		}
	}
}

var flagRef = regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9.-]*[a-z0-9])`)

// TestTunerDropIns: the tuner's drop-ins give it a state directory for the
// journal and the MPS pipe directory, SYS_ADMIN (as root) only in
// enforce, and the pause KILL and SYS_PTRACE (the MPS server told by its
// executable).
func TestTunerDropIns(t *testing.T) {
	tuner := settings(t, "vgpu_exporter.service.d/tuner.conf")
	enforce := settings(t, "vgpu_exporter.service.d/tuner-enforce.conf")
	pause := settings(t, "vgpu_exporter.service.d/tuner-pause.conf")
	for _, tc := range []struct {
		file      string
		s         map[string][]string
		key, want string
	}{
		{"tuner.conf", tuner, "StateDirectory", "vgpu_exporter"},
		{"tuner.conf", tuner, "ReadWritePaths", "-/run/nvidia/mps"},
		{"tuner.conf", tuner, "Environment", "CUDA_MPS_PIPE_DIRECTORY=/run/nvidia/mps"},
		{"tuner-enforce.conf", enforce, "CapabilityBoundingSet", "CAP_SYS_ADMIN"},
		{"tuner-enforce.conf", enforce, "User", "root"},
		{"tuner-enforce.conf", enforce, "DynamicUser", "no"},
		{"tuner-pause.conf", pause, "CapabilityBoundingSet", "CAP_KILL CAP_SYS_PTRACE"},
	} {
		if got := tc.s[tc.key]; len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: %s=%q, want %q", tc.file, tc.key, got, tc.want)
		}
	}
	if _, ok := tuner["CapabilityBoundingSet"]; ok {
		t.Error("tuner.conf sets capabilities; recommend needs none (enforce's are in tuner-enforce.conf)")
	}
	if _, ok := enforce["NoNewPrivileges"]; ok {
		t.Error("tuner-enforce.conf changes NoNewPrivileges")
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
	// The unit alone, then with each set of drop-ins installed together.
	for _, dropIns := range [][]string{
		nil,
		{"socket.conf"},
		{"profiling.conf"},
		{"tuner.conf"},
		{"tuner.conf", "tuner-enforce.conf"},
		{"socket.conf", "profiling.conf", "tuner.conf", "tuner-enforce.conf"},
	} {
		dir := t.TempDir()
		files := []string{"vgpu_exporter.service", "vgpu_exporter.socket"}
		for _, d := range dropIns {
			files = append(files, "vgpu_exporter.service.d/"+d)
		}
		for _, f := range files {
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
			t.Errorf("systemd-analyze verify with drop-ins %v: %v\n%s", dropIns, err, out)
		}
		if dropIns != nil {
			continue
		}
		// Exposure 0 (best) to 10; the unit alone scores 2.0 with systemd 252.
		out, err = exec.Command(analyze, "security", "--offline=yes", "--threshold=25", units[0]).CombinedOutput()
		if err != nil {
			t.Errorf("systemd-analyze security: exposure above 2.5 or error: %v\n%s", err, out)
		}
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

// TestTunerEnforceNodeLock: the unit's tuner in enforce locks the file the
// Helm chart's pods lock (--tuner.node-lock's default, under the chart's
// tuner.nodeLock.hostPath), in a runtime directory kept when the unit
// stops (removed, the next holder would lock a new file beside one still
// held), and nothing in the environment file moves it. Before, the unit's
// tuner and the chart's, with their journals in two directories, both
// enforced on one host's GPUs.
func TestTunerEnforceNodeLock(t *testing.T) {
	enforce := settings(t, "vgpu_exporter.service.d/tuner-enforce.conf")
	for key, want := range map[string]string{"RuntimeDirectory": "vgpu-exporter", "RuntimeDirectoryPreserve": "yes", "RuntimeDirectoryMode": "0755"} {
		if got := enforce[key]; len(got) != 1 || got[0] != want {
			t.Errorf("tuner-enforce.conf: %s=%q, want %q", key, got, want)
		}
	}
	def := repo.DefaultNodeLock(t)
	chart := repo.Match(t, "deploy/helm/vgpu-exporter/values.yaml", `(?m)^  nodeLock:\n    hostPath: (\S+)$`)
	if unit := "/run/" + strings.Join(enforce["RuntimeDirectory"], " ") + "/tuner.lock"; def != unit || chart+"/tuner.lock" != unit {
		t.Errorf("node lock: the unit's runtime directory gives %s, the exporter's default is %s, the chart's %s/tuner.lock: all must be one file", unit, def, chart)
	}
	env, err := os.ReadFile("vgpu_exporter.default")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env), "--tuner.node-lock") {
		t.Error("vgpu_exporter.default gives --tuner.node-lock: the unit's tuner would lock another file than the chart's")
	}
}
