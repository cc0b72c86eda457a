package nvml

import (
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

func TestHealthReadings(t *testing.T) {
	u := func(p *uint64) any {
		if p == nil {
			return nil
		}
		return *p
	}
	f64 := func(p *float64) any {
		if p == nil {
			return nil
		}
		return *p
	}
	b := func(p *bool) any {
		if p == nil {
			return nil
		}
		return *p
	}
	// The healthy reading of GPU 3 (the fixture's figures scale with the index).
	want := map[string]any{
		"links": uint64(fixtureLinks), "active": uint64(fixtureLinks),
		"tx": uint64(4 * fixtureTxKiB * 1024), "rx": uint64(4 * fixtureRxKiB * 1024),
		"crcFlit": uint64(fixtureLinks * fixtureLinkFlit), "crcData": uint64(0), "replay": uint64(fixtureReplays), "recovery": uint64(0),
		"pcieTx": float64(fixturePCIeTxKB * 1024), "pcieRx": float64(fixturePCIeRxKB * 1024), "pcieReplays": uint64(3),
		"rowsCorr": uint64(2), "rowsUnc": uint64(0), "remapPending": false, "remapFailure": false,
		"pagesSBE": uint64(1), "pagesDBE": uint64(0), "pagesPending": false,
	}
	got := func(h gpu.Health) map[string]any {
		return map[string]any{
			"links": u(h.NVLinkLinks), "active": u(h.NVLinkActive), "tx": u(h.NVLinkTxBytes), "rx": u(h.NVLinkRxBytes),
			"crcFlit": u(h.NVLinkCRCFlitErrors), "crcData": u(h.NVLinkCRCDataErrors),
			"replay": u(h.NVLinkReplayErrors), "recovery": u(h.NVLinkRecoveryErrors),
			"pcieTx": f64(h.PCIeTxBytesPS), "pcieRx": f64(h.PCIeRxBytesPS), "pcieReplays": u(h.PCIeReplays),
			"rowsCorr": u(h.RemappedRowsCorrectable), "rowsUnc": u(h.RemappedRowsUncorrectable),
			"remapPending": b(h.RowRemapPending), "remapFailure": b(h.RowRemapFailure),
			"pagesSBE": u(h.RetiredPagesSingleBit), "pagesDBE": u(h.RetiredPagesDoubleBit), "pagesPending": b(h.RetiredPagesPending),
		}
	}
	nvlink := []string{"links", "active", "tx", "rx", "crcFlit", "crcData", "replay", "recovery"}
	// The whole-GPU field totals, read where no link's counter is.
	fieldTotals := map[string]any{"crcFlit": uint64(1), "crcData": uint64(0), "replay": uint64(0), "recovery": uint64(0)}
	for _, tc := range []struct {
		call   string
		absent []string       // figures nil when the call is not supported
		other  map[string]any // figures that change when it is not supported
	}{
		{"", nil, nil},
		{"GetFieldValues", nvlink, nil},
		{"NVLinkField", nvlink, nil},
		// No link state: no link known active, so no per-link counter read.
		{"GetNvLinkState", []string{"active"}, fieldTotals},
		{"GetNvLinkErrorCounter", nil, fieldTotals},
		// Link 0 without counters: the other 17 links' sum.
		{"GetNvLinkErrorCounter/0", nil, map[string]any{"crcFlit": uint64((fixtureLinks - 1) * fixtureLinkFlit), "replay": uint64(0)}},
		{"GetPcieThroughput", []string{"pcieTx", "pcieRx"}, nil},
		{"GetPcieReplayCounter", []string{"pcieReplays"}, nil},
		{"GetRemappedRows", []string{"rowsCorr", "rowsUnc", "remapPending", "remapFailure"}, nil},
		{"GetRetiredPages", []string{"pagesSBE", "pagesDBE"}, nil},
		{"GetRetiredPagesPendingStatus", []string{"pagesPending"}, nil},
	} {
		rets := []nvml.Return{nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_GPU_IS_LOST}
		if tc.call == "" {
			rets = []nvml.Return{nvml.SUCCESS}
		}
		for _, ret := range rets {
			t.Run(tc.call+"/"+returnName(ret), func(t *testing.T) {
				f := newFixture(t, dgxh100.New())
				const bad = 3
				f.fail(bad, tc.call, ret)
				bk := f.backend()
				sample(t, bk)
				f.clock.Advance(time.Second)
				d := sample(t, bk).Devices[bad]
				if ret == nvml.ERROR_GPU_IS_LOST {
					if d.Up || !strings.Contains(d.Err, "GPU_IS_LOST") {
						t.Fatalf("GPU lost in %s: up=%v err=%q, want down", tc.call, d.Up, d.Err)
					}
					return
				}
				if !d.Up {
					t.Fatalf("GPU down: %s", d.Err)
				}
				exp := map[string]any{}
				for k, v := range want {
					exp[k] = v
				}
				for _, k := range tc.absent {
					exp[k] = nil
				}
				for k, v := range tc.other {
					exp[k] = v
				}
				g := got(d.Health)
				for k, v := range exp {
					if g[k] != v {
						t.Errorf("%s = %v, want %v", k, g[k], v)
					}
				}
			})
		}
	}
}

// A link that goes down keeps its errors in the GPU's sum, read before it
// went down: the counter never falls.
func TestNVLinkErrorsKeepInactiveLinks(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	bk := f.backend()
	if got := *sample(t, bk).Devices[0].Health.NVLinkReplayErrors; got != fixtureReplays {
		t.Fatalf("replays = %d, want %d", got, fixtureReplays)
	}
	var reads int
	f.devs[0].GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
		if link == 0 {
			return nvml.FEATURE_DISABLED, nvml.SUCCESS
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	counter := f.devs[0].GetNvLinkErrorCounterFunc
	f.devs[0].GetNvLinkErrorCounterFunc = func(link int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
		if link == 0 {
			reads++
		}
		return counter(link, c)
	}
	f.clock.Advance(time.Second)
	h := sample(t, bk).Devices[0].Health
	if *h.NVLinkActive != fixtureLinks-1 || *h.NVLinkReplayErrors != fixtureReplays || *h.NVLinkCRCFlitErrors != fixtureLinks*fixtureLinkFlit {
		t.Errorf("active %d, replays %d, CRC flit %d: want %d, %d, %d", *h.NVLinkActive, *h.NVLinkReplayErrors, *h.NVLinkCRCFlitErrors,
			fixtureLinks-1, fixtureReplays, fixtureLinks*fixtureLinkFlit)
	}
	if reads != 0 {
		t.Errorf("inactive link 0 read %d times", reads)
	}
}

func TestHealthWithoutRemappedRowsSymbol(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.setMissing(symRemappedRows)
	b := f.backend()
	d := sample(t, b).Devices[0]
	if !d.Up || d.Health.RowRemapPending != nil || d.Health.PCIeReplays == nil {
		t.Errorf("up=%v pending=%v replays=%v: want up, remapping unread, the rest read", d.Up, d.Health.RowRemapPending, d.Health.PCIeReplays)
	}
	if len(f.devs[0].GetRemappedRowsCalls()) != 0 {
		t.Error("nvmlDeviceGetRemappedRows called though the driver lacks it")
	}
}

func TestFieldUint(t *testing.T) {
	for _, tc := range []struct {
		typ  nvml.ValueType
		raw  uint64
		want uint64
		ok   bool
	}{
		{nvml.VALUE_TYPE_UNSIGNED_INT, 7, 7, true},
		{nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, 1 << 40, 1 << 40, true},
		{nvml.VALUE_TYPE_SIGNED_LONG_LONG, 5, 5, true},
		{nvml.VALUE_TYPE_SIGNED_LONG_LONG, ^uint64(0), 0, false}, // -1
		{nvml.VALUE_TYPE_SIGNED_INT, 0xffffffff, 0, false},       // -1
		{nvml.VALUE_TYPE_UNSIGNED_SHORT, 9, 9, true},
		{nvml.VALUE_TYPE_DOUBLE, 1, 0, false},
	} {
		v := nvml.FieldValue{ValueType: uint32(tc.typ)}
		for k := 0; k < 8; k++ {
			v.Value[k] = byte(tc.raw >> (8 * k))
		}
		if got, ok := fieldUint(v); got != tc.want || ok != tc.ok {
			t.Errorf("type %d raw %#x: %d %v, want %d %v", tc.typ, tc.raw, got, ok, tc.want, tc.ok)
		}
	}
}

// After a GPU loss and reset the per-link NVLink error counts of before
// were kept for the links not yet trained: the sums went down to those
// counts (a fake reset) and then to 0. They are forgotten with the loss:
// one reset, and monotonic from there as links train.
func TestNVLinkErrorsAcrossReset(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	b := f.backend()
	if flit := *sample(t, b).Devices[0].Health.NVLinkCRCFlitErrors; flit != fixtureLinks*fixtureLinkFlit {
		t.Fatalf("CRC flit errors before the loss %d, want %d", flit, fixtureLinks*fixtureLinkFlit)
	}
	f.fail(0, "GetMemoryInfo", nvml.ERROR_GPU_IS_LOST)
	f.clock.Advance(time.Second)
	sample(t, b)
	f.fail(0, "GetMemoryInfo", nvml.SUCCESS)
	trained := false // link 0
	f.devs[0].GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
		if link >= fixtureLinks {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		if link == 0 && !trained {
			return nvml.FEATURE_DISABLED, nvml.SUCCESS
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	// reset: every per-link counter at 0, then one flit error on link 0
	var link0 uint64
	f.devs[0].GetNvLinkErrorCounterFunc = func(link int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
		if link == 0 && c == nvml.NVLINK_ERROR_DL_CRC_FLIT {
			return link0, nvml.SUCCESS
		}
		return 0, nvml.SUCCESS
	}
	var flit, replay []uint64
	for i, step := range []func(){func() {}, func() { trained = true }, func() { link0 = 1 }} {
		step()
		f.clock.Advance(backoffBase + time.Second)
		d := sample(t, b).Devices[0]
		if !d.Up {
			t.Fatalf("step %d: GPU down: %s", i, d.Err)
		}
		flit, replay = append(flit, *d.Health.NVLinkCRCFlitErrors), append(replay, *d.Health.NVLinkReplayErrors)
	}
	if want := []uint64{0, 0, 1}; flit[0] != want[0] || flit[1] != want[1] || flit[2] != want[2] {
		t.Errorf("CRC flit errors after the reset %v, want %v", flit, want)
	}
	if replay[0] != 0 || replay[1] != 0 || replay[2] != 0 {
		t.Errorf("replay errors after the reset %v, want 0s (link 0's %d was before it)", replay, fixtureReplays)
	}
}
