package sim

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// withHealth is a saturating two-tenant scenario on two GPUs with health
// events on GPU 1 (and a tenant rate event between them).
func withHealth(events string) string {
	return `name: h
seed: 3
gpus:
  - {model: H100-SXM5-80GB, sharing: time-slice}
  - {model: H200-SXM5-141GB, sharing: time-slice}
tenants:
  - {name: a, gpu: 0, memory: 8GiB, workload: {type: dnn, flops: 2e9, bytes: 4e7, arrival: {process: poisson, rate: 200}}}
  - {name: b, gpu: 1, memory: 8GiB, workload: {type: training, flops: 2e12, bytes: 1e8}}
events:
  - {at: 7s, tenant: a, rate: 400}
` + events
}

const healthEvents = `  - {at: 10s, action: nvlink-crc-errors, gpu: 1, rate: 2}
  - {at: 20s, action: nvlink-replays, gpu: 1, rate: 0.5}
  - {at: 30s, action: nvlink-crc-errors, gpu: 1, rate: 0}
  - {at: 15s, action: pcie-replays, gpu: 1, rate: 4}
  - {at: 25s, action: row-remap-pending, gpu: 1}
  - {at: 35s, action: row-remap-failure, gpu: 1}
  - {at: 40s, action: page-retired, gpu: 1}
  - {at: 41s, action: page-retired, gpu: 1}
`

func TestHealthEventParsing(t *testing.T) {
	for _, tc := range []struct{ event, err string }{
		{"{at: 1s, action: nvlink-crc-errors, gpu: 0, rate: 1}", ""},
		{"{at: 1s, action: nvlink-replays, gpu: 1, rate: 0}", ""},
		{"{at: 1s, action: pcie-replays, gpu: 0, rate: 1e6}", ""},
		{"{at: 1s, action: row-remap-pending, gpu: 0}", ""},
		{"{at: 1s, action: row-remap-failure, gpu: 1}", ""},
		{"{at: 1s, action: page-retired, gpu: 0}", ""},
		{"{at: 1s, action: pcie-replays, rate: 1}", "h.yaml:11: a pcie-replays event needs gpu: an index below 2"},
		{"{at: 1s, action: row-remap-pending, gpu: 2}", "h.yaml:11: a row-remap-pending event needs gpu: an index below 2"},
		{"{at: 1s, action: nvlink-crc-errors, gpu: 0, rate: -1}", "h.yaml:11: rate must be in [0, 1e6] per second"},
		{"{at: 1s, action: nvlink-crc-errors, gpu: 0, rate: 2e6}", "h.yaml:11: rate must be in [0, 1e6] per second"},
		{"{at: 1s, action: row-remap-failure, gpu: 0, rate: 1}", "h.yaml:11: a row-remap-failure event has no rate"},
		{"{at: 1s, action: page-retired, gpu: 0, tenant: a}", "h.yaml:11: a page-retired event names a GPU, not a tenant"},
		{"{at: 1s, action: pcie-replays, gpu: 0, code: 79}", "h.yaml:11: a pcie-replays event has no code"},
		{"{at: 1s, action: nvlink-down, gpu: 0}", "h.yaml:11: unknown event action \"nvlink-down\""},
	} {
		sc, err := ParseScenario("h.yaml", []byte(withHealth("  - "+tc.event+"\n")))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.event, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.event, err)
			continue
		}
		// The health event is out of the events the engine runs.
		if len(sc.Events) != 1 || sc.Events[0].Action != "rate" || len(sc.health) != 1 {
			t.Errorf("%s: events %+v, health %+v; want the rate event, and the health event apart", tc.event, sc.Events, sc.health)
		}
	}
}

// TestHealthReadings: the counters rise at their events' rates, the flags
// hold from their events on, on the GPU named only; each row remapped and
// page retired counts one uncorrectable ECC error.
func TestHealthReadings(t *testing.T) {
	s := mustNew(t, mustParse(t, withHealth(healthEvents)), Options{})
	type want struct {
		crc, replay, pcie, remapped uint64
		pending, failure            bool
		retired                     *uint64 // nil: not served
		uncorrected                 uint64  // the ECC errors counted
	}
	u, start := gpu.Uint, s.Now()
	for _, tc := range []struct {
		at   time.Duration
		want want
	}{
		{5 * time.Second, want{}},
		{12 * time.Second, want{crc: 4}},
		{18 * time.Second, want{crc: 16, pcie: 12}},
		{26 * time.Second, want{crc: 32, replay: 3, pcie: 44, remapped: 1, pending: true, uncorrected: 1}},
		{45 * time.Second, want{crc: 40, replay: 12, pcie: 120, remapped: 1, pending: true, failure: true, retired: u(2), uncorrected: 3}},
	} {
		s.AdvanceTo(start.Add(tc.at))
		r, err := s.Sample(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		h := r.Devices[1].Health
		got := want{*h.NVLinkCRCFlitErrors, *h.NVLinkReplayErrors, *h.PCIeReplays, *h.RemappedRowsUncorrectable,
			*h.RowRemapPending, *h.RowRemapFailure, h.RetiredPagesDoubleBit, *r.Devices[1].ECCUncorrectedTotal}
		if h.RetiredPagesDoubleBit != nil && (*h.RetiredPagesSingleBit != 0 || !*h.RetiredPagesPending) {
			t.Errorf("at %s: retired pages single-bit %d, pending %v; want 0, true", tc.at, *h.RetiredPagesSingleBit, *h.RetiredPagesPending)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("at %s: GPU 1 health %+v, want %+v", tc.at, got, tc.want)
		}
		if h0 := r.Devices[0].Health; !reflect.DeepEqual(h0, s.gpus[0].m.health(&figures{})) || *r.Devices[0].ECCUncorrectedTotal != 0 {
			t.Errorf("at %s: GPU 0 health %+v, %d uncorrected ECC errors, want the healthy model's", tc.at, h0, *r.Devices[0].ECCUncorrectedTotal)
		}
	}
}

// TestHealthEventsLeaveWorkloads: a run with health events does what the
// same run without them does, to the last request.
func TestHealthEventsLeaveWorkloads(t *testing.T) {
	run := func(events string) WindowStats {
		s := mustNew(t, mustParse(t, withHealth(events)), Options{})
		for range 9 {
			s.AdvanceTo(s.Now().Add(5 * time.Second))
			if _, err := s.Sample(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		return s.Window()
	}
	without, with := run(""), run(healthEvents)
	if !reflect.DeepEqual(without, with) {
		t.Errorf("health events changed the run:\nwithout %+v\nwith    %+v", without, with)
	}
	if len(without.Tenants) != 2 || without.Tenants[0].Work == 0 || without.Tenants[1].Work == 0 {
		t.Errorf("the run did no work: %+v", without.Tenants)
	}
}

// TestHealthEventsMakeRun: the scenario `make run` runs raises each
// signal a health alert of the mixin fires on (the NVLink errors and PCIe
// replays alerts on any increase, nvlinkErrorsThreshold and
// pcieReplaysThreshold being 0; the row remap alerts on the flags), at the
// minute docs/simulator.md gives.
func TestHealthEventsMakeRun(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(scenarioDir, "h100-timeslice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := mustNew(t, mustParse(t, string(data)), Options{})
	first := map[string]int{} // signal: the first minute it reads
	start := s.Now()
	var last gpu.Health
	for minute := range 10 {
		s.AdvanceTo(start.Add(time.Duration(minute) * time.Minute))
		r, err := s.Sample(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		h := r.Devices[0].Health
		for name, on := range map[string]bool{
			"nvlink errors rising": minute > 0 && *h.NVLinkCRCFlitErrors+*h.NVLinkReplayErrors > *last.NVLinkCRCFlitErrors+*last.NVLinkReplayErrors,
			"pcie replays rising":  minute > 0 && *h.PCIeReplays > *last.PCIeReplays,
			"row remap pending":    *h.RowRemapPending,
			"row remap failure":    *h.RowRemapFailure,
			"retired pages":        h.RetiredPagesDoubleBit != nil && *h.RetiredPagesDoubleBit > 0,
		} {
			if _, seen := first[name]; on && !seen {
				first[name] = minute
			}
		}
		last = h
	}
	want := map[string]int{"nvlink errors rising": 4, "pcie replays rising": 5, "row remap pending": 5, "row remap failure": 7, "retired pages": 8}
	if !reflect.DeepEqual(first, want) {
		t.Errorf("first minute of each signal %v, want %v", first, want)
	}
}
