package sim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseScenario: any input either fails with a file:line error or
// yields a scenario that runs without panicking.
func FuzzParseScenario(f *testing.F) {
	addScenarioSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := ParseScenario("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, ts := range sc.Tenants {
			if key, _ := unreadArrival(&ts.Workload.Arrival, func(string) bool { return false }); key != "" {
				t.Fatalf("tenant %s: arrival.%s loaded, which process %q does not read", ts.Name, key, ts.Workload.Arrival.Process)
			}
		}
		s, err := New(sc, Options{})
		if err != nil {
			t.Fatalf("parsed scenario rejected by New: %v", err)
		}
		s.AdvanceTo(s.Now().Add(50 * time.Millisecond))
		if _, err := s.Sample(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.Window()
	})
}

// addScenarioSeeds adds the seed corpus of the scenario fuzz tests: the
// scenarios under scenarios, and forms of the keys they leave out.
func addScenarioSeeds(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(scenarioDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no scenarios in %s: %v", scenarioDir, err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, ".tenants.yaml") {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(saturating("mps", 2, "")))
	f.Add([]byte(withHealth(healthEvents)))
	for _, arrival := range []string{"{process: poisson, rate: 5, burst_rate: 50}", "{process: bursty, rate: 5, burst_rate: 50, burst_mean: 1s, calm_mean: 5s, no_loop: true}", "{rate: 5}", "{process: poisson, rate: 5, speedup: 0}"} {
		f.Add([]byte("gpus: [{model: H100-SXM5-80GB}]\ntenants:\n  - {name: a, workload: {type: dnn, flops: 1e9, arrival: " + arrival + "}}\n  - {name: t, workload: {type: training, flops: 1e12, arrival: " + arrival + "}}\n"))
	}
	for _, w := range []string{"max_queue: 0", "timeout: 0s", "max_queue: 5, timeout: 1s"} {
		f.Add([]byte("gpus: [{model: H100-SXM5-80GB}]\ntenants:\n  - {name: a, workload: {type: dnn, flops: 1e9, " + w + ", arrival: {process: poisson, rate: 5}}}\n"))
	}
	for _, event := range []string{"{at: 1s, tenant: a}", "{at: 1s, tenant: a, rate: 0}", "{at: 1s, tenant: a, action: stop, rate: 5}", "{at: 1s, action: xid, gpu: 0, code: 13, rate: 1}", "{at: 1s, action: xid, gpu: 0, code: 1.5}", "{at: 1s, action: xid, gpu: 0, code: 13.0}"} {
		f.Add([]byte("gpus: [{model: H100-SXM5-80GB}]\ntenants:\n  - {name: a, workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 5}}}\nevents:\n  - " + event + "\n"))
	}
	for _, g := range []string{"{model: H100-SXM5-80GB, sharing: mps, timeslice: long}", "{model: H100-SXM5-80GB, vgpu: {policy: fixed-share}}", "{model: H100-SXM5-80GB, sharing: vgpu, timeslice: short, vgpu: {policy: equal-share}}", "{model: H100-SXM5-80GB, sharing: mps, mps: {default_active_threads: 0}}"} {
		f.Add([]byte("gpus: [" + g + "]\ntenants:\n  - {name: a, workload: {type: training, flops: 1e12}}\n"))
	}
}

// FuzzParseTrace: any CSV either fails with a file:line error, the line
// one of the file's (and the one that holds a bad timestamp it quotes), or
// yields a non-empty, monotonic trace whose loop period covers its offsets (a
// period of 0, every request at one instant, replays over the rate limit,
// which the scenario refuses).
func FuzzParseTrace(f *testing.F) {
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n"))
	f.Add([]byte("ContextTokens,TIMESTAMP,GeneratedTokens,extra\n12,2023-11-16 18:15:46,3,x\n"))
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:50,1,1\n2023-11-16 18:15:46,1,1\n"))
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:50,10000000,1\n2023-11-16 18:15:51,9223372036854775807,10000001\n"))
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n\n\n2023-11-16 18:15:46,1,1\n\nnoon,1,1\n"))
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens,note\n2023-11-16 18:15:46,1,1,\"a\nb\"\n1,2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := parseTrace("t.csv", bytes.NewReader(data), maxTraceRows)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "t.csv") {
				t.Fatalf("error does not name the file: %v", err)
			}
			checkTraceErrorLine(t, data, err)
			return
		}
		n := len(tr.offsets)
		if n == 0 || tr.span < tr.offsets[n-1] {
			t.Fatalf("bad trace %+v", tr)
		}
		if r := tr.rate(1); tr.span <= 0 && r <= maxTraceRate {
			// every request at one instant: a span of 0, which the
			// scenario must refuse by its rate, or it loops in no time
			t.Fatalf("trace of span %v replays at %v a second, within the limit", tr.span, r)
		}
		for i := 1; i < len(tr.offsets); i++ {
			if tr.offsets[i] < tr.offsets[i-1] {
				t.Fatal("offsets go backwards")
			}
		}
		for i := range tr.context {
			if tr.context[i] > maxTokens || tr.generated[i] > maxTokens {
				t.Fatalf("request %d of %d, %d tokens", i, tr.context[i], tr.generated[i])
			}
		}
	})
}

// checkTraceErrorLine fails t when err, parseTrace's of data, names a line
// that data does not have, names a line twice (csv's "record on line N"
// after the file's), or quotes a bad TIMESTAMP that the line it names
// does not hold (one of no line break or quote, written as it is read).
func checkTraceErrorLine(t *testing.T, data []byte, err error) {
	msg := strings.TrimPrefix(err.Error(), "t.csv")
	if len(msg) < 2 || msg[0] != ':' || msg[1] < '0' || msg[1] > '9' {
		return // an error of the whole file ("t.csv: empty")
	}
	num, rest, _ := strings.Cut(msg[1:], ":")
	n, convErr := strconv.Atoi(num)
	lines := strings.Split(string(data), "\n")
	if convErr != nil || n < 1 || n > len(lines) {
		t.Fatalf("error %v names no line of the file's %d", err, len(lines))
	}
	if strings.Contains(rest, "on line") {
		t.Fatalf("error %v names a line twice", err)
	}
	var ts string
	if _, err := fmt.Sscanf(rest, " bad TIMESTAMP %q", &ts); err == nil && ts != "" && !strings.ContainsAny(ts, "\r\n\"") && !strings.Contains(lines[n-1], ts) {
		t.Fatalf("error names line %d, %q, which does not hold %q", n, lines[n-1], ts)
	}
}
