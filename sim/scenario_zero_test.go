package sim

import (
	"strings"
	"testing"
)

// TestGivenZeroRefused: an explicit 0 for a key whose 0 stands for its
// absence is refused at the key's line, naming the default it would have
// run; the same scenario without the key loads. Each of these loaded
// before and ran the default silently (iteration_overhead: 0 ran 3ms of
// host time an iteration, occupancy: 0 ran 0.5 though 0 is outside its
// (0,1]).
func TestGivenZeroRefused(t *testing.T) {
	const (
		dnn   = "type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}"
		llm   = "type: llm, params: 8e9, arrival: {process: poisson, rate: 1}"
		train = "type: training, flops: 1e12"
	)
	scenario := func(top, gpu, tenant, workload string) string {
		return "name: x\n" + top + "gpus:\n  - {model: H100-SXM5-80GB" + gpu + "}\ntenants:\n  - {name: a, " + tenant + "workload: {" + workload + "}}\n"
	}
	for _, c := range []struct {
		key, src, want string
	}{
		{"duration", scenario("duration: 0s\n", "", "", dnn), "x.yaml:2: duration: an explicit 0 here would run the default, 10m"},
		{"migration_time", scenario("control: {migration_time: 0s}\n", "", "", dnn), "x.yaml:2: migration_time: an explicit 0 here would run the default, 5s"},
		{"load_bandwidth", scenario("control: {load_bandwidth: 0}\n", "", "", dnn), "x.yaml:2: load_bandwidth: an explicit 0"},
		{"drain_timeout", scenario("control: {drain_timeout: 0s}\n", "", "", dnn), "x.yaml:2: drain_timeout: an explicit 0"},
		{"checkpoint_bandwidth", scenario("control: {checkpoint_bandwidth: 0}\n", "", "", dnn), "x.yaml:2: checkpoint_bandwidth: an explicit 0"},
		{"restart_time", scenario("", ", sharing: mps, mps: {restart_time: 0s}", "", dnn), "x.yaml:3: restart_time: an explicit 0 here would run the default, 100us"},
		{"mig_drain_time", scenario("", ", sharing: mig, mig: [{profile: 7g.80gb}], mig_drain_time: 0s", "mig_instance: 0, ", dnn), "x.yaml:3: mig_drain_time: an explicit 0"},
		{"vgpu timeslice", scenario("", ", sharing: vgpu, vgpu: {timeslice: 0s}", "", dnn), "x.yaml:3: timeslice: an explicit 0 here would run the default, 2ms"},
		{"min_timeslice", scenario("", ", sharing: vgpu, vgpu: {min_timeslice: 0s}", "", dnn), "x.yaml:3: min_timeslice: an explicit 0"},
		{"max_timeslice", scenario("", ", sharing: vgpu, vgpu: {max_timeslice: 0s}", "", dnn), "x.yaml:3: max_timeslice: an explicit 0"},
		{"power_limit", scenario("", ", power_limit: 0", "", dnn), "x.yaml:3: power_limit: an explicit 0 here would run the default, the TDP"},
		{"reserved_memory", scenario("", ", reserved_memory: 0", "", dnn), "x.yaml:3: reserved_memory: an explicit 0"},
		{"pid", scenario("", "", "process: {pid: 0}, ", dnn), "x.yaml:5: pid: an explicit 0"},
		{"memory", scenario("", "", "memory: 0, ", dnn), "x.yaml:5: memory: an explicit 0"},
		{"mps_active_threads", scenario("", ", sharing: mps", "mps_active_threads: 0, ", dnn), "x.yaml:5: mps_active_threads: an explicit 0"},
		{"vm weight", scenario("", ", sharing: vgpu", "vm: {weight: 0}, ", dnn), "x.yaml:5: weight: an explicit 0 here would run the default, 1"},
		{"sm_fraction", scenario("", "", "", dnn+", sm_fraction: 0"), "x.yaml:5: sm_fraction: an explicit 0 here would run the default, 1"},
		{"occupancy", scenario("", "", "", dnn+", occupancy: 0.0"), "x.yaml:5: occupancy: an explicit 0 here would run the default, 0.5"},
		{"dnn max_batch", scenario("", "", "", dnn+", max_batch: 0"), "x.yaml:5: max_batch: an explicit 0 here would run the default, 1 "},
		{"llm max_batch", scenario("", "", "", llm+", max_batch: 0"), "x.yaml:5: max_batch: an explicit 0 here would run the default, 64"},
		{"checkpoint_interval", scenario("", "", "", train+", checkpoint_interval: 0s"), "x.yaml:5: checkpoint_interval: an explicit 0 here would run the default, 10m0s"},
		{"iteration_overhead", scenario("", "", "", llm+", iteration_overhead: 0s"), "x.yaml:5: iteration_overhead: an explicit 0 here would run the default, 3ms"},
		{"sequence_overhead", scenario("", "", "", llm+", sequence_overhead: 0s"), "x.yaml:5: sequence_overhead: an explicit 0"},
		{"weights_bytes", scenario("", "", "", llm+", weights_bytes: 0"), "x.yaml:5: weights_bytes: an explicit 0"},
		{"kv_bytes_per_token", scenario("", "", "", llm+", kv_bytes_per_token: 0"), "x.yaml:5: kv_bytes_per_token: an explicit 0"},
		{"context_tokens", scenario("", "", "", llm+", context_tokens: 0"), "x.yaml:5: context_tokens: an explicit 0 here would run the default, 512"},
		{"generated_tokens", scenario("", "", "", llm+", generated_tokens: 0"), "x.yaml:5: generated_tokens: an explicit 0 here would run the default, 128"},
	} {
		t.Run(c.key, func(t *testing.T) {
			_, err := ParseScenario("x.yaml", []byte(c.src))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s\n%v, want %q", c.src, err, c.want)
			}
		})
	}
	// a dnn's weights_bytes has no default: its 0 is a value
	if _, err := ParseScenario("x.yaml", []byte(scenario("", "", "", dnn+", weights_bytes: 0"))); err != nil {
		t.Errorf("dnn weights_bytes: 0: %v", err)
	}
}
