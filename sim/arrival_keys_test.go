package sim

import (
	"strings"
	"testing"
)

// TestArrivalKeysRead: a key of arrival that its process does not read is
// refused at its line, naming the processes that read it; before, the run
// went on without it (burst_rate with poisson gave a flat Poisson load, a
// training job's rate was dropped). Keys a process reads still load.
func TestArrivalKeysRead(t *testing.T) {
	scenario := func(workload string) string {
		return "name: x\ngpus: [{model: H100-SXM5-80GB}]\ntenants:\n  - name: a\n    workload:\n      " + workload + "\n"
	}
	const trace = "file: testdata/azure-llm-2023-conv-300.csv"
	for _, c := range []struct {
		name, workload, want string // want "" when it loads
	}{
		{"poisson", "{type: dnn, flops: 1e9, arrival: {process: poisson, rate: 5}}", ""},
		{"bursty", "{type: dnn, flops: 1e9, arrival: {process: bursty, rate: 5, burst_rate: 50, burst_mean: 1s, calm_mean: 5s}}", ""},
		{"trace", "{type: llm, params: 8e9, arrival: {process: trace, " + trace + ", speedup: 2, no_loop: true}}", ""},
		{"training", "{type: training, flops: 1e12}", ""},
		{"training, closed said", "{type: training, flops: 1e12, arrival: {process: closed}}", ""},
		{"a burst with poisson", "{type: dnn, flops: 1e9, arrival: {process: poisson, rate: 5, burst_rate: 50, burst_mean: 1s, calm_mean: 5s}}",
			"x.yaml:6: arrival.burst_rate is for process bursty; process poisson does not read it"},
		{"calm_mean alone with poisson", "{type: dnn, flops: 1e9, arrival: {process: poisson, rate: 5, calm_mean: 5s}}",
			"x.yaml:6: arrival.calm_mean is for process bursty; process poisson does not read it"},
		{"a file with poisson", "{type: dnn, flops: 1e9, arrival: {process: poisson, rate: 5, " + trace + "}}",
			"x.yaml:6: arrival.file is for process trace; process poisson does not read it"},
		{"speedup with bursty", "{type: dnn, flops: 1e9, arrival: {process: bursty, rate: 5, burst_rate: 50, burst_mean: 1s, calm_mean: 5s, speedup: 3}}",
			"x.yaml:6: arrival.speedup is for process trace; process bursty does not read it"},
		{"a rate with trace", "{type: llm, params: 8e9, arrival: {process: trace, " + trace + ", rate: 5}}",
			"x.yaml:6: arrival.rate is for process poisson or bursty; process trace does not read it"},
		{"no_loop with poisson", "{type: dnn, flops: 1e9, arrival: {process: poisson, rate: 5, no_loop: true}}",
			"x.yaml:6: arrival.no_loop is for process trace; process poisson does not read it"},
		{"a rate for training", "{type: training, flops: 1e12, arrival: {rate: 5}}",
			"x.yaml:6: arrival.rate is for process poisson or bursty; training runs closed-loop and reads no arrival"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseScenario("x.yaml", []byte(scenario(c.workload)))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
