package latency

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// TestSeveralServersBehindOneURL scrapes one source every 15 s while the
// servers named in a script answer it, one letter a scrape. Each server
// serves 10 requests a scrape (its count at scrape i is history + 10i) and
// may serve process_start_time_seconds. Answers of several servers (a
// Service's ready pods) that carry start times are refused from the first
// switch back to a start time seen before, counting nothing; a server
// restarted, once or twice, or whose start time a clock step moved, is
// counted as counter resets always were.
//
// Without start times nothing tells another server's answer from a
// restart followed by traffic: every fall is a counter reset, its new
// values counted, and several servers are counted wrongly so. That is the
// documented limit (docs/slo.md, "One server": the URL must reach one
// server process); those rows assert it as it is, so that a change of it
// shows here.
func TestSeveralServersBehindOneURL(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 15 * time.Second) }
	secs := func(tm time.Time) float64 { return float64(tm.Unix()) }
	type server struct {
		history int
		start   float64 // 0: not served
	}
	old, day := secs(t0.Add(-24*time.Hour)), secs(t0.Add(-time.Hour))
	tests := []struct {
		name    string
		servers map[byte]server
		script  string
		// want is what requests_total comes to; wantErr is in the
		// last error ("" for none: the source is up at the end);
		// refused is how many scrapes failed.
		want    float64
		wantErr string
		refused uint64
	}{
		// The limit: each switch to B counts B's whole history
		// (40,000 and more), as counter resets always were.
		{"two replicas behind a Service, no start times: counted as resets",
			map[byte]server{'A': {100000, 0}, 'B': {40000, 0}},
			"ABABABABABABABABABAB", 941090, "", 0},
		// The first switch, to B's new start time, counts B's
		// history once (40,010), as a restart: the documented cost.
		// The first switch back, to A's start time seen before, is
		// refused, and every answer after it while they alternate.
		{"two replicas behind a Service, with start times",
			map[byte]server{'A': {100000, old}, 'B': {40000, day}},
			"ABABABABABABABABABAB", 40010, "process_start_time_seconds went from " + fmt.Sprint(day) + " back to " + fmt.Sprint(old), 18},
		// The limit: one start time is one process, each fall a
		// counter reset, as without start times.
		{"two replicas with the same start time: counted as resets",
			map[byte]server{'A': {100000, day}, 'B': {40000, day}},
			"ABABABABABABABABABAB", 941090, "", 0},
		// The limit: each switch to B counts B's history.
		{"replicas in random turns, no start times: counted as resets",
			map[byte]server{'A': {100000, 0}, 'B': {40000, 0}},
			"ABBBBAABBBABBBBBBABAAAABBBBBAB", 541120, "", 0},
		// restarted at scrape 5 (R), 3 requests since: 40 + 3 + 40
		{"one server restarted once",
			map[byte]server{'A': {100000, 0}, 'R': {3 - 50, 0}},
			"AAAAARRRRR", 83, "", 0},
		{"one server restarted once, with start times",
			map[byte]server{'A': {100000, old}, 'R': {3 - 50, secs(at(4).Add(time.Second))}},
			"AAAAARRRRR", 83, "", 0},
		// restarted before scrape 4 (R, 3 requests since) and again
		// before scrape 5 (S, 5 since): a restart is a counter reset,
		// and S's 5 are past R's 3, so only 2 of them are counted
		// (the documented cost): 30 + 3 + 2 + 30
		{"one server restarted twice within two scrapes, with start times",
			map[byte]server{'A': {100000, old}, 'R': {3 - 40, secs(at(3).Add(time.Second))},
				'S': {5 - 50, secs(at(4).Add(time.Second))}},
			"AAAARSSSS", 65, "", 0},
		// R starts 1 s before scrape 3, S 1 s after it: start times
		// 2 s apart, each new, and the count fell: two restarts,
		// 20 + 5 + 2 + 30
		{"one young server restarted, start times within 2 s",
			map[byte]server{'A': {100000, old}, 'R': {5 - 30, secs(at(3).Add(-time.Second))},
				'S': {2 - 40, secs(at(3).Add(time.Second))}},
			"AAARSSSS", 57, "", 0},
		// a clock step moves a Go server's start time back or
		// forth, nothing fell: a new start time, counted as a reset
		// would be, all 90 counted
		{"one server whose start time moved back 2 s",
			map[byte]server{'A': {100000, old}, 'B': {100000, old - 2}},
			"AAAAABBBBB", 90, "", 0},
		{"one server whose start time moved back 10 s",
			map[byte]server{'A': {100000, old}, 'B': {100000, old - 10}},
			"AAAAABBBBB", 90, "", 0},
		{"one server whose start time moved on 10 s",
			map[byte]server{'A': {100000, old}, 'B': {100000, old + 10}},
			"AAAAABBBBB", 90, "", 0},
		// its counters reset in the same process (vLLM re-registers
		// its metrics when scaled), start time unchanged: 30 + 3 + 30
		{"one server whose counters reset, same start time",
			map[byte]server{'A': {100000, old}, 'R': {3 - 40, old}},
			"AAAARRRR", 63, "", 0},
		// a young server's restart: 30 + 50 + 10 + 10 + 10
		{"a young server restarted once",
			map[byte]server{'A': {100, 0}, 'R': {50 - 40, 0}},
			"AAAARRRR", 110, "", 0},
		// The limit: the new pod answers first at scrape 4 (count 0),
		// both until 9, each switch to the old pod counting its
		// history.
		{"a rolling update, no start times: counted as resets",
			map[byte]server{'A': {100000, 0}, 'B': {-40, 0}},
			"AAAABABABABBBBBBBBBB", 300390, "", 0},
		// the new pod's first answer (scrape 4, count 0) is a
		// restart; refused from scrape 5, the old pod back, to 11:
		// scrape 12 is the third answer in a row of the new pod (10,
		// 11, 12), counted: 30 before, 10 a scrape from 12 on
		{"a rolling update, with start times",
			map[byte]server{'A': {100000, old}, 'B': {-40, secs(at(3).Add(-time.Minute))}},
			"AAAABABABABBBBBBBBBB", 110, "", 7},
		// In a seesaw, an answer without a start time is of the same
		// process as the one before where no count fell: begun by A
		// back (scrape 2), N (A's counts, its start time no longer
		// served) continues A's run, M (B's, fallen) begins a new one,
		// and the run N, N, N ends the seesaw at scrape 6, counting
		// from scrape 5: B's restart 40,010, then 10 and 10. (Taking
		// two answers without start times for one process whatever
		// their counts, the run M, N, N would end it at scrape 5
		// counting N's rise from M, 60,010.)
		{"a seesaw's answers without start times: one run where no count fell",
			map[byte]server{'A': {100000, old}, 'B': {40000, day}, 'N': {100000, 0}, 'M': {40000, 0}},
			"ABANMNNN", 40030, "", 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &Source{URL: "sim://chat", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
			tr := newSLOTracker(Spec{Name: "chat", Source: src, Objective: &Objective{Quantile: 0.5, Target: time.Second}, Window: 5 * time.Minute})
			tr.setInterval(15 * time.Second)
			app := &testutil.FakeApp{Body: map[string][]byte{}}
			sc := &scraper{app: app}
			for i := range len(tc.script) {
				sv := tc.servers[tc.script[i]]
				body := vllmModels("llama", sv.history+10*i, 0)
				if sv.start > 0 {
					body = append(body, fmt.Sprintf("# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %v\n", sv.start)...)
				}
				app.Body["chat"] = body
				if err := sc.scrapeOnce(context.Background(), tr, at(i)); err != nil {
					t.Logf("scrape %d (%c): %v", i, tc.script[i], err)
				}
			}
			st := tr.Status()
			if st.RequestsTotal != tc.want || st.GoodRequestsTotal != tc.want || st.ScrapeErrorsTotal != tc.refused {
				t.Errorf("requests_total %v, good %v, scrape errors %v; want %v, %v errors", st.RequestsTotal, st.GoodRequestsTotal, st.ScrapeErrorsTotal, tc.want, tc.refused)
			}
			if tc.wantErr == "" {
				if !st.SourceUp || st.LastError != "" {
					t.Errorf("source up %v, last error %q; want up", st.SourceUp, st.LastError)
				}
				return
			}
			if st.SourceUp || !strings.HasPrefix(st.LastError, "sim://chat: ") || !strings.Contains(st.LastError, tc.wantErr) ||
				!strings.Contains(st.LastError, "several servers behind one URL? a source must reach one server process") {
				t.Errorf("source up %v, last error %q; want down, naming the source and saying %q", st.SourceUp, st.LastError, tc.wantErr)
			}
		})
	}
}

// TestServersKeepFewStartTimes: the start times kept are distinct, the
// latest first, at most maxStarts however many processes came.
func TestServersKeepFewStartTimes(t *testing.T) {
	var sv servers
	for _, st := range []float64{1, 2, 0, 2, 3, 1, 4, 5, 6} {
		sv.saw(st)
	}
	if want := []float64{6, 5, 4, 1}; fmt.Sprint(sv.starts) != fmt.Sprint(want) {
		t.Errorf("start times kept %v, want %v", sv.starts, want)
	}
}

// Two pods behind a Service whose series never fall at a switch, each
// with its own start time: the switches back are refused. Asking the
// counts would let them through as one process, counting next to nothing.
func TestPodsWithDisjointSeriesRefused(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	old, day := float64(t0.Unix()-86400), float64(t0.Unix()-3600)
	for _, tc := range []struct {
		name   string
		script string
		pod    func(c rune, i int) []byte
	}{
		// each pod serving a model of its own: no series in common
		{"a model each", "ABABABABABABABABABAB", func(c rune, i int) []byte {
			if c == 'A' {
				return vllmModels("llama", 100000+10*i, 0)
			}
			return vllmModels("mistral", 40000+10*i, 0)
		}},
		// multi-LoRA pods: the base model idle on both (count 0), each
		// serving an adapter the other has not loaded
		{"a LoRA adapter each", "ABBABAABBBABAB", func(c rune, i int) []byte {
			if c == 'A' {
				return vllmModels("base", 0, 0, "lora-a", 90000+10*i, 0)
			}
			return vllmModels("base", 0, 0, "lora-b", 30000+10*i, 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &Source{URL: "sim://chat", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
			tr := newSLOTracker(Spec{Name: "chat", Source: src, Objective: &Objective{Quantile: 0.5, Target: time.Second}, Window: 5 * time.Minute})
			tr.setInterval(15 * time.Second)
			app := &testutil.FakeApp{Body: map[string][]byte{}}
			sc := &scraper{app: app}
			for i, c := range tc.script {
				start := old
				if c == 'B' {
					start = day
				}
				app.Body["chat"] = append(tc.pod(c, i), fmt.Sprintf("# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %v\n", start)...)
				if err := sc.scrapeOnce(context.Background(), tr, t0.Add(time.Duration(i)*15*time.Second)); err != nil {
					t.Logf("scrape %d: %v", i, err)
				}
			}
			if st := tr.Status(); st.ScrapeErrorsTotal == 0 || st.SourceUp {
				t.Errorf("scrape errors %d, source up %v, requests_total %v; want the switches back refused", st.ScrapeErrorsTotal, st.SourceUp, st.RequestsTotal)
			}
		})
	}
}
