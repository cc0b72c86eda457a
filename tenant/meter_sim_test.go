package tenant_test

import (
	"context"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/simtest"
	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// TestMetersConserveOnScenarios runs every built-in scenario (its whole
// duration; its first minute under the race detector), tenants coming and
// going as the scenario has them, under both idle-energy rules, at a price
// per GPU-hour and per kWh, and checks at every sample that each GPU's
// tenants' energy and idle energy add up to the increase of its energy
// counter, and over the run, within 1%: that the tenants' GPU-seconds of
// use add up to the GPU's SM-active seconds on whole GPUs, and on MIG GPUs
// to its instances' SM-active seconds, each instance's weighted by its part
// of the GPU's SMs (the instances' own GPM figures: NVML has no per-tenant
// figure inside an instance), and their reserved GPU-seconds to at most
// the time metered; that the tenants' and
// the idle costs add up to the GPU's time and energy counter's increase at
// the prices; that the GPU's memory byte-seconds are the integral of its
// used memory, and the tenants' add up to it less the memory the driver
// reserves (the scenario's reserved_memory), which is also all the memory
// the GPU's processes report. The worst errors are logged.
func TestMetersConserveOnScenarios(t *testing.T) {
	list, err := scenarios.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 {
		t.Fatal("no built-in scenarios")
	}
	worst := map[string]worstErr{}
	for _, bi := range list {
		for _, rule := range []tenant.IdleEnergy{tenant.IdleToIdle, tenant.IdleByReservation} {
			name := bi.Name + "/" + string(rule)
			t.Run(name, func(t *testing.T) {
				for meter, e := range checkScenarioMeters(t, bi, rule) {
					if e > worst[meter].err || worst[meter].at == "" {
						worst[meter] = worstErr{e, name}
					}
				}
			})
		}
	}
	for _, meter := range slices.Sorted(maps.Keys(worst)) {
		t.Logf("worst relative error of %s: %.3g (%s)", meter, worst[meter].err, worst[meter].at)
	}
}

type worstErr struct {
	err float64
	at  string
}

// relErr is |got-want| relative to want (to 1 where want is below 1).
func relErr(got, want float64) float64 { return math.Abs(got-want) / max(math.Abs(want), 1) }

// checkScenarioMeters runs one scenario under rule and returns, by meter,
// its worst relative error over the GPUs.
func checkScenarioMeters(t *testing.T, bi scenarios.Builtin, rule tenant.IdleEnergy) map[string]float64 {
	sc, cfg := loadBuiltin(t, bi)
	if cfg == nil {
		cfg = tenant.EmptyConfig()
	}
	cfg.Defaults.IdleEnergy = rule
	gpuHour, kWh := 2.5, 0.15
	cfg.Metering = &tenant.Prices{Currency: "USD", PerGPUHour: &gpuHour, PerKWh: &kWh}
	h := simtest.Start(t, sc, cfg)
	ctx := context.Background()
	run := sc.Duration
	if raceEnabled {
		run = min(run, raceRun)
	}
	firstEnergy := map[string]float64{}
	smSeconds := map[string]float64{}  // whole GPUs: the GPU's SM-active seconds
	migSeconds := map[string]float64{} // MIG GPUs: the instances' SM-active seconds, in whole-GPU seconds
	wholeGPU, migGPU := map[string]bool{}, map[string]bool{}
	deviceMem, processMem, reservedMem := map[string]float64{}, map[string]float64{}, map[string]float64{}
	var metered time.Duration
	var snap *tenant.Snapshot
	for step := 1; step <= int(run/truthSample); step++ {
		r := h.Sample(ctx, truthSample)
		h.Clock.Set(h.Sim.Now())
		snap = h.Builder.Build(r, gpu.SamplerStats{})
		for _, d := range r.Devices {
			if !d.Up || d.EnergyJoules == nil {
				continue
			}
			if _, ok := firstEnergy[d.UUID]; !ok {
				firstEnergy[d.UUID] = *d.EnergyJoules
			}
			wholeGPU[d.UUID] = !d.MIGEnabled
			if d.Activity.SMActive != nil && r.Interval > 0 {
				smSeconds[d.UUID] += *d.Activity.SMActive * r.Interval.Seconds()
			}
			if d.MIGEnabled {
				migSeconds[d.UUID] += instancesSMSeconds(&d, r.Interval.Seconds())
				migGPU[d.UUID] = true
			}
		}
		for _, d := range r.Devices {
			if !d.Up {
				continue
			}
			sec := r.Interval.Seconds()
			deviceMem[d.UUID] += sec * float64(d.MemoryUsedBytes)
			reservedMem[d.UUID] += sec * float64(sc.GPUs[d.Index].Reserved)
			for _, p := range d.Processes {
				if p.UsedMemoryBytes != nil {
					processMem[d.UUID] += sec * float64(*p.UsedMemoryBytes)
				}
			}
		}
		metered += r.Interval
		tenantsEnergy := map[string]float64{}
		for _, m := range snap.Meters {
			tenantsEnergy[m.UUID] += m.EnergyJoules
		}
		for _, g := range snap.GPUMeters {
			if got := tenantsEnergy[g.UUID] + g.IdleEnergyJoules; math.Abs(got-g.EnergyJoules) > 1e-6*max(1, g.EnergyJoules) {
				t.Fatalf("step %d GPU %d: tenants %.6f J + idle %.6f J != %.6f J counted", step, g.GPU, tenantsEnergy[g.UUID], g.IdleEnergyJoules, g.EnergyJoules)
			}
		}
	}
	if snap == nil || len(snap.GPUMeters) == 0 {
		t.Fatal("nothing metered")
	}
	last := map[string]float64{}
	for _, d := range snap.Readings.Devices {
		if d.EnergyJoules != nil {
			last[d.UUID] = *d.EnergyJoules
		}
	}
	used, reserved, memory, cost := map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}
	addCosts := func(uuid string, cs []tenant.Cost) {
		for _, c := range cs {
			if c.Currency != "USD" || !c.GPUTimePriced || !c.EnergyPriced {
				t.Errorf("GPU %s: cost %+v, want USD with both components", uuid, c)
			}
			cost[uuid] += c.GPUTime + c.Energy
		}
	}
	for _, m := range snap.Meters {
		used[m.UUID] += m.GPUSecondsUsed
		reserved[m.UUID] += m.GPUSecondsReserved
		memory[m.UUID] += m.MemoryByteSeconds
		addCosts(m.UUID, m.Costs)
	}
	worst := map[string]float64{}
	check := func(meter string, gpu int, got, want float64, what string) {
		e := relErr(got, want)
		worst[meter] = max(worst[meter], e)
		if e > 0.01 {
			t.Errorf("GPU %d: %s: %.6g, want %.6g (%.2f%% off)", gpu, what, got, want, 100*e)
		}
	}
	for _, g := range snap.GPUMeters {
		// the device's energy over the whole run, against the meters'
		dev := last[g.UUID] - firstEnergy[g.UUID]
		if dev <= 0 {
			t.Errorf("GPU %d: the GPU counted %.1f J over the run", g.GPU, dev)
		}
		check("energy", g.GPU, g.EnergyJoules, dev, "joules the meters divided against the GPU's counter's increase")
		if wholeGPU[g.UUID] {
			check("gpu_used_seconds", g.GPU, used[g.UUID], smSeconds[g.UUID], "tenants' GPU-seconds of use against the GPU's SM-active seconds")
		} else if migGPU[g.UUID] {
			check("gpu_used_seconds_mig", g.GPU, used[g.UUID], migSeconds[g.UUID], "tenants' GPU-seconds of use against the MIG instances' SM-active seconds")
		}
		if reserved[g.UUID] > metered.Seconds()*1.0001 {
			t.Errorf("GPU %d: %.2f reserved GPU-seconds in %.2f s", g.GPU, reserved[g.UUID], metered.Seconds())
		}
		addCosts(g.UUID, g.IdleCosts)
		check("cost", g.GPU, cost[g.UUID], metered.Seconds()*gpuHour/3600+dev*kWh/3.6e6,
			"tenants' and idle cost against the GPU's time and energy at the prices")
		check("gpu_memory_byte_seconds", g.GPU, g.MemoryByteSeconds, deviceMem[g.UUID], "the GPU's memory byte-seconds against the integral of its used memory")
		check("memory_byte_seconds", g.GPU, memory[g.UUID], deviceMem[g.UUID]-reservedMem[g.UUID],
			"tenants' memory byte-seconds against the GPU's less the driver's reserve")
		check("memory_byte_seconds_processes", g.GPU, memory[g.UUID], processMem[g.UUID], "tenants' memory byte-seconds against its processes'")
		worst["memory_unattributed_fraction"] = max(worst["memory_unattributed_fraction"], 1-memory[g.UUID]/g.MemoryByteSeconds)
	}
	return worst
}

// instancesSMSeconds is a MIG GPU's instances' SM-active time over sec
// seconds, each instance's SM-active share weighted by its part of the
// GPU's SMs (of the instances' SMs where the GPU's count is unknown).
func instancesSMSeconds(d *gpu.Device, sec float64) float64 {
	total := d.SMCount
	if total <= 0 {
		for _, mi := range d.MIG {
			total += mi.SMCount
		}
	}
	var s float64
	for _, mi := range d.MIG {
		if mi.Activity.SMActive != nil && total > 0 {
			s += *mi.Activity.SMActive * float64(mi.SMCount) / float64(total) * sec
		}
	}
	return s
}

// loadBuiltin loads a built-in scenario and its tenants file (nil when it
// has none).
func loadBuiltin(t *testing.T, bi scenarios.Builtin) (*sim.Scenario, *tenant.Config) {
	t.Helper()
	sc, err := sim.LoadScenarioFS(bi.FS, bi.Path)
	if err != nil {
		t.Fatal(bi.Explain(err))
	}
	name, data, err := bi.Tenants()
	if err != nil {
		t.Fatal(err)
	}
	var cfg *tenant.Config
	if name != "" {
		if cfg, err = tenant.ParseConfig(name, data); err != nil {
			t.Fatal(bi.Explain(err))
		}
	}
	return sc, cfg
}

// TestMeterGPUOutageOnScenario: GPU 0 of the scenario is lost from 70 s to
// 90 s, under idle_energy: reservation. At the first sample back, sampled
// every second, the tenants get at most the part of the energy counter's
// increase that falls in that sample's second; the 20 s of the outage go to
// the GPU's idle energy, as no tenant was billed GPU time for them.
func TestMeterGPUOutageOnScenario(t *testing.T) {
	h := simtest.New(t, "testdata/ts-churn-outage.yaml", "testdata/ts-churn-outage.tenants.yaml")
	ctx := context.Background()
	type state struct {
		at                             time.Time
		counter, idle, tens, unsampled float64
	}
	var before *state
	checked := false
	for step := 1; step <= 95 && !checked; step++ {
		r := h.Sample(ctx, time.Second)
		snap := h.Build(ctx, r)
		d := r.Devices[0]
		if !d.Up {
			continue
		}
		now := state{at: r.Time, counter: *d.EnergyJoules, idle: snap.GPUMeters[0].IdleEnergyJoules, unsampled: snap.GPUMeters[0].UnsampledEnergyJoules}
		if before != nil && r.Time.Sub(before.at) <= r.Interval && now.unsampled != before.unsampled {
			t.Errorf("at %v, no gap: unsampled energy went from %.1f J to %.1f J", r.Time, before.unsampled, now.unsampled)
		}
		for _, m := range snap.Meters {
			if m.UUID == d.UUID {
				now.tens += m.EnergyJoules
			}
		}
		if before != nil && r.Time.Sub(before.at) > r.Interval {
			span := r.Time.Sub(before.at).Seconds()
			gpuJ, tenantsJ, idleJ := now.counter-before.counter, now.tens-before.tens, now.idle-before.idle
			sampled := gpuJ * r.Interval.Seconds() / span
			t.Logf("first sample back after %.0f s: GPU %.1f J, tenants %.1f J, idle %.1f J", span, gpuJ, tenantsJ, idleJ)
			if tenantsJ > sampled+1e-6 || idleJ < gpuJ-sampled-1e-6 || math.Abs(tenantsJ+idleJ-gpuJ) > 1e-6*gpuJ {
				t.Errorf("tenants got %.1f J and idle %.1f J of %.1f J: want the tenants at most the sample's %.1f J", tenantsJ, idleJ, gpuJ, sampled)
			}
			// the idle energy's part of the gap, shown apart
			if gap := gpuJ - sampled; math.Abs(now.unsampled-before.unsampled-gap) > 1e-6*gpuJ || gap <= 0 {
				t.Errorf("unsampled energy grew by %.1f J over the gap, want %.1f J (the GPU's %.1f J less the sample's %.1f J)", now.unsampled-before.unsampled, gap, gpuJ, sampled)
			}
			checked = true
		}
		before = &now
	}
	if !checked {
		t.Fatal("no sample after an outage")
	}
}

// TestMeterVGPUUnknownProfile: on a vGPU host, a VM whose profile's
// framebuffer is unknown holds an equal part of what the VMs with a
// profile leave (docs/metering.md): beside an H100-20C (a quarter of the
// GPU), the rest, 0.75, not the 30 GB it uses over the GPU's memory.
func TestMeterVGPUUnknownProfile(t *testing.T) {
	sc, err := sim.ParseScenario("vgpu-unknown.yaml", []byte(`name: vgpu-unknown
gpus: [{model: H100-SXM5-80GB, sharing: vgpu}]
tenants:
  - {name: known, memory: 10GB, vm: {name: vm-known, type: H100-20C}, workload: {type: training, flops: 1e12}}
  - {name: custom, memory: 30GB, vm: {name: vm-custom, type: H100-custom}, workload: {type: training, flops: 1e12}}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tenant.ParseConfig("vgpu-unknown.tenants.yaml", []byte(`tenants:
  - {name: known, class: batch, selectors: [{vgpu: {vm_name: vm-known}}]}
  - {name: custom, class: batch, selectors: [{vgpu: {vm_name: vm-custom}}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	h := simtest.Start(t, sc, cfg)
	ctx := context.Background()
	var snap *tenant.Snapshot
	for range 10 {
		snap = h.Build(ctx, h.Sample(ctx, time.Second))
	}
	held := map[string]float64{}
	for _, m := range snap.Meters {
		held[m.Tenant] = m.GPUSecondsReserved
	}
	// the first sample has no interval: 9 s metered
	want := map[string]float64{"known": 0.25 * 9, "custom": 0.75 * 9}
	if !maps.EqualFunc(held, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
		t.Errorf("reserved GPU-seconds %v, want %v", held, want)
	}
}

// TestMeterSharedMIGInstance: in a MIG instance two tenants share (x's
// training job and an unmatched inference server, unassigned, 10 GiB
// each), NVML has no figure per process and the instance's activity is
// split by memory: both get the same SM share, energy and GPU-seconds,
// apportioned, however busy each one's kernels are (docs/metering.md).
func TestMeterSharedMIGInstance(t *testing.T) {
	h := simtest.New(t, "testdata/churn/mig-two.yaml", "testdata/churn/mig-two.tenants.yaml")
	ctx := context.Background()
	var snap *tenant.Snapshot
	for range 20 { // the unmatched server stops at 25 s
		snap = h.Build(ctx, h.Sample(ctx, time.Second))
	}
	sm := map[string]float64{}
	for _, u := range snap.Usage {
		if u.GPUInstance == "1" && u.SMActive != nil && u.Method == tenant.Apportioned {
			sm[u.Tenant] = *u.SMActive
		}
	}
	meters := map[string]tenant.Meter{}
	for _, m := range snap.Meters {
		meters[m.Tenant] = m
	}
	x, un := meters["x"], meters[tenant.Unassigned]
	if len(sm) != 2 || sm["x"] != sm[tenant.Unassigned] || sm["x"] < 0.4 {
		t.Errorf("instance 1's apportioned SM shares %v, want x and unassigned alike", sm)
	}
	if x.EnergyJoules <= 0 || x.EnergyJoules != un.EnergyJoules || x.GPUSecondsUsed != un.GPUSecondsUsed {
		t.Errorf("x %.1f J, %.2f GPU-s used; unassigned %.1f J, %.2f: want them alike", x.EnergyJoules, x.GPUSecondsUsed, un.EnergyJoules, un.GPUSecondsUsed)
	}
}

// TestMeterMIGSMsOutsideInstances: a MIG instance holds its part of the
// GPU's SMs, and a layout's instances hold fewer SMs than the GPU has
// (h200-mig's 3g.71gb and 4g.71gb, both in use: 60 + 64 of 132), so the
// rest, 8/132 of the GPU, is held by nobody: its GPU time goes to the idle
// cost (docs/metering.md).
func TestMeterMIGSMsOutsideInstances(t *testing.T) {
	bi, err := scenarios.Find("h200-mig")
	if err != nil {
		t.Fatal(err)
	}
	sc, cfg := loadBuiltin(t, bi)
	perHour := 3600.0 // 1 a GPU-second
	cfg.Metering = &tenant.Prices{Currency: "USD", PerGPUHour: &perHour}
	h := simtest.Start(t, sc, cfg)
	ctx := context.Background()
	var snap *tenant.Snapshot
	for range 11 { // the first sample has no interval: 10 s metered
		snap = h.Build(ctx, h.Sample(ctx, time.Second))
	}
	held := map[string]float64{}
	for _, m := range snap.Meters {
		held[m.Tenant] = m.GPUSecondsReserved
	}
	want := map[string]float64{"chat": 10 * 60.0 / 132, "vision": 10 * 64.0 / 132}
	if !maps.EqualFunc(held, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
		t.Errorf("reserved GPU-seconds %v, want %v", held, want)
	}
	if got := snap.GPUMeters[0].IdleCosts[0].GPUTime; math.Abs(got-10*8.0/132) > 1e-9 {
		t.Errorf("idle GPU-time cost %.4f, want %.4f: the 8 SMs of no instance for 10 s", got, 10*8.0/132)
	}
}
