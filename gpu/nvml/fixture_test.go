package nvml

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// fixture is a go-nvml mock server (dgxh100/dgxh200) with every call the
// backend makes wired to plausible values. Tests change a device's
// behaviour by overriding its ...Func fields or through fail().
type fixture struct {
	t     testing.TB
	srv   *server.Server
	devs  []*server.Device
	clock *gpu.ManualClock
	logs  *syncBuffer

	mu       sync.Mutex
	failures map[string]nvml.Return // "gpu/call" -> injected return
	failed   map[int]int            // gpu -> calls that returned an injected failure
	missing  map[string]bool        // symbols the driver lacks
	procs    map[int][]nvml.ProcessInfo
	procfs   *fakeProcfs // the processes' names (procname_test.go)
	mps      map[int][]nvml.ProcessInfo
	gfx      map[int][]nvml.ProcessInfo    // graphics processes
	migProcs map[[2]int][]nvml.ProcessInfo // [gpu, gpu instance] -> processes of that MIG device
	samples  map[*mock.GpmSample]gpmTag
	gpmSeq   int
	events   chan nvml.EventData
	freed    int
	alloced  int
	// gpmOverride replaces the fake GPM figure of a metric on every GPU.
	gpmOverride map[nvml.GpmMetricId]float64
	// giNames are the GPU instance profile names the fake driver gives in
	// the v3 profile info, by GPU and profile index; see driverGINames.
	giNames map[[2]int]string
}

type gpmTag struct {
	dev, gi, seq int
}

// syncBuffer is the shared concurrent-safe buffer with a line count.
type syncBuffer struct{ testutil.SyncBuffer }

// count returns how many log lines contain every one of subs.
func (s *syncBuffer) count(subs ...string) int {
	n := 0
	for _, line := range strings.Split(s.String(), "\n") {
		all := line != ""
		for _, sub := range subs {
			if !strings.Contains(line, sub) {
				all = false
			}
		}
		if all {
			n++
		}
	}
	return n
}

// fixtureReserved is the memory the fake driver reserves per GPU.
const fixtureReserved = 512 << 20

var t0 = time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)

func newFixture(t testing.TB, srv *server.Server) *fixture {
	t.Helper()
	f := &fixture{
		t: t, srv: srv, clock: gpu.NewManualClock(t0), logs: &syncBuffer{},
		failures: map[string]nvml.Return{}, failed: map[int]int{}, missing: map[string]bool{},
		procs: map[int][]nvml.ProcessInfo{}, mps: map[int][]nvml.ProcessInfo{}, gfx: map[int][]nvml.ProcessInfo{}, migProcs: map[[2]int][]nvml.ProcessInfo{},
		samples: map[*mock.GpmSample]gpmTag{}, events: make(chan nvml.EventData, 16),
		giNames: map[[2]int]string{}, procfs: newFakeProcfs(),
	}
	// The v3 GPU instance profile info comes through a handler the mock
	// cannot make: the fake driver lacks it until driverGINames.
	f.missing[symGIProfileInfoV] = true
	for _, d := range srv.Devices {
		f.devs = append(f.devs, d.(*server.Device))
	}
	srv.LookupSymbolFunc = func(s string) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.missing[s] {
			return fmt.Errorf("undefined symbol: %s", s)
		}
		return nil
	}
	srv.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) {
		s := &mock.GpmSample{}
		s.FreeFunc = func() nvml.Return {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.freed++
			delete(f.samples, s)
			return nvml.SUCCESS
		}
		f.mu.Lock()
		f.alloced++
		f.mu.Unlock()
		return s, nvml.SUCCESS
	}
	srv.GpmMetricsGetFunc = func(m *nvml.GpmMetricsGetType) nvml.Return {
		f.mu.Lock()
		defer f.mu.Unlock()
		s1, ok1 := f.samples[m.Sample1.(*mock.GpmSample)]
		s2, ok2 := f.samples[m.Sample2.(*mock.GpmSample)]
		if !ok1 || !ok2 || s1.dev != s2.dev || s1.gi != s2.gi {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		if r, ok := f.failures[fmt.Sprintf("%d/GpmMetricsGet", s2.dev)]; ok {
			return r // (f.fail(dev, "GpmMetricsGet", r): the samples taken, nothing computed)
		}
		for i := 0; i < int(m.NumMetrics); i++ {
			id := nvml.GpmMetricId(m.Metrics[i].MetricId)
			m.Metrics[i].NvmlReturn = uint32(nvml.SUCCESS)
			m.Metrics[i].Value = gpmValue(s2.dev, s2.gi, id)
			if v, ok := f.gpmOverride[id]; ok {
				m.Metrics[i].Value = v
			}
		}
		return nvml.SUCCESS
	}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
				select {
				case e := <-f.events:
					return e, nvml.SUCCESS
				case <-time.After(5 * time.Millisecond):
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	for i, d := range f.devs {
		f.wireDevice(i, d)
	}
	return f
}

// gpmValue is the fake GPM figure of a metric: distinct per GPU and GPU
// instance so that tests can tell them apart.
func gpmValue(dev, gi int, id nvml.GpmMetricId) float64 {
	switch {
	case id == nvml.GPM_METRIC_SM_UTIL:
		return float64(10 + dev + gi)
	case id == nvml.GPM_METRIC_SM_OCCUPANCY:
		return 20
	case id == nvml.GPM_METRIC_DRAM_BW_UTIL:
		return 30
	case id == nvml.GPM_METRIC_ANY_TENSOR_UTIL:
		return 40
	case id >= nvml.GPM_METRIC_GR0_CTXSW_CYCLES_ELAPSED && id <= nvml.GPM_METRIC_GR7_CTXSW_ACTIVE_PCT:
		switch (id - nvml.GPM_METRIC_GR0_CTXSW_CYCLES_ELAPSED) % 5 {
		case 1: // cycles active
			return 1000
		case 2: // requests
			return 3
		}
	}
	return 0
}

// fail makes call on GPU dev return r until cleared with fail(dev, call, SUCCESS).
func (f *fixture) fail(dev int, call string, r nvml.Return) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := fmt.Sprintf("%d/%s", dev, call)
	if r == nvml.SUCCESS {
		delete(f.failures, key)
		return
	}
	f.failures[key] = r
}

func (f *fixture) inject(dev int, call string) nvml.Return {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.failures[fmt.Sprintf("%d/%s", dev, call)]
	if !ok {
		r, ok = f.failures[fmt.Sprintf("*/%s", call)]
	}
	if !ok {
		return nvml.SUCCESS
	}
	f.failed[dev]++
	return r
}

// failedCalls returns how many calls of GPU dev returned an injected
// failure, and restarts the count.
func (f *fixture) failedCalls(dev int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.failed[dev]
	f.failed[dev] = 0
	return n
}

func (f *fixture) setMissing(syms ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range syms {
		f.missing[s] = true
	}
}

func (f *fixture) setProcs(dev int, compute, mps []nvml.ProcessInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.procs[dev] = compute
	f.mps[dev] = mps
}

func (f *fixture) wireDevice(i int, d *server.Device) {
	d.GetUUIDFunc = func() (string, nvml.Return) {
		if r := f.inject(i, "GetUUID"); r != nvml.SUCCESS {
			return "", r
		}
		return d.UUID, nvml.SUCCESS
	}
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var p nvml.PciInfo
		for k, c := range d.PciBusID {
			p.BusId[k] = int8(c)
		}
		return p, nvml.SUCCESS
	}
	// v1 counts the reserved memory as used, v2 does not.
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		if r := f.inject(i, "GetMemoryInfo"); r != nvml.SUCCESS {
			return nvml.Memory{}, r
		}
		total := d.Config.MemoryMB << 20
		used := uint64(i+1)<<30 + fixtureReserved
		return nvml.Memory{Total: total, Used: used, Free: total - used}, nvml.SUCCESS
	}
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		if r := f.inject(i, "GetMemoryInfo"); r != nvml.SUCCESS {
			return nvml.Memory_v2{}, r
		}
		if r := f.inject(i, "GetMemoryInfo_v2"); r != nvml.SUCCESS {
			return nvml.Memory_v2{}, r
		}
		total := d.Config.MemoryMB << 20
		used := uint64(i+1) << 30
		return nvml.Memory_v2{Total: total, Reserved: fixtureReserved, Used: used, Free: total - used - fixtureReserved}, nvml.SUCCESS
	}
	d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		if r := f.inject(i, "GetClockInfo"); r != nvml.SUCCESS {
			return 0, r
		}
		if c == nvml.CLOCK_MEM {
			return 2619, nvml.SUCCESS
		}
		return 1980, nvml.SUCCESS
	}
	d.GetMaxClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		if c == nvml.CLOCK_MEM {
			return 2619, f.inject(i, "GetMaxClockInfo")
		}
		return 1980, f.inject(i, "GetMaxClockInfo")
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		return 350000 + uint32(i)*1000, f.inject(i, "GetPowerUsage")
	}
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) {
		return 700000, f.inject(i, "GetEnforcedPowerLimit")
	}
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
		return 40 + uint32(i), f.inject(i, "GetTemperature")
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
		return 0x4, f.inject(i, "GetCurrentClocksEventReasons") // SW power cap
	}
	d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) {
		return 0x4, f.inject(i, "GetCurrentClocksThrottleReasons")
	}
	d.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) {
		return 123456789, f.inject(i, "GetTotalEnergyConsumption")
	}
	d.GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) {
		return nvml.FEATURE_ENABLED, f.inject(i, "GetPersistenceMode")
	}
	d.GetComputeModeFunc = func() (nvml.ComputeMode, nvml.Return) {
		return nvml.COMPUTEMODE_DEFAULT, f.inject(i, "GetComputeMode")
	}
	d.GetEccModeFunc = func() (nvml.EnableState, nvml.EnableState, nvml.Return) {
		return nvml.FEATURE_ENABLED, nvml.FEATURE_ENABLED, f.inject(i, "GetEccMode")
	}
	d.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, _ nvml.EccCounterType) (uint64, nvml.Return) {
		if t == nvml.MEMORY_ERROR_TYPE_CORRECTED {
			return 5, f.inject(i, "GetTotalEccErrors")
		}
		return 0, f.inject(i, "GetTotalEccErrors")
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: 75, Memory: 40}, f.inject(i, "GetUtilizationRates")
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		if r := f.inject(i, "GetComputeRunningProcesses"); r != nvml.SUCCESS {
			return nil, r
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return append([]nvml.ProcessInfo(nil), f.procs[i]...), nvml.SUCCESS
	}
	d.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		if r := f.inject(i, "GetMPSComputeRunningProcesses"); r != nvml.SUCCESS {
			return nil, r
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return append([]nvml.ProcessInfo(nil), f.mps[i]...), nvml.SUCCESS
	}
	d.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		if r := f.inject(i, "GetGraphicsRunningProcesses"); r != nvml.SUCCESS {
			return nil, r
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return append([]nvml.ProcessInfo(nil), f.gfx[i]...), nvml.SUCCESS
	}
	d.GetProcessUtilizationFunc = func(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		if r := f.inject(i, "GetProcessUtilization"); r != nvml.SUCCESS {
			return nil, r
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		ts := uint64(f.clock.Now().UnixMicro())
		var out []nvml.ProcessUtilizationSample
		for _, p := range append(append([]nvml.ProcessInfo(nil), f.procs[i]...), f.mps[i]...) {
			// two samples per process in the interval: 50% and 70% SM
			for _, s := range []nvml.ProcessUtilizationSample{
				{Pid: p.Pid, TimeStamp: ts - 500, SmUtil: 50, MemUtil: 20},
				{Pid: p.Pid, TimeStamp: ts, SmUtil: 70, MemUtil: 30},
			} {
				// As the driver does: only samples newer than lastSeen.
				if s.TimeStamp > lastSeen {
					out = append(out, s)
				}
			}
		}
		if len(out) == 0 {
			return nil, nvml.ERROR_NOT_FOUND // the driver's "no sample since lastSeen"
		}
		return out, nvml.SUCCESS
	}
	d.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
		return nvml.GpmSupport{IsSupportedDevice: 1}, f.inject(i, "GpmQueryDeviceSupport")
	}
	d.GpmSampleGetFunc = func(s nvml.GpmSample) nvml.Return {
		if r := f.inject(i, "GpmSampleGet"); r != nvml.SUCCESS {
			return r
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.gpmSeq++
		f.samples[s.(*mock.GpmSample)] = gpmTag{dev: i, gi: -1, seq: f.gpmSeq}
		return nvml.SUCCESS
	}
	d.GpmMigSampleGetFunc = func(gi int, s nvml.GpmSample) nvml.Return {
		if r := f.inject(i, "GpmMigSampleGet"); r != nvml.SUCCESS {
			return r
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.gpmSeq++
		f.samples[s.(*mock.GpmSample)] = gpmTag{dev: i, gi: gi, seq: f.gpmSeq}
		return nvml.SUCCESS
	}
	f.wireHealth(i, d)
	d.GetVirtualizationModeFunc = func() (nvml.GpuVirtualizationMode, nvml.Return) {
		return nvml.GPU_VIRTUALIZATION_MODE_NONE, f.inject(i, "GetVirtualizationMode")
	}
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return {
		return f.inject(i, "RegisterEvents")
	}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, f.inject(i, "GetMaxMigDeviceCount") }
	d.GetMigDeviceHandleByIndexFunc = func(idx int) (nvml.Device, nvml.Return) {
		gis := sortedGIs(d)
		if idx >= len(gis) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return f.migDevice(i, d, gis[idx]), f.inject(i, "GetMigDeviceHandleByIndex")
	}
	d.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		if r := f.inject(i, "GetGpuInstanceById"); r != nvml.SUCCESS {
			return nil, r
		}
		for _, gi := range sortedGIs(d) {
			if int(gi.Info.Id) == id {
				return gi, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	// control
	d.GetPowerManagementLimitConstraintsFunc = func() (uint32, uint32, nvml.Return) {
		return 200000, 700000, nvml.SUCCESS
	}
	d.GetPowerManagementDefaultLimitFunc = func() (uint32, nvml.Return) { return 700000, nvml.SUCCESS }
	d.GetPowerManagementLimitFunc = func() (uint32, nvml.Return) { return 700000, f.inject(i, "GetPowerManagementLimit") }
	d.SetPowerManagementLimitFunc = func(uint32) nvml.Return { return f.inject(i, "SetPowerManagementLimit") }
	d.SetGpuLockedClocksFunc = func(uint32, uint32) nvml.Return { return f.inject(i, "SetGpuLockedClocks") }
	d.ResetGpuLockedClocksFunc = func() nvml.Return { return f.inject(i, "ResetGpuLockedClocks") }
}

func sortedGIs(d *server.Device) []*server.GpuInstance {
	d.RLock()
	defer d.RUnlock()
	var gis []*server.GpuInstance
	for gi := range d.GpuInstances {
		gis = append(gis, gi)
	}
	sort.Slice(gis, func(a, b int) bool { return gis[a].Info.Id < gis[b].Info.Id })
	return gis
}

// migDevice returns a MIG device handle for a GPU instance of the mock.
func (f *fixture) migDevice(parent int, d *server.Device, gi *server.GpuInstance) nvml.Device {
	prof := d.Config.MIGProfiles.GpuInstanceProfiles[int(gi.Info.ProfileId)]
	m := &mock.Device{}
	m.GetUUIDFunc = func() (string, nvml.Return) {
		return fmt.Sprintf("MIG-%d-%d", parent, gi.Info.Id), nvml.SUCCESS
	}
	m.GetGpuInstanceIdFunc = func() (int, nvml.Return) { return int(gi.Info.Id), f.inject(parent, "MIG.GetGpuInstanceId") }
	m.GetComputeInstanceIdFunc = func() (int, nvml.Return) { return 0, nvml.SUCCESS }
	m.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: prof.MemorySizeMB << 20, Used: 1<<30 + fixtureReserved}, f.inject(parent, "MIG.GetMemoryInfo")
	}
	m.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{Total: prof.MemorySizeMB << 20, Reserved: fixtureReserved, Used: 1 << 30}, f.inject(parent, "MIG.GetMemoryInfo")
	}
	m.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		if r := f.inject(parent, "MIG.GetComputeRunningProcesses"); r != nvml.SUCCESS {
			return nil, r
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return append([]nvml.ProcessInfo(nil), f.migProcs[[2]int{parent, int(gi.Info.Id)}]...), nvml.SUCCESS
	}
	m.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) {
		return nvml.DeviceAttributes{MultiprocessorCount: prof.MultiprocessorCount,
			GpuInstanceSliceCount: prof.SliceCount, MemorySizeMB: prof.MemorySizeMB}, nvml.SUCCESS
	}
	return m
}

// enableMIG puts a mock GPU into MIG mode with one GPU instance (and a full
// compute instance) per profile ID.
func (f *fixture) enableMIG(dev int, profileIDs ...int) {
	f.t.Helper()
	d := f.devs[dev]
	d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	for _, id := range profileIDs {
		info := d.Config.MIGProfiles.GpuInstanceProfiles[id]
		gi, r := d.CreateGpuInstance(&info)
		if r != nvml.SUCCESS {
			f.t.Fatalf("create GI: %v", r)
		}
		cp, err := fullComputeProfile("test", gi, info.SliceCount)
		if err != nil {
			f.t.Fatal(err)
		}
		if _, r := gi.CreateComputeInstance(&cp); r != nvml.SUCCESS {
			f.t.Fatalf("create CI: %v", r)
		}
	}
}

// closeWithoutLeaks closes the backend and fails the test unless every GPM
// sample it allocated was freed.
func (f *fixture) closeWithoutLeaks(b *Backend) {
	f.t.Helper()
	if err := b.Close(); err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.alloced != f.freed {
		f.t.Errorf("GPM samples leaked: %d allocated, %d freed", f.alloced, f.freed)
	}
}

func (f *fixture) backend() *Backend {
	f.t.Helper()
	b, err := New(Options{Lib: f.srv, Clock: f.clock, Logger: log.NewLogfmtLogger(f.logs)})
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	f.t.Cleanup(func() { _ = b.Close() })
	b.giProfileInfoV3 = f.giProfileInfoV3
	b.names.read = f.procfs.read
	b.names.link = f.procfs.link
	return b
}

// driverGINames makes GPU dev's driver name its GPU instance profiles in
// the v3 profile info, names by profile index ("MIG 1g.24gb+me.all").
func (f *fixture) driverGINames(dev int, names map[int]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.missing, symGIProfileInfoV)
	for i, n := range names {
		f.giNames[[2]int{dev, i}] = n
	}
}

// giProfileInfoV3 is the fake driver's v3 GPU instance profile info: the
// v1 info with the name driverGINames gave, a version mismatch without.
func (f *fixture) giProfileInfoV3(h nvml.Device, index int) (nvml.GpuInstanceProfileInfo_v3, nvml.Return) {
	var v3 nvml.GpuInstanceProfileInfo_v3
	dev := -1
	for i, d := range f.devs {
		if nvml.Device(d) == h {
			dev = i
		}
	}
	f.mu.Lock()
	name, ok := f.giNames[[2]int{dev, index}]
	f.mu.Unlock()
	if !ok {
		return v3, nvml.ERROR_ARGUMENT_VERSION_MISMATCH
	}
	p, r := h.GetGpuInstanceProfileInfo(index)
	if r != nvml.SUCCESS {
		return v3, r
	}
	v3.Id, v3.SliceCount, v3.InstanceCount, v3.MemorySizeMB = p.Id, p.SliceCount, p.InstanceCount, p.MemorySizeMB
	for k := 0; k < len(name) && k < len(v3.Name)-1; k++ {
		v3.Name[k] = int8(name[k])
	}
	return v3, nvml.SUCCESS
}

// Health figures of the fixture: 18 NVLink links (all up), per GPU i
// 1000*(i+1) KiB sent and 2000*(i+1) KiB received; one CRC flit error in
// the whole-GPU field total, and per link 2 CRC flit errors and on link 0
// 5 replays (the per-link counters, which Hopper's field totals miss);
// PCIe at 4 MB/s out and 8 MB/s in with 3 replays; 2 rows remapped for
// correctable errors; one page retired for single-bit errors.
const (
	fixtureLinks    = 18
	fixtureTxKiB    = 1000
	fixtureRxKiB    = 2000
	fixturePCIeTxKB = 4000
	fixturePCIeRxKB = 8000
	fixtureLinkFlit = 2 // CRC flit errors per link
	fixtureReplays  = 5 // replays on link 0
)

// wireHealth wires the NVLink, PCIe, row-remapping and page-retirement
// calls. "GetFieldValues" injects a return of the whole call,
// "NVLinkField" one of every field; "GetNvLinkErrorCounter" one of the
// per-link error counters on every link, "GetNvLinkErrorCounter/0" on
// link 0 only.
func (f *fixture) wireHealth(i int, d *server.Device) {
	d.GetFieldValuesFunc = func(vals []nvml.FieldValue) nvml.Return {
		if r := f.inject(i, "GetFieldValues"); r != nvml.SUCCESS {
			return r
		}
		field := f.inject(i, "NVLinkField")
		for k := range vals {
			v := &vals[k]
			v.NvmlReturn = uint32(field)
			v.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
			var n uint64
			switch v.FieldId {
			case nvml.FI_DEV_NVLINK_LINK_COUNT:
				n = fixtureLinks
				v.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
			case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
				n = fixtureTxKiB * uint64(i+1)
			case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
				n = fixtureRxKiB * uint64(i+1)
			case nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL:
				n = 1
			}
			binary.LittleEndian.PutUint64(v.Value[:], n)
		}
		return nvml.SUCCESS
	}
	d.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
		if link >= fixtureLinks {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return nvml.FEATURE_ENABLED, f.inject(i, "GetNvLinkState")
	}
	d.GetNvLinkErrorCounterFunc = func(link int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
		if link >= fixtureLinks {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		if r := f.inject(i, "GetNvLinkErrorCounter"); r != nvml.SUCCESS {
			return 0, r
		}
		if r := f.inject(i, fmt.Sprintf("GetNvLinkErrorCounter/%d", link)); r != nvml.SUCCESS {
			return 0, r
		}
		switch {
		case c == nvml.NVLINK_ERROR_DL_CRC_FLIT:
			return fixtureLinkFlit, nvml.SUCCESS
		case c == nvml.NVLINK_ERROR_DL_REPLAY && link == 0:
			return fixtureReplays, nvml.SUCCESS
		}
		return 0, nvml.SUCCESS
	}
	d.GetPcieThroughputFunc = func(c nvml.PcieUtilCounter) (uint32, nvml.Return) {
		if c == nvml.PCIE_UTIL_TX_BYTES {
			return fixturePCIeTxKB, f.inject(i, "GetPcieThroughput")
		}
		return fixturePCIeRxKB, f.inject(i, "GetPcieThroughput")
	}
	d.GetPcieReplayCounterFunc = func() (int, nvml.Return) { return 3, f.inject(i, "GetPcieReplayCounter") }
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		return 2, 0, false, false, f.inject(i, "GetRemappedRows")
	}
	d.GetRetiredPagesFunc = func(c nvml.PageRetirementCause) ([]uint64, nvml.Return) {
		if r := f.inject(i, "GetRetiredPages"); r != nvml.SUCCESS {
			return nil, r
		}
		if c == nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS {
			return []uint64{0x1000}, nvml.SUCCESS
		}
		return nil, nvml.SUCCESS
	}
	d.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
		return nvml.FEATURE_DISABLED, f.inject(i, "GetRetiredPagesPendingStatus")
	}
}
