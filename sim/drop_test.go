package sim

import (
	"cmp"
	"context"
	"fmt"
	"testing"
	"time"
)

// TestDroppedStreamsMissTheirTokens: under an ITL SLO a dropped request
// misses every token after its first that it had not produced, however
// it was dropped, and at least one. With every request of gen tokens,
// each request that ended (completed or dropped) accounts for gen-1
// observations, served or missed: the windows' Tokens and DroppedTokens
// together are that much a request, plus the tokens the streams still
// running at the end have had judged, plus one for each request that
// had no token left to miss (one-token requests; a timed-out one at its
// last token). Before, a dropped request was one missed observation
// however many tokens it had left: a full queue that rejected a 40-token
// request cost one observation where serving it slowly could have cost
// 39.
func TestDroppedStreamsMissTheirTokens(t *testing.T) {
	tenantOf := func(gen int, extra string) string {
		return fmt.Sprintf(`  - {name: chat, process: {pid: 1}, memory: 30GB, slo: {quantile: 0.99, target: 50ms, metric: itl}, workload: {type: llm, params: 8e9, weights_bytes: 16GB, context_tokens: 512, generated_tokens: %d, fixed_tokens: true%s}}
`, gen, extra)
	}
	tenant := func(extra string) string { return tenantOf(40, extra) }
	restart := func(s *Simulator) {
		if err := s.RestartClient(context.Background(), s.sc.GPUs[0].UUID, 1, "chat"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, src string
		at        func(*Simulator) // at 10 s, if set
		midStream bool             // some requests were dropped after their first token
		gen       int              // tokens a request (40 when 0)
	}{
		{name: "full queue", src: tenant(", max_batch: 4, max_queue: 2, arrival: {process: poisson, rate: 40}")},
		{name: "full queue, one-token requests", gen: 1, src: tenantOf(1, ", max_batch: 1, max_queue: 2, arrival: {process: poisson, rate: 2000}")},
		{name: "client timeout", src: tenant(", max_batch: 8, timeout: 1s, arrival: {process: poisson, rate: 40}"), midStream: true},
		{name: "stop past the drain timeout", src: tenant(", max_batch: 64, arrival: {process: poisson, rate: 8}"), midStream: true,
			at: func(s *Simulator) {
				if err := s.StopProcess(context.Background(), 1); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "switch-over", src: tenant(", max_batch: 64, arrival: {process: poisson, rate: 8}"), midStream: true, at: restart},
		{name: "failed restart", src: tenant(", max_batch: 64, arrival: {process: poisson, rate: 8}"), midStream: true,
			at: func(s *Simulator) {
				if err := s.SetMPSPinnedMemoryLimit(context.Background(), s.sc.GPUs[0].UUID, 1, 1<<20); err != nil {
					t.Fatal(err)
				}
				if err := s.RestartClient(context.Background(), s.sc.GPUs[0].UUID, 1, "chat"); err == nil {
					t.Fatal("a restart over the pinned memory limit succeeded")
				}
			}},
		{name: "GPU lost", src: tenant(", max_batch: 64, arrival: {process: poisson, rate: 8}") + `events:
  - {at: 10s, action: gpu-lost, gpu: 0}
  - {at: 15s, action: gpu-restored, gpu: 0}
`, midStream: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := mustParse(t, fmt.Sprintf(`name: drops
gpus: [{model: H100-SXM5-80GB, sharing: mps}]
control: {migration_time: 1s, load_bandwidth: 16GB, drain_timeout: 100ms, %s}
tenants:
%s`, free, tc.src))
			s := mustNew(t, sc, Options{})
			start := s.Now()
			gen := cmp.Or(tc.gen, 40)
			var completed, dropped, timedOut, served, missed int
			for sec := 1; sec <= 20; sec++ {
				s.AdvanceTo(start.Add(time.Duration(sec) * time.Second))
				if sec == 10 && tc.at != nil {
					tc.at(s)
				}
				w := s.Window().Tenants[0]
				completed, dropped, timedOut = completed+w.Completed, dropped+w.Dropped, timedOut+w.TimedOut
				served, missed = served+w.Tokens, missed+w.DroppedTokens
				if w.Ended() != w.Tokens+w.DroppedTokens {
					t.Fatalf("window %d: ended %d, want its %d tokens and %d missed", sec, w.Ended(), w.Tokens, w.DroppedTokens)
				}
			}
			running := 0 // tokens judged of the streams still running
			for _, r := range s.tenants[0].seqs {
				running += max(0, r.done-1)
			}
			t.Logf("%d completed, %d dropped; %d tokens served, %d missed, %d of running streams", completed, dropped, served, missed, running)
			if dropped == 0 || completed == 0 {
				t.Fatalf("%d completed, %d dropped: the case drops nothing or serves nothing", completed, dropped)
			}
			// one more for each dropped request with no token left: all
			// of them with one-token requests; a client timeout may
			// catch a request at its last token
			none := 0
			if gen == 1 {
				none = dropped
			}
			want := (gen-1)*(completed+dropped) + running + none
			if extra := served + missed - want; extra != 0 && (extra < 0 || extra > timedOut) {
				t.Errorf("%d tokens served and %d missed, want %d: %d of each of %d ended requests, %d of the running streams, one of each dropped with none left",
					served, missed, want, gen-1, completed+dropped, running)
			}
			if whole := max(1, gen-1) * dropped; tc.midStream != (missed < whole) {
				t.Errorf("%d tokens missed by %d dropped requests (%d before their first token): mid-stream drops %v, want %v",
					missed, dropped, whole, missed < whole, tc.midStream)
			}
		})
	}
}
