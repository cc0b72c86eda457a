//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadmeCommands runs the README's front door as a newcomer would: in a
// fresh clone, the first code block's two commands must be `make run` and
// `make test`; `make run` builds and starts the exporter on the simulator
// (scraped here, then stopped) on the address and in the tuner mode the
// README names, saying so in its first log lines, and `make test` is a
// target make can expand. It fails when the README and the Makefile
// disagree. Where the README's port is taken on this machine, make run is
// started on a free one, and the address it serves on by default is read
// from `make -n run` and the built binary's --help.
func TestReadmeCommands(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not found: cannot clone the repository")
	}
	clone := filepath.Join(t.TempDir(), "vgpu_exporter")
	if out, err := exec.Command("git", "clone", "--quiet", root, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	readme, err := os.ReadFile(filepath.Join(clone, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile(filepath.Join(clone, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}

	// The title first, then the two commands as the first code block.
	lines := strings.Split(string(readme), "\n")
	if lines[0] != "# vgpu_exporter" {
		t.Errorf("README's first line is %q, want the title", lines[0])
	}
	cmds := firstCodeBlock(string(readme))
	if len(cmds) != 2 || !strings.HasPrefix(cmds[0], "make run") || !strings.HasPrefix(cmds[1], "make test") {
		t.Fatalf("README's first code block is %q, want `make run` then `make test`", cmds)
	}

	// The tuner mode make run starts in is the one the README names.
	m := regexp.MustCompile(`(?m)^TUNER_MODE\s*\?=\s*(\S+)`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("Makefile has no TUNER_MODE default")
	}
	mode := string(m[1])
	if !strings.Contains(string(readme), "tuner in\n`"+mode+"` mode") && !strings.Contains(string(readme), "tuner in `"+mode+"` mode") {
		t.Errorf("the Makefile starts the tuner in %q mode; the README does not say so", mode)
	}

	// The address the README names for make run; the front door's other
	// links point there too.
	front, _, _ := strings.Cut(string(readme), "\n## ")
	pm := regexp.MustCompile(`(?m)^make run\s+#.*http://localhost:(\d+)/`).FindStringSubmatch(front)
	if pm == nil {
		t.Fatal("README's `make run` line names no http://localhost:PORT/")
	}
	port := pm[1]
	for _, u := range regexp.MustCompile(`http://localhost:(\d+)`).FindAllStringSubmatch(front, -1) {
		if u[1] != port {
			t.Errorf("README links http://localhost:%s, but make run serves on :%s", u[1], port)
		}
	}

	// make test expands (its recipes are run by CI, not here).
	if out, err := exec.Command("make", "-C", clone, "-n", "test").CombinedOutput(); err != nil {
		t.Fatalf("make -n test: %v\n%s", err, out)
	}

	// make run: build, start, scrape, stop; as the README says it when
	// its port is free here.
	addr, makeArgs := "localhost:"+port, []string{"-C", clone, "run"}
	if l, err := net.Listen("tcp", ":"+port); err != nil {
		addr = freeAddr(t)
		makeArgs = append(makeArgs, "RUN_ARGS=--web.listen-address="+addr)
		t.Logf(":%s is taken here (%v): make run is started on %s; its own address is checked from make -n run and --help", port, err, addr)
	} else {
		l.Close()
	}
	logPath := filepath.Join(t.TempDir(), "make-run.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	run := exec.Command("make", makeArgs...)
	run.Env = append(os.Environ(), "CGO_CFLAGS=-Wno-deprecated-declarations")
	run.Stdout, run.Stderr = logf, logf
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	stopGroup := func(sig syscall.Signal) { _ = syscall.Kill(-run.Process.Pid, sig) }
	t.Cleanup(func() { stopGroup(syscall.SIGKILL) })
	exited := &process{name: "make run", done: make(chan struct{}), logPath: logPath}
	go func() {
		exited.err = <-done
		close(exited.done)
	}()
	// The build in a fresh clone may take a while on a cold cache.
	pollFor(t, 5*time.Minute, "make run to serve /metrics", func() error {
		code, body, err := get("http://" + addr + "/metrics")
		if err != nil {
			return err
		}
		if code != 200 || !strings.Contains(body, "vgpu_gpu_info") {
			return fmt.Errorf("status %d, no vgpu_gpu_info", code)
		}
		return nil
	}, exited)
	if _, body, err := get("http://" + addr + "/tuner?format=json"); err != nil || !strings.Contains(body, `"`+mode+`"`) {
		t.Errorf("/tuner does not report mode %q (err %v): %.300s", mode, err, body)
	}
	// The landing page says the data is simulated and the tuner's mode.
	if _, body, err := get("http://" + addr + "/"); err != nil || !strings.Contains(body, "Simulated data") || !strings.Contains(body, mode+": the tuner") {
		t.Errorf("the landing page does not say the data is simulated and the tuner mode %q (err %v): %.500s", mode, err, body)
	}
	// The first lines of the exporter's log say what is served where.
	log, _ := os.ReadFile(logPath)
	var logLines []string
	for _, l := range strings.Split(string(log), "\n") {
		if strings.HasPrefix(l, "level=") || strings.HasPrefix(l, "ts=") {
			logLines = append(logLines, l)
		}
	}
	const firstLines = 8
	serving := slices.IndexFunc(logLines, func(l string) bool { return strings.Contains(l, "msg=serving ") })
	if serving < 0 || serving >= firstLines {
		t.Errorf("the serving line is line %d of the exporter's log, want one of the first %d", serving+1, firstLines)
	} else {
		for _, want := range []string{"backend=sim", "tuner_mode=" + mode, "simulated_scenario=", "landing_page=http://" + addr + "/ ",
			"metrics=http://" + addr + "/metrics", "tuner_page=http://" + addr + "/tuner"} {
			if !strings.Contains(logLines[serving], want) {
				t.Errorf("the serving line lacks %q: %s", want, logLines[serving])
			}
		}
	}
	// Where make run serves without RUN_ARGS: its exporter command's
	// --web.listen-address, else the binary's default.
	checkRunAddress(t, clone, port)
	stopGroup(syscall.SIGTERM)
	select {
	case <-exited.done:
	case <-time.After(waitFor):
		t.Fatalf("make run still running %s after SIGTERM", waitFor)
	}
	if t.Failed() {
		log, _ := os.ReadFile(logPath)
		t.Logf("make run log:\n%s", log)
	}
}

// checkRunAddress fails t unless `make run` (no RUN_ARGS) in clone serves
// on port: the last --web.listen-address of the exporter's command line
// that `make -n run` prints, or the default its --help shows.
func checkRunAddress(t *testing.T, clone, port string) {
	t.Helper()
	dry, err := exec.Command("make", "-C", clone, "--no-print-directory", "-n", "run").Output()
	if err != nil {
		t.Fatalf("make -n run: %v", err)
	}
	var cmd []string
	for _, l := range strings.Split(string(dry), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "./") {
			cmd = f
		}
	}
	if cmd == nil {
		t.Fatalf("make -n run starts no ./binary:\n%s", dry)
	}
	flag := regexp.MustCompile(`^--web\.listen-address=(\S+)`)
	served, from := "", strings.Join(cmd, " ")
	for _, a := range cmd {
		if m := flag.FindStringSubmatch(a); m != nil {
			served = m[1]
		}
	}
	if served == "" {
		help, err := exec.Command(filepath.Join(clone, cmd[0]), "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --help: %v\n%s", cmd[0], err, help)
		}
		m := regexp.MustCompile(`--web\.listen-address=(\S+)`).FindSubmatch(help)
		if m == nil {
			t.Fatalf("%s --help shows no --web.listen-address default", cmd[0])
		}
		served, from = string(m[1]), cmd[0]+"'s default --web.listen-address"
	}
	if _, p, err := net.SplitHostPort(served); err != nil || p != port {
		t.Errorf("make run serves on %s (%s); the README says http://localhost:%s/", served, from, port)
	}
}

// firstCodeBlock returns the command lines of the first fenced code block,
// each without its trailing comment.
func firstCodeBlock(md string) []string {
	var out []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "```") {
			if in {
				return out
			}
			in = true
			continue
		}
		if in {
			if i := strings.Index(l, "#"); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}
