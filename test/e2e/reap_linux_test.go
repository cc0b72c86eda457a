//go:build e2e && linux

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExporterAsPID1ReapsOrphans runs the exporter as the first process
// of a PID namespace, as in a container without an init (the chart's
// default, hostPID false), leaves five orphans in the namespace, which
// the kernel gives the exporter, and finds them reaped: none left a
// zombie, each logged. It needs root and util-linux's unshare and
// nsenter; it skips without them, except under CI=true.
func TestExporterAsPID1ReapsOrphans(t *testing.T) {
	unshare, nsenter := lookPath("unshare"), lookPath("nsenter")
	if why := pid1Missing(unshare, nsenter); why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot run under CI: %s", why)
		}
		t.Skip(why)
	}
	bin := buildExporter(t)
	addr := freeAddr(t)
	p := start(t, "pid1-exporter", unshare, "--pid", "--fork", "--kill-child", "--mount-proc", bin,
		"--backend=sim", "--sim.scenario=h100-timeslice", "--web.listen-address="+addr, "--log.level=debug")
	poll(t, "the exporter's /metrics", func() error {
		code, _, err := get("http://" + addr + "/metrics")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("status %d", code)
		}
		return err
	}, p)
	pid := childOf(t, p.cmd.Process.Pid)
	if ns := nsPID(t, pid); ns != "1" {
		t.Fatalf("the exporter is PID %s of its namespace, not 1", ns)
	}
	if !strings.Contains(p.logs(), "running as PID 1") {
		t.Fatalf("the exporter did not say it reaps orphans as PID 1:\n%s", p.logs())
	}
	// sh runs in the namespace (nsenter forks it there) and exits at once:
	// its five children are orphans, the exporter's.
	out, err := exec.Command(nsenter, "--target", strconv.Itoa(pid), "--pid", "--mount", "--",
		"/bin/sh", "-c", "for i in 1 2 3 4 5; do sleep 0.2 & done; exit 0").CombinedOutput()
	if err != nil {
		t.Fatalf("nsenter: %v\n%s", err, out)
	}
	poll(t, "five orphans reaped", func() error {
		z := zombieChildren(pid)
		n := strings.Count(p.logs(), `msg="reaped an orphaned process"`)
		if z > 0 || n < 5 {
			return fmt.Errorf("%d zombies of the exporter, %d orphans reaped", z, n)
		}
		return nil
	}, p)
	// unshare ignores SIGTERM: the exporter gets it, as PID 1 of a pod
	// does from the kubelet, and unshare ends with it
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("exporter shutdown: %v", p.err)
		}
	case <-time.After(waitFor):
		t.Errorf("exporter still running %v after SIGTERM", waitFor)
	}
}

func lookPath(name string) string {
	p, _ := exec.LookPath(name)
	return p
}

// pid1Missing says what the test lacks to run, "" when nothing.
func pid1Missing(unshare, nsenter string) string {
	switch {
	case os.Geteuid() != 0:
		return "needs root for a PID namespace"
	case unshare == "" || nsenter == "":
		return "needs unshare and nsenter (Debian package util-linux)"
	}
	return ""
}

// childOf returns the first child of the process parent, waiting for it.
func childOf(t *testing.T, parent int) int {
	t.Helper()
	var pid int
	poll(t, "the exporter's process", func() error {
		for _, e := range procPIDs() {
			if st, ok := procStat(e); ok && st.ppid == parent {
				pid = e
				return nil
			}
		}
		return fmt.Errorf("no child of %d", parent)
	})
	return pid
}

// nsPID is pid's number in its innermost PID namespace.
func nsPID(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "NSpid:" {
			return f[len(f)-1]
		}
	}
	t.Fatalf("/proc/%d/status has no NSpid", pid)
	return ""
}

// zombieChildren counts the children of pid that ended and were not
// waited for.
func zombieChildren(pid int) int {
	n := 0
	for _, e := range procPIDs() {
		if st, ok := procStat(e); ok && st.ppid == pid && st.state == "Z" {
			n++
		}
	}
	return n
}

func procPIDs() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

type stat struct {
	state string
	ppid  int
}

// procStat reads a process's state and parent from /proc/PID/stat.
func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return stat{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	return stat{state: f[0], ppid: ppid}, err == nil
}
