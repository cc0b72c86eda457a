package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
)

// raceEnabled is set when the tests run with -race.
var raceEnabled = false

// TestScenarioEffects runs the library scenarios for their full duration and
// checks the effects test/scenarios/README.md describes, so that a change of
// the simulator's model that changes them is noticed (and the README
// updated).
func TestScenarioEffects(t *testing.T) {
	if testing.Short() {
		t.Skip("full-length scenario runs")
	}
	type result map[string]report.TenantSummary
	runs := map[string]result{}
	get := func(t *testing.T, scenario, policy string) result {
		key := scenario + "/" + policy
		if r, ok := runs[key]; ok {
			return r
		}
		res, err := simulate(context.Background(), runConfig{
			Scenario: "../../test/scenarios/" + scenario + ".yaml", Policy: policy, Step: time.Second, Format: report.FormatCSV,
		})
		if err != nil {
			t.Fatal(err)
		}
		r := result{}
		for _, ts := range res.rec.Summary().Tenants {
			r[ts.Tenant] = ts
		}
		runs[key] = r
		return r
	}
	met := func(ts report.TenantSummary) bool { return ts.SLOMet != nil && *ts.SLOMet }
	missed := func(ts report.TenantSummary) bool { return ts.SLOMet != nil && !*ts.SLOMet }

	tests := []struct {
		name     string
		scenario string
		check    func(be, se result) bool
	}{
		{"chat misses under both baselines", "noisy-neighbour", func(be, se result) bool {
			return missed(be["chat"]) && missed(se["chat"])
		}},
		{"assistant misses under both; static-equal costs training", "bursty-llm-training", func(be, se result) bool {
			return missed(be["assistant"]) && missed(se["assistant"]) && se["pretrain"].WorkRate < 0.9*be["pretrain"].WorkRate
		}},
		{"both services miss; static-equal's half share overloads them", "replay/diurnal-shift", func(be, se result) bool {
			for _, n := range []string{"chat-east", "chat-west"} {
				if !missed(be[n]) || !missed(se[n]) || *se[n].Attainment >= *be[n].Attainment {
					return false
				}
			}
			return true
		}},
		{"locked clocks meet, DVFS misses", "clock-stability", func(be, se result) bool {
			return met(be["vision-locked"]) && missed(be["vision-dvfs"]) && *be["vision-dvfs"].P50 > 1.1**be["vision-locked"].P50
		}},
		{"every chat misses, every other SLO holds; static-equal starves the hot chat", "eight-gpu-hot", func(be, se result) bool {
			for name, ts := range be {
				chat := strings.HasSuffix(name, "-chat")
				if ts.SLOMet != nil && chat == met(ts) {
					return false
				}
				if s := se[name]; s.SLOMet != nil && chat == met(s) {
					return false
				}
			}
			return *se["g0-chat"].Attainment < *be["g0-chat"].Attainment
		}},
		{"chat misses, recsys holds; the scheduler change is refused while VMs run", "vgpu-contention", func(be, se result) bool {
			return missed(be["chat"]) && missed(se["chat"]) && met(be["recsys"]) && met(se["recsys"]) &&
				*se["chat"].Attainment == *be["chat"].Attainment && se["train"].WorkRate == be["train"].WorkRate
		}},
	}
	for _, tc := range tests {
		t.Run(tc.scenario+"/"+tc.name, func(t *testing.T) {
			if raceEnabled && (tc.scenario == "eight-gpu-hot" || tc.scenario == "replay/diurnal-shift") {
				// Model behaviour, not concurrency: the longest runs are
				// left to runs without -race.
				t.Skip("too slow under -race")
			}
			be, se := get(t, tc.scenario, "best-effort"), get(t, tc.scenario, "static-equal")
			if !tc.check(be, se) {
				t.Errorf("effect no longer holds; update test/scenarios/README.md\nbest-effort: %+v\nstatic-equal: %+v", be, se)
			}
		})
	}
}
