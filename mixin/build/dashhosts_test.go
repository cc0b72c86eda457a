package main

import (
	"fmt"
	"testing"
)

// TestTenantTunerActionsOnlyOnItsHosts: the tenant dashboard's "Tuner
// actions on the tenant's hosts" leaves out the actions of a host the
// tenant has no process on. Every exporter serves vgpu_tenant_info for
// every tenant of the (fleet-wide) tenants file: h2 serves it for ghost,
// which runs only on h1; the tuner of h2 applies a power-limit change and
// reverts one at 10m. Evaluated by promtool, neither shows.
func TestTenantTunerActionsOnlyOnItsHosts(t *testing.T) {
	const title = "Tuner actions on the tenant's hosts"
	for i, e := range panelExprs(t, "dashboards/vgpu-tenant.json", title) {
		t.Run(fmt.Sprint("target", i), func(t *testing.T) {
			runExprTest(t, fmt.Sprintf(`
tests:
  - interval: 1m
    input_series:
      - series: 'vgpu_tenant_info{job="vgpu",instance="h1",tenant="ghost",class="latency",priority="1"}'
        values: '1x20'
      - series: 'vgpu_tenant_info{job="vgpu",instance="h2",tenant="ghost",class="latency",priority="1"}'
        values: '1x20'
      - series: 'vgpu_tenant_processes{job="vgpu",instance="h1",tenant="ghost",class="latency",gpu="0",uuid="G1"}'
        values: '1x20'
      - series: 'vgpu_tuner_actions_total{job="vgpu",instance="h1",knob="power_limit",outcome="applied"}'
        values: '0x20'
      - series: 'vgpu_tuner_actions_total{job="vgpu",instance="h2",knob="power_limit",outcome="applied"}'
        values: '0x9 1x10'
      - series: 'vgpu_tuner_reverts_total{job="vgpu",instance="h1"}'
        values: '0x20'
      - series: 'vgpu_tuner_reverts_total{job="vgpu",instance="h2"}'
        values: '0x9 1x10'
    promql_expr_test:
      - {expr: %[1]q, eval_time: 10m, exp_samples: []}
      - {expr: %[1]q, eval_time: 11m, exp_samples: []}
      - {expr: %[1]q, eval_time: 12m, exp_samples: []}
`, e))
		})
	}
}

// TestTenantActionsShowOnItsHosts: the same panel shows the actions of a
// host the tenant runs on (h1: a power-limit change and a revert at 10m).
func TestTenantActionsShowOnItsHosts(t *testing.T) {
	const title = "Tuner actions on the tenant's hosts"
	for i, e := range panelExprs(t, "dashboards/vgpu-tenant.json", title) {
		t.Run(fmt.Sprint("target", i), func(t *testing.T) {
			runExprTest(t, fmt.Sprintf(`
tests:
  - interval: 1m
    input_series:
      - series: 'vgpu_tenant_info{job="vgpu",instance="h1",tenant="chat",class="latency",priority="1"}'
        values: '1x20'
      - series: 'vgpu_tenant_processes{job="vgpu",instance="h1",tenant="chat",class="latency",gpu="0",uuid="G1"}'
        values: '1x20'
      - series: 'vgpu_tuner_actions_total{job="vgpu",instance="h1",knob="power_limit",outcome="applied"}'
        values: '0x9 1x10'
      - series: 'vgpu_tuner_reverts_total{job="vgpu",instance="h1"}'
        values: '0x9 1x10'
    promql_expr_test:
      - {expr: 'count(%[1]s)', eval_time: 10m, exp_samples: [{labels: '{}', value: 1}]}
`, e))
		})
	}
}

// TestMIGTenantStackAddsUpToGPU: the GPU dashboard's "SM active per
// tenant" and "HBM bandwidth per tenant", stacked, add up to the GPU's
// figure on a MIG GPU too. Two instances of 60 and 64 of the GPU's 132
// SMs (3 and 4 of its 8 memory slices: 29.6 and 39.4 of its 80 GB), each
// 80% busy with one tenant:
// the GPU is 0.7515 SM active (124 x 0.8 / 132, to 4 places) and 0.7 HBM
// busy (7 x 0.8 / 8); the stacks read those, not the fractions added
// (1.6). A whole GPU's tenant (h2) reads its own fraction.
func TestMIGTenantStackAddsUpToGPU(t *testing.T) {
	for _, tc := range []struct {
		title, metric string
		want          float64
	}{
		{"SM active per tenant", "vgpu_tenant_sm_active_ratio", 0.7515},
		{"HBM bandwidth per tenant", "vgpu_tenant_dram_active_ratio", 0.7},
	} {
		t.Run(tc.title, func(t *testing.T) {
			e := panelExprs(t, "dashboards/vgpu-gpu.json", tc.title)[0]
			runExprTest(t, fmt.Sprintf(`
tests:
  - interval: 1m
    input_series:
      - series: 'vgpu_gpu_streaming_multiprocessors{job="vgpu",instance="h1",gpu="0",uuid="G1"}'
        values: '132x5'
      - series: 'vgpu_mig_streaming_multiprocessors{job="vgpu",instance="h1",gpu="0",uuid="G1",gpu_instance="1"}'
        values: '60x5'
      - series: 'vgpu_mig_streaming_multiprocessors{job="vgpu",instance="h1",gpu="0",uuid="G1",gpu_instance="2"}'
        values: '64x5'
      - series: 'vgpu_gpu_memory_total_bytes{job="vgpu",instance="h1",gpu="0",uuid="G1"}'
        values: '80e9x5'
      - series: 'vgpu_mig_memory_total_bytes{job="vgpu",instance="h1",gpu="0",uuid="G1",gpu_instance="1"}'
        values: '29.6e9x5'
      - series: 'vgpu_mig_memory_total_bytes{job="vgpu",instance="h1",gpu="0",uuid="G1",gpu_instance="2"}'
        values: '39.4e9x5'
      - series: '%[2]s{job="vgpu",instance="h1",gpu="0",uuid="G1",gpu_instance="1",tenant="a",class="latency"}'
        values: '0.8x5'
      - series: '%[2]s{job="vgpu",instance="h1",gpu="0",uuid="G1",gpu_instance="2",tenant="b",class="batch"}'
        values: '0.8x5'
      - series: '%[2]s{job="vgpu",instance="h2",gpu="0",uuid="G2",gpu_instance="",tenant="a",class="latency"}'
        values: '0.5x5'
    promql_expr_test:
      - expr: 'round(sum by (instance) (%[1]s), 0.0001)'
        eval_time: 2m
        exp_samples:
          - {labels: '{instance="h1"}', value: %[3]v}
          - {labels: '{instance="h2"}', value: 0.5}
`, e, tc.metric, tc.want))
		})
	}
}

// TestHostsInEnforceCountsGPUModes: the tuner dashboard's "Hosts in
// enforce" counts a host whose tuner enforces on one GPU
// (--tuner.gpu-mode=0=enforce) while its host-wide mode is recommend (h1):
// that host changes the GPU's settings. A host in enforce (h2) counts
// once, whatever its GPUs' modes; one in recommend throughout (h3) not.
func TestHostsInEnforceCountsGPUModes(t *testing.T) {
	e := panelExprs(t, "dashboards/vgpu-tuner.json", "Hosts in enforce")[0]
	runExprTest(t, fmt.Sprintf(`
tests:
  - interval: 1m
    input_series:
      - series: 'vgpu_tuner_mode{job="vgpu",instance="h1",mode="recommend"}'
        values: '1x5'
      - series: 'vgpu_tuner_mode{job="vgpu",instance="h1",mode="enforce"}'
        values: '0x5'
      - series: 'vgpu_tuner_gpu_mode{job="vgpu",instance="h1",gpu="0",uuid="G1",mode="enforce"}'
        values: '1x5'
      - series: 'vgpu_tuner_gpu_mode{job="vgpu",instance="h1",gpu="0",uuid="G1",mode="recommend"}'
        values: '0x5'
      - series: 'vgpu_tuner_mode{job="vgpu",instance="h2",mode="enforce"}'
        values: '1x5'
      - series: 'vgpu_tuner_gpu_mode{job="vgpu",instance="h2",gpu="0",uuid="G2",mode="enforce"}'
        values: '1x5'
      - series: 'vgpu_tuner_gpu_mode{job="vgpu",instance="h2",gpu="1",uuid="G3",mode="enforce"}'
        values: '1x5'
      - series: 'vgpu_tuner_mode{job="vgpu",instance="h3",mode="recommend"}'
        values: '1x5'
      - series: 'vgpu_tuner_gpu_mode{job="vgpu",instance="h3",gpu="0",uuid="G4",mode="recommend"}'
        values: '1x5'
    promql_expr_test:
      - expr: %[1]q
        eval_time: 2m
        exp_samples: [{labels: '{}', value: 2}]
`, e))
}
