package sim

import (
	"strings"
	"testing"
)

// loadCase is a part of a scenario and what loading it says: want "" when
// it loads, else a part of the error.
type loadCase struct{ name, part, want string }

// checkLoads parses scenario(part) of each case.
func checkLoads(t *testing.T, scenario func(part string) string, cases []loadCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseScenario("x.yaml", []byte(scenario(c.part)))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestArrivalKeysRead: a key of arrival that its process does not read is
// refused at its line, naming the processes that read it; before, the run
// went on without it (burst_rate with poisson gave a flat Poisson load, a
// training job's rate was dropped). Keys a process reads still load.
func TestArrivalKeysRead(t *testing.T) {
	scenario := func(workload string) string {
		return "name: x\ngpus: [{model: H100-SXM5-80GB}]\ntenants:\n  - name: a\n    workload:\n      " + workload + "\n"
	}
	const trace = "file: testdata/azure-llm-2023-conv-300.csv"
	checkLoads(t, scenario, []loadCase{
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
		{"speedup 0 with poisson", "{type: dnn, flops: 1e9, arrival: {process: poisson, rate: 5, speedup: 0}}",
			"x.yaml:6: arrival.speedup is for process trace; process poisson does not read it"},
		{"no_loop false with bursty", "{type: dnn, flops: 1e9, arrival: {process: bursty, rate: 5, burst_rate: 50, burst_mean: 1s, calm_mean: 5s, no_loop: false}}",
			"x.yaml:6: arrival.no_loop is for process trace; process bursty does not read it"},
		{"a rate for training", "{type: training, flops: 1e12, arrival: {rate: 5}}",
			"x.yaml:6: arrival.rate is for process poisson or bursty; training runs closed-loop and reads no arrival"},
	})
}

// TestEventKeysRead: an event that would not do what it says is refused
// at its line. Before, an event naming a tenant without rate: or action:
// silently set the tenant's arrival rate to 0, and a rate or code given to
// an event that reads none (a stop with a rate) was dropped.
func TestEventKeysRead(t *testing.T) {
	scenario := func(event string) string {
		return "name: x\ngpus: [{model: H100-SXM5-80GB}]\ntenants:\n  - {name: a, workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 5}}}\nevents:\n  - " + event + "\n"
	}
	checkLoads(t, scenario, []loadCase{
		{"a rate", "{at: 10s, tenant: a, rate: 20}", ""},
		{"a rate of 0, said", "{at: 10s, tenant: a, rate: 0}", ""},
		{"a rate event, said", "{at: 10s, tenant: a, action: rate, rate: 0}", ""},
		{"a stop", "{at: 10s, tenant: a, action: stop}", ""},
		{"an xid", "{at: 10s, action: xid, gpu: 0, code: 13, tenant: a}", ""},
		{"a rising counter", "{at: 10s, action: pcie-replays, gpu: 0, rate: 0.5}", ""},
		{"a tenant and nothing else", "{at: 10s, tenant: a}",
			"x.yaml:6: a rate event needs rate: the tenant's requests a second from then on (0 stops its arrivals); or an action"},
		{"a rate event without its rate", "{at: 10s, tenant: a, action: rate}", "x.yaml:6: a rate event needs rate:"},
		{"a stop with a rate", "{at: 10s, tenant: a, action: stop, rate: 5}", "x.yaml:6: an event of action stop has no rate"},
		{"a start with a code", "{at: 10s, tenant: a, action: start, code: 13}", "x.yaml:6: an event of action start has no code"},
		{"a rate with a code", "{at: 10s, tenant: a, rate: 5, code: 13}", "x.yaml:6: an event of action rate has no code"},
		{"a lost GPU with a rate", "{at: 10s, action: gpu-lost, gpu: 0, rate: 1}", "x.yaml:6: an event of action gpu-lost has no rate"},
		{"an xid with a rate", "{at: 10s, action: xid, gpu: 0, code: 13, rate: 1}", "x.yaml:6: an event of action xid has no rate"},
	})
}

// TestGPUKeysRead: a GPU key its sharing mode never reads is refused at
// its line; before, timeslice: long on an MPS or vGPU GPU, a vgpu:
// scheduler on a time-sliced one or mps: settings on a vGPU host ran the
// same run as without them. Keys a mode reads still load.
func TestGPUKeysRead(t *testing.T) {
	scenario := func(gpu string) string {
		return "name: x\ngpus:\n  - model: H100-SXM5-80GB\n" + gpu + "tenants:\n  - {name: a, workload: {type: training, flops: 1e12}}\n"
	}
	checkLoads(t, scenario, []loadCase{
		{"a time-slice level", "    timeslice: long\n", ""},
		{"an exclusive GPU's level", "    sharing: exclusive\n    timeslice: short\n", ""},
		{"MIG's levels and drain time", "    sharing: mig\n    mig: [{profile: 3g.40gb}]\n    timeslice: medium\n    mig_drain_time: 3s\n", ""},
		{"MPS settings", "    sharing: mps\n    mps: {default_active_threads: 0.5}\n", ""},
		{"MPS settings for MIG's MPS instances", "    sharing: mig\n    mig: [{profile: 3g.40gb, sharing: mps}]\n    mps: {default_active_threads: 0.5}\n", ""},
		{"MPS settings on a time-sliced GPU", "    mps: {default_active_threads: 0.5}\n",
			"x.yaml:4: mps is for sharing mps, mig; a GPU with sharing: time-slice does not read it"},
		{"a vGPU scheduler", "    sharing: vgpu\n    vgpu: {policy: fixed-share}\n", ""},
		{"a level on MPS", "    sharing: mps\n    timeslice: long\n",
			"x.yaml:5: timeslice is for sharing time-slice, exclusive, mig; a GPU with sharing: mps does not read it"},
		{"the default level said on vGPU", "    sharing: vgpu\n    timeslice: default\n",
			"x.yaml:5: timeslice is for sharing time-slice, exclusive, mig; a GPU with sharing: vgpu does not read it"},
		{"a vGPU scheduler on a time-sliced GPU", "    vgpu: {policy: fixed-share}\n",
			"x.yaml:4: vgpu is for sharing vgpu; a GPU with sharing: time-slice does not read it"},
		{"a vGPU scheduler on MPS", "    sharing: mps\n    vgpu: {policy: fixed-share}\n",
			"x.yaml:5: vgpu is for sharing vgpu; a GPU with sharing: mps does not read it"},
		{"MPS settings on vGPU", "    sharing: vgpu\n    mps: {default_active_threads: 0.5}\n",
			"x.yaml:5: mps is for sharing mps, mig; a GPU with sharing: vgpu does not read it"},
		{"a MIG drain time on MPS", "    sharing: mps\n    mig_drain_time: 3s\n",
			"x.yaml:5: mig_drain_time is for sharing time-slice, exclusive, mig; a GPU with sharing: mps does not read it"},
	})
}
