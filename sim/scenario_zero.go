package sim

import "github.com/vgpu-exporter/vgpu_exporter/internal/yamlconf"

// givenZero is a key whose 0 in the parsed scenario stands for its
// absence: validation replaces it by a default. Given explicitly, such a
// 0 would run the default silently (iteration_overhead: 0 would run 3ms,
// occupancy: 0 would run 0.5), so checkGivenZeros refuses it, as the
// keys checked where they are validated (max_queue, timeout, speedup,
// default_active_threads) are refused.
type givenZero struct {
	zero bool   // the parsed value is 0
	def  string // the default it would run, in words
	path []any  // keys and indexes from the root
}

// checkGivenZeros refuses an explicit 0 for a key whose 0 stands for its
// absence, naming the key's line and its default. It runs on the
// scenario as parsed, before any default is filled in.
func (p *parser) checkGivenZeros(sc *Scenario) error {
	keys := []givenZero{
		{sc.Duration == 0, "10m", []any{"duration"}},
		{sc.Control.MigrationTime == 0, defaultStartTime.String(), []any{"control", "migration_time"}},
		{sc.Control.LoadBandwidth == 0, "2GB", []any{"control", "load_bandwidth"}},
		{sc.Control.DrainTimeout == 0, defaultDrainTimeout.String(), []any{"control", "drain_timeout"}},
		{sc.Control.CheckpointBandwidth == 0, "2GB", []any{"control", "checkpoint_bandwidth"}},
	}
	for i := range sc.GPUs {
		g := &sc.GPUs[i]
		at := func(k ...any) []any { return append([]any{"gpus", i}, k...) }
		keys = append(keys,
			givenZero{g.MPS.RestartTime == 0, "100us", at("mps", "restart_time")},
			givenZero{g.DrainTime == 0, "2s", at("mig_drain_time")},
			givenZero{g.VGPU.MinTimeSlice == 0, "1ms", at("vgpu", "min_timeslice")},
			givenZero{g.VGPU.MaxTimeSlice == 0, "30ms", at("vgpu", "max_timeslice")},
			givenZero{g.VGPU.TimeSlice == 0, "2ms", at("vgpu", "timeslice")},
			givenZero{g.PowerLimW == 0, "the TDP", at("power_limit")},
			givenZero{g.Reserved == 0, "512MiB", at("reserved_memory")},
		)
	}
	for i := range sc.Tenants {
		t := &sc.Tenants[i]
		w := &t.Workload
		at := func(k ...any) []any { return append([]any{"tenants", i}, k...) }
		wl := func(k ...any) []any { return append([]any{"tenants", i, "workload"}, k...) }
		llm, training := w.Type == "llm", w.Type == "training"
		batch := "1"
		if llm {
			batch = "64"
		}
		keys = append(keys,
			givenZero{t.Process.PID == 0, "4000 + 17 x the tenant's index", at("process", "pid")},
			givenZero{t.Memory == 0, "the workload's", at("memory")},
			givenZero{t.MPSThreads == 0, "none: the server's value", at("mps_active_threads")},
			givenZero{t.VM.Weight == 0, "1", at("vm", "weight")},
			givenZero{w.SMFraction == 0, "1", wl("sm_fraction")},
			givenZero{w.Occupancy == 0, "0.5", wl("occupancy")},
			givenZero{w.MaxBatch == 0 && !training, batch, wl("max_batch")},
			givenZero{w.CheckpointInterval == 0 && training, defaultCheckpointInterval.String(), wl("checkpoint_interval")},
			givenZero{w.IterationOverhead == 0 && llm, defaultIterationOverhead.String(), wl("iteration_overhead")},
			givenZero{w.SeqOverhead == 0 && llm, defaultSeqOverhead.String(), wl("sequence_overhead")},
			givenZero{w.WeightsBytes == 0 && llm, "2 bytes a parameter", wl("weights_bytes")},
			givenZero{w.KVBytesPerToken == 0 && llm, "128KiB x params / 8e9", wl("kv_bytes_per_token")},
			givenZero{w.ContextTokens == 0 && llm, "512", wl("context_tokens")},
			givenZero{w.GeneratedTokens == 0 && llm, "128", wl("generated_tokens")},
		)
	}
	for _, k := range keys {
		if k.zero && yamlconf.Has(p.root, k.path...) {
			return p.errAt(k.path, "%s: an explicit 0 here would run the default, %s (leave the key out for it)", k.path[len(k.path)-1], k.def)
		}
	}
	return nil
}
