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
// Service's ready pods) are refused while they alternate, counting nothing;
// a server restarted once is counted as it always was.
func TestSeveralServersBehindOneURL(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 15 * time.Second) }
	secs := func(tm time.Time) float64 { return float64(tm.Unix()) }
	type server struct {
		history int
		start   float64 // 0: not served
	}
	old, day := secs(t0.Add(-24*time.Hour)), secs(t0.Add(-time.Hour))
	seesaw := "the counts went back and forth"
	tests := []struct {
		name    string
		servers map[byte]server
		script  string
		// want is what requests_total comes to; wantErr is in the
		// last error ("" for none: the source is up at the end).
		want    float64
		wantErr string
	}{
		{"two replicas behind a Service",
			map[byte]server{'A': {100000, 0}, 'B': {40000, 0}},
			"ABABABABABABABABABAB", 0, seesaw},
		{"two replicas behind a Service, with start times",
			map[byte]server{'A': {100000, old}, 'B': {40000, day}},
			"ABABABABABABABABABAB", 0, "a process started before the previous answer"},
		{"two replicas started together",
			map[byte]server{'A': {100000, day}, 'B': {40000, day}},
			"ABABABABABABABABABAB", 0, "while process_start_time_seconds stayed"},
		// Without start times a fall followed by two answers that do
		// not rise back is a restart: B's first run of three is
		// counted as one (40,030), with its fourth answer (10); A's
		// return is not; then a run of one server counts from its
		// fourth answer on: 30 + 10 + 20 (the old code: 541,120).
		{"replicas in random turns",
			map[byte]server{'A': {100000, 0}, 'B': {40000, 0}},
			"ABBBBAABBBABBBBBBABAAAABBBBBAB", 40100, seesaw},
		// restarted at scrape 5 (R), 3 requests since: 40 + 3 + 40
		{"one server restarted once",
			map[byte]server{'A': {100000, 0}, 'R': {3 - 50, 0}},
			"AAAAARRRRR", 83, ""},
		{"one server restarted once, with start times",
			map[byte]server{'A': {100000, old}, 'R': {3 - 50, secs(at(4).Add(time.Second))}},
			"AAAAARRRRR", 83, ""},
		// a young server's restart shows more than 4 scrapes' requests:
		// counted two scrapes late, the same 30 + 50 + 10 + 10 + 10
		{"a young server restarted once",
			map[byte]server{'A': {100, 0}, 'R': {50 - 40, 0}},
			"AAAARRRR", 110, ""},
		// the new pod answers first at scrape 4 (count 0), both until
		// 9, then the new one alone: 30 before, 10 a scrape from 13 on
		{"a rolling update",
			map[byte]server{'A': {100000, 0}, 'B': {-40, 0}},
			"AAAABABABABBBBBBBBBB", 100, ""},
		{"a rolling update, with start times",
			map[byte]server{'A': {100000, old}, 'B': {-40, secs(at(3).Add(-time.Minute))}},
			"AAAABABABABBBBBBBBBB", 100, ""},
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
			if st.RequestsTotal != tc.want || st.GoodRequestsTotal != tc.want {
				t.Errorf("requests_total %v, good %v; want %v", st.RequestsTotal, st.GoodRequestsTotal, tc.want)
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
