//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The load suite asserts behaviour under load, never speed: every bound
// below is a generous ceiling on a wait, or on memory.

// loadMemoryCap is a generous ceiling on the exporter's peak RSS through a
// burst of concurrent scrapes.
const loadMemoryCap = 256 << 20

// TestLoadBurst sends bursts of concurrent scrapes: requests beyond
// --web.max-requests get 503 and are counted, memory stays below a cap,
// and scrapes succeed after the burst.
func TestLoadBurst(t *testing.T) {
	bin := buildExporter(t)
	addr := freeAddr(t)
	p := start(t, "exporter-load", bin, "--backend=sim", "--sim.scenario=eight-gpu-hot",
		"--web.listen-address="+addr, "--web.max-requests=4")
	base := "http://" + addr
	waitReady(t, p, base)

	client := &http.Client{Timeout: waitFor, Transport: &http.Transport{MaxIdleConnsPerHost: 100, MaxConnsPerHost: 0}}
	const rounds, concurrent = 5, 200
	var mu sync.Mutex
	codes := map[int]int{}
	for range rounds {
		var wg sync.WaitGroup
		for range concurrent {
			wg.Go(func() {
				code := 0
				if resp, err := client.Get(base + "/metrics"); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	t.Logf("responses by status: %v", codes)
	if codes[200] == 0 || codes[200]+codes[503] != rounds*concurrent {
		t.Errorf("responses by status %v: want only 200 and 503", codes)
	}
	// After the burst: scrapes succeed, and every 503 was counted.
	code, body, _ := get(base + "/metrics")
	if code != 200 {
		t.Fatalf("scrape after the burst: %d", code)
	}
	if got := metricValue(body, `promhttp_metric_handler_requests_total{code="503"}`); got != float64(codes[503]) {
		t.Errorf("promhttp_metric_handler_requests_total{code=\"503\"} = %v, clients saw %d", got, codes[503])
	}
	if hwm := procStatusBytes(t, p.cmd.Process.Pid, "VmHWM"); hwm > loadMemoryCap {
		t.Errorf("peak RSS %d MiB over the cap of %d MiB", hwm>>20, loadMemoryCap>>20)
	} else {
		t.Logf("peak RSS %d MiB", hwm>>20)
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	assertNoErrorLogged(t, p)
}

// TestIdleSocketsUnderLowFDLimit holds more idle connections than the
// process may open files, some silent, some idle after a request: a scrape
// still gets through, and the exporter says why it closed connections.
func TestIdleSocketsUnderLowFDLimit(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) not installed")
	}
	bin := buildExporter(t)
	addr := freeAddr(t)
	const fdLimit = 128
	p := start(t, "exporter-fd", prlimit, fmt.Sprintf("--nofile=%d:%d", fdLimit, fdLimit), bin,
		"--backend=sim", "--web.listen-address="+addr)
	base := "http://" + addr
	waitReady(t, p, base)

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 2 * fdLimit {
		c, err := net.DialTimeout("tcp", addr, waitFor)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		if i%2 == 1 { // a keep-alive connection left idle after one request
			fmt.Fprintf(c, "GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err == nil {
				resp.Body.Close()
			}
		}
		conns = append(conns, c)
	}
	client := &http.Client{Timeout: waitFor}
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("scrape with %d idle sockets open under a %d-file limit: %v", len(conns), fdLimit, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("scrape: %d", resp.StatusCode)
	}
	if logs := p.logs(); !strings.Contains(logs, "connection limit reached") || strings.Contains(logs, "too many open files") {
		t.Errorf("want connections closed at the limit and no fd exhaustion; log:\n%s", logs)
	}
}

// TestFIFOTenantsFileRefused: a tenants file that is a FIFO opened by
// nobody is refused at start with an error naming it; the exporter does
// not wait on it.
func TestFIFOTenantsFileRefused(t *testing.T) {
	bin := buildExporter(t)
	fifo := t.TempDir() + "/tenants.yaml"
	if out, err := exec.Command("mkfifo", fifo).CombinedOutput(); err != nil {
		t.Skipf("mkfifo: %v %s", err, out)
	}
	p := start(t, "exporter-fifo", bin, "--backend=sim", "--tenants.config="+fifo, "--web.listen-address="+freeAddr(t))
	select {
	case <-p.done:
	case <-time.After(waitFor):
		t.Fatal("the exporter neither refused the FIFO nor exited")
	}
	if logs := p.logs(); !strings.Contains(logs, fifo) || !strings.Contains(logs, "not a regular file") {
		t.Errorf("the error does not name the FIFO:\n%s", logs)
	}
}

// TestEarlySIGHUP: SIGHUPs sent from the first line the process logs,
// while it starts, do not end it.
func TestEarlySIGHUP(t *testing.T) {
	bin := buildExporter(t)
	addr := freeAddr(t)
	p := start(t, "exporter-hup", bin, "--backend=sim", "--web.listen-address="+addr)
	deadline := time.Now().Add(waitFor)
	for p.logs() == "" && p.exited() == nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	for range 3 {
		p.cmd.Process.Signal(syscall.SIGHUP)
		time.Sleep(time.Millisecond)
	}
	waitReady(t, p, "http://"+addr)
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
}

func waitReady(t *testing.T, p *process, base string) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		if err := p.exited(); err != nil {
			t.Fatalf("%v\n%s", err, p.logs())
		}
		if code, _, _ := get(base + "/-/ready"); code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after %s:\n%s", waitFor, p.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metricValue returns the value of the sample named exactly series, or -1.
func metricValue(body, series string) float64 {
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// procStatusBytes reads a "kB" field of /proc/PID/status.
func procStatusBytes(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + field + `:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s in /proc/%d/status", field, pid)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// assertNoErrorLogged fails on any error line in the process's log.
func assertNoErrorLogged(t *testing.T, p *process) {
	t.Helper()
	for line := range strings.SplitSeq(p.logs(), "\n") {
		if strings.Contains(line, "level=error") {
			t.Errorf("error logged by a normal run and shutdown: %s", line)
		}
	}
}
