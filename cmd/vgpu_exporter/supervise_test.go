package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/pause"
)

// superviseHelperEnv makes the test binary an exporter that pauses a
// tenant at its start (superviseHelper).
const superviseHelperEnv = "VGPU_TEST_SUPERVISE_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(superviseHelperEnv) != "" {
		os.Exit(superviseHelper(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// superviseHelper is the exporter as its main starts it, up to its pause
// actuator: its watchdog (the binary run again), its supervision where it
// supervises (superviseIfPausing, as run), then, as the exporter, the
// pause actuator the flags configure, which pauses the tenant of PID
// 4242 (in the fake procfs of --proc.root) and says "paused" with its PID
// in the test's PID namespace; then it waits to be killed.
func superviseHelper(args []string) int {
	if len(args) == 1 && args[0] == pause.WatchdogArg {
		return pause.RunWatchdog(os.Stdin, os.Stderr)
	}
	app := kingpin.New("vgpu_exporter", "")
	cfg := addFlags(app)
	if _, err := app.Parse(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if status, ok := superviseIfPausing(cfg, args, log.NewLogfmtLogger(os.Stderr), os.Stderr); ok {
		return status
	}
	a, err := pauser(cfg, log.NewLogfmtLogger(os.Stderr))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := a.Impl.(gpu.PauseActuator).SetPauseDuty(context.Background(), "GPU-0", "batch", []uint32{4242}, 0.9); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	self, err := os.Readlink("/proc/self") // (the procfs of the test's namespace)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("paused %s\n", self)
	select {}
}

// An exporter that pauses and is its container's main process runs as the
// child of a supervisor, which runs the watchdog: killed mid-pulse with
// SIGKILL, its tenant is thawed, and the supervisor exits 137. As PID 1
// of a PID namespace of its own (the chart's default pod), the kernel
// kills every process of the namespace with it: before, the exporter was
// PID 1, its watchdog died with it, and the tenant stayed frozen. With
// --pause.supervise (hostPID: the container runtime kills the rest of the
// container at the main process's exit) the same, the supervisor a
// subreaper.
func TestSupervisorThawsWhenTheExporterIsKilled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		newNS bool
		args  []string
	}{
		{"PID 1 of its own PID namespace", true, nil},
		{"--pause.supervise, the host's PIDs", false, []string{"--pause.supervise"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			cg, proc := filepath.Join(d, "cgroup"), filepath.Join(d, "proc")
			tenant := filepath.Join(cg, "system.slice", "batch.service")
			for _, dir := range []string{tenant, filepath.Join(proc, "4242")} {
				mustSup(t, os.MkdirAll(dir, 0o755))
			}
			for name, s := range map[string]string{
				filepath.Join(cg, "cgroup.controllers"): "freezer\n",
				filepath.Join(tenant, "cgroup.freeze"):  "0\n",
				filepath.Join(tenant, "cgroup.events"):  "populated 1\nfrozen 1\n", // (frozen at once)
				filepath.Join(proc, "4242", "cgroup"):   "0::/system.slice/batch.service\n",
			} {
				mustSup(t, os.WriteFile(name, []byte(s), 0o644))
			}
			cmd := exec.Command(os.Args[0], append([]string{"--tuner.mode=enforce", "--tuner.enable-knob=pause_duty",
				"--pause.cgroup-root=" + cg, "--proc.root=" + proc, "--pause.period=1h"}, tc.args...)...)
			cmd.Env = append(os.Environ(), superviseHelperEnv+"=1")
			if tc.newNS {
				cmd.SysProcAttr = &syscall.SysProcAttr{
					Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID,
					UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
					GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
				}
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			mustSup(t, err)
			if err := cmd.Start(); err != nil {
				if tc.newNS && os.Getenv("CI") != "true" && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSPC)) {
					t.Skipf("no user and PID namespace here: %v", err)
				}
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			lines := bufio.NewScanner(out)
			if !lines.Scan() {
				t.Fatalf("the exporter did not pause: %v\n%s", cmd.Wait(), stderr.String())
			}
			exporter, err := strconv.Atoi(strings.TrimPrefix(lines.Text(), "paused "))
			mustSup(t, err)
			if got := readTrim(t, filepath.Join(tenant, "cgroup.freeze")); got != "1" {
				t.Fatalf("cgroup.freeze %s once paused, want 1", got)
			}
			if ppid := parentOf(t, exporter); ppid != cmd.Process.Pid {
				t.Errorf("the exporter's parent is PID %d, not the process started, %d: no supervisor, or one supervised again", ppid, cmd.Process.Pid)
			}
			mustSup(t, syscall.Kill(exporter, syscall.SIGKILL))
			go io.Copy(io.Discard, out)
			err = cmd.Wait()
			if got := cmd.ProcessState.ExitCode(); got != 137 {
				t.Errorf("the first process ended with %v (exit code %d), want exit status 137", err, got)
			}
			if got := readTrim(t, filepath.Join(tenant, "cgroup.freeze")); got != "0" {
				t.Errorf("cgroup.freeze %s after the exporter was killed, want 0 (thawed)\n%s", got, stderr.String())
			}
		})
	}
}

// parentOf is the parent of process pid.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	mustSup(t, err)
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	mustSup(t, err)
	return ppid
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	mustSup(t, err)
	return strings.TrimSpace(string(b))
}

// Only a process that may pause supervises: PID 1 or --pause.supervise,
// in enforce with the pause knob and a freezer, off the simulator; never
// an exporter a supervisor started, nor one systemd started (its
// environment has NOTIFY_SOCKET or LISTEN_FDS): --pause.supervise is
// refused there (wantErr, with or without pausing), and PID 1 says why it
// does not supervise.
func TestSupervises(t *testing.T) {
	pausing := []string{"--tuner.mode=enforce", "--tuner.enable-knob=pause_duty", "--pause.cgroup-root=/sys/fs/cgroup"}
	notify := map[string]string{"NOTIFY_SOCKET": "/run/systemd/notify"}
	sockets := map[string]string{"LISTEN_FDS": "1", "LISTEN_PID": "42"}
	for _, tc := range []struct {
		name       string
		pid        int
		supervised bool
		args       []string
		env        map[string]string
		want       bool
		wantErr    string
	}{
		{"PID 1 pausing", 1, false, pausing, nil, true, ""},
		{"PID 1 pausing on one GPU", 1, false, []string{"--tuner.gpu-mode=0=enforce", "--tuner.enable-knob=pause_duty"}, nil, true, ""},
		{"--pause.supervise pausing", 42, false, slices.Concat(pausing, []string{"--pause.supervise"}), nil, true, ""},
		{"not PID 1", 42, false, pausing, nil, false, ""},
		{"the supervised exporter", 2, true, slices.Concat(pausing, []string{"--pause.supervise"}), nil, false, ""},
		{"PID 1 in recommend", 1, false, []string{"--tuner.mode=recommend", "--tuner.enable-knob=pause_duty"}, nil, false, ""},
		{"PID 1 without the pause knob", 1, false, []string{"--tuner.mode=enforce", "--pause.supervise"}, nil, false, ""},
		{"PID 1 without a freezer", 1, false, []string{"--tuner.mode=enforce", "--tuner.enable-knob=pause_duty", "--pause.cgroup-root="}, nil, false, ""},
		{"PID 1 on the simulator", 1, false, slices.Concat(pausing, []string{"--backend=sim"}), nil, false, ""},
		{"PID 1, the tuner off", 1, false, []string{"--tuner.enable-knob=pause_duty", "--pause.supervise"}, nil, false, ""},
		{"--pause.supervise, Type=notify", 42, false, slices.Concat(pausing, []string{"--pause.supervise"}), notify, false, "--pause.supervise: NOTIFY_SOCKET is set"},
		{"--pause.supervise, socket-activated", 42, false, slices.Concat(pausing, []string{"--pause.supervise"}), sockets, false, "--pause.supervise: LISTEN_FDS is set"},
		{"--pause.supervise not pausing, Type=notify", 42, false, []string{"--pause.supervise"}, notify, false, "--pause.supervise: NOTIFY_SOCKET is set"},
		{"PID 1 pausing, Type=notify", 1, false, pausing, notify, false, "PID 1 does not supervise the exporter: NOTIFY_SOCKET is set"},
		{"PID 1 pausing, socket-activated", 1, false, pausing, sockets, false, "PID 1 does not supervise the exporter: LISTEN_FDS is set"},
		{"PID 1 not pausing, Type=notify", 1, false, nil, notify, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := kingpin.New("vgpu_exporter", "")
			cfg := addFlags(app)
			if _, err := app.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			env := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			got, err := cfg.supervises(tc.pid, tc.supervised, env)
			if got != tc.want {
				t.Errorf("supervises %v, want %v", got, tc.want)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want one beginning %q", err, tc.wantErr)
			}
		})
	}
}

// --pause.supervise where systemd started the exporter (NOTIFY_SOCKET of
// the unit's Type=notify) ends the start with status 2, naming why: its
// child's READY=1 would be refused (NotifyAccess=main) and the start time
// out. PID 1 there goes on unsupervised, saying why.
func TestPauseSuperviseRefusedUnderSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "/run/systemd/notify")
	app := kingpin.New("vgpu_exporter", "")
	cfg := addFlags(app)
	args := []string{"--tuner.mode=enforce", "--tuner.enable-knob=pause_duty", "--pause.cgroup-root=/sys/fs/cgroup", "--pause.supervise"}
	if _, err := app.Parse(args); err != nil {
		t.Fatal(err)
	}
	var stderr, logged strings.Builder
	status, ended := superviseIfPausing(cfg, args, log.NewLogfmtLogger(&logged), &stderr)
	if status != 2 || !ended {
		t.Errorf("superviseIfPausing (%d, %v), want (2, true): the start refused", status, ended)
	}
	if want := "vgpu_exporter: --pause.supervise: NOTIFY_SOCKET is set"; !strings.HasPrefix(stderr.String(), want) {
		t.Errorf("stderr %q, want it to begin %q", stderr.String(), want)
	}
}

func mustSup(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
