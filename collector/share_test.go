package collector

import (
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// TestShareMinSumGauge attributes readings with a real tenant.Builder and
// checks vgpu_tenant_share_min_sum_ratio: one series per GPU and per MIG
// instance where a tenant with a share.min has usage, the sum as value.
func TestShareMinSumGauge(t *testing.T) {
	const tenants = `tenants:
  - name: a
    selectors: [{executable: a}]
    share: {min: 0.6}
  - name: b
    selectors: [{executable: b}]
    share: {min: 0.6}
  - name: c
    selectors: [{executable: c}]
    share: {min: 0.25}
  - name: d
    selectors: [{executable: d}]
    share: {max: 0.75}
  - name: m1
    selectors: [{mig_uuid: MIG-1}]
    share: {min: 0.7}
  - name: m2
    selectors: [{mig_uuid: MIG-2}]
    share: {min: 0.7}
`
	proc := func(pid uint32, exe string, gi int) gpu.Process {
		p := testutil.MIGProc(pid, exe, gi)
		p.UsedMemoryBytes = gpu.Uint(1 << 30)
		return p
	}
	shared := func(idx int, uuid string, exes ...string) gpu.Device {
		d := gpu.Device{Index: idx, UUID: uuid, Up: true, Mode: gpu.SharingMPS}
		for i, exe := range exes {
			d.Processes = append(d.Processes, proc(uint32(10*idx+i+1), exe, -1))
		}
		return d
	}
	mig := gpu.Device{Index: 2, UUID: "GPU-2", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true,
		MIG:       []gpu.MIGInstance{{UUID: "MIG-1", GPUInstanceID: 1}, {UUID: "MIG-2", GPUInstanceID: 2}, {UUID: "MIG-3", GPUInstanceID: 3}},
		Processes: []gpu.Process{proc(31, "a", 3), proc(32, "b", 3)}}
	tests := []struct {
		name    string
		devs    []gpu.Device
		present []string
		absent  []string
	}{
		{"over-committed and sound GPUs",
			[]gpu.Device{shared(0, "GPU-0", "a", "b", "d"), shared(1, "GPU-1", "a", "c")},
			[]string{
				`vgpu_tenant_share_min_sum_ratio{gpu="0",gpu_instance="",uuid="GPU-0"} 1.2`,
				`vgpu_tenant_share_min_sum_ratio{gpu="1",gpu_instance="",uuid="GPU-1"} 0.85`,
			}, nil},
		{"no tenant with a minimum",
			[]gpu.Device{shared(0, "GPU-0", "d", "x")},
			nil, []string{"vgpu_tenant_share_min_sum_ratio"}},
		{"MIG instances separately",
			[]gpu.Device{mig},
			[]string{
				`vgpu_tenant_share_min_sum_ratio{gpu="2",gpu_instance="1",uuid="GPU-2"} 0.7`,
				`vgpu_tenant_share_min_sum_ratio{gpu="2",gpu_instance="2",uuid="GPU-2"} 0.7`,
				`vgpu_tenant_share_min_sum_ratio{gpu="2",gpu_instance="3",uuid="GPU-2"} 1.2`,
			}, []string{`gpu="2",gpu_instance="",`, ` 1.4`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tenant.ParseConfig("t.yaml", []byte(tenants))
			if err != nil {
				t.Fatal(err)
			}
			b, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{Clock: gpu.NewManualClock(t0)})
			if err != nil {
				t.Fatal(err)
			}
			snap := b.Build(&gpu.Readings{Time: t0, Devices: tc.devs}, gpu.SamplerStats{})
			out := sampleLines(t, withoutDurations(t, newExporter(t, snap, "tenant")))
			var got []string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "vgpu_tenant_share_min_sum_ratio") {
					got = append(got, l)
				}
			}
			if len(got) != len(tc.present) {
				t.Errorf("got %d series, want %d:\n%s", len(got), len(tc.present), strings.Join(got, "\n"))
			}
			for _, p := range tc.present {
				if !strings.Contains(out, p+"\n") {
					t.Errorf("missing %s in\n%s", p, strings.Join(got, "\n"))
				}
			}
			for _, a := range tc.absent {
				for _, l := range got {
					if strings.Contains(l, a) {
						t.Errorf("unexpected %q in %s", a, l)
					}
				}
			}
		})
	}
}

// TestShareMinSumDuplicate: a snapshot listing a share domain twice serves
// the first copy and fails only the tenant collector.
func TestShareMinSumDuplicate(t *testing.T) {
	s := richSnapshot()
	s.Attribution.ShareMinSums = append(s.Attribution.ShareMinSums, tenant.ShareMinSum{GPU: 1, UUID: "GPU-1111", MinSum: 2})
	out := sampleLines(t, withoutDurations(t, newExporter(t, s)))
	for _, want := range []string{
		`vgpu_tenant_share_min_sum_ratio{gpu="1",gpu_instance="",uuid="GPU-1111"} 0.5`,
		`vgpu_scrape_collector_success{collector="tenant"} 0`,
		`vgpu_scrape_collector_success{collector="gpu"} 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
	if strings.Contains(out, `vgpu_tenant_share_min_sum_ratio{gpu="1",gpu_instance="",uuid="GPU-1111"} 2`) {
		t.Errorf("second copy served:\n%s", out)
	}
}

// TestKeptContextSwitchesDuplicate: a kept context-switch count for a
// tenant that has usage on the GPU in the same snapshot (or one listed
// twice) is not served a second time, and fails only the tenant collector.
func TestKeptContextSwitchesDuplicate(t *testing.T) {
	s := richSnapshot()
	s.KeptContextSwitches = append(s.KeptContextSwitches, tenant.KeptCount{Tenant: "train", Class: "batch", GPU: 1, UUID: "GPU-1111", Total: 99})
	out := sampleLines(t, withoutDurations(t, newExporter(t, s)))
	for _, want := range []string{
		`vgpu_tenant_context_switches_total{class="batch",gpu="1",gpu_instance="",tenant="train",uuid="GPU-1111"} 28`,
		`vgpu_tenant_context_switches_total{class="best-effort",gpu="1",gpu_instance="",tenant="infer",uuid="GPU-1111"} 7`,
		`vgpu_scrape_collector_success{collector="tenant"} 0`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
	if strings.Contains(out, "} 99\n") {
		t.Errorf("second copy served:\n%s", out)
	}
}
