//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadmeCommands runs the README's front door as a newcomer would: in a
// fresh clone, the first code block's two commands must be `make run` and
// `make test`; `make run` builds and starts the exporter on the simulator
// (scraped here, then stopped) in the tuner mode the README names, and
// `make test` is a target make can expand. It fails when the README and the
// Makefile disagree.
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

	// make test expands (its recipes are run by CI, not here).
	if out, err := exec.Command("make", "-C", clone, "-n", "test").CombinedOutput(); err != nil {
		t.Fatalf("make -n test: %v\n%s", err, out)
	}

	// make run: build, start, scrape, stop.
	addr := freeAddr(t)
	logPath := filepath.Join(t.TempDir(), "make-run.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	run := exec.Command("make", "-C", clone, "run", "RUN_ARGS=--web.listen-address="+addr)
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
	// The first lines say what is served where.
	if log, _ := os.ReadFile(logPath); !strings.Contains(string(log), `msg=serving backend=sim tuner_mode=`+mode) || !strings.Contains(string(log), "/metrics") {
		t.Errorf("the log does not say what is served where:\n%s", log)
	}
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
