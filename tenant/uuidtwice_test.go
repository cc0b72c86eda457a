package tenant

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// TestMeterUUIDRepeated: a backend that reports two devices with one UUID
// (a fault) had them metered as one GPU: each device's tenants were metered
// on both (22 GPU-seconds of each tenant over 11 s of one GPU) and one
// device's energy went nowhere. The first device of the UUID is metered
// with its own tenants alone, and conserves: its tenants' time held adds
// up to at most the time metered, and with the idle energy their energy to
// its counter's increase. The device repeating it is not metered, and is
// logged once while it lasts.
func TestMeterUUIDRepeated(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	b := mustBuilder(t, sharedTenants, BuilderOptions{Logger: log.NewLogfmtLogger(logs)})
	at := time.Unix(100, 0)
	readings := func(first, second float64) *gpu.Readings {
		at = at.Add(time.Second)
		dev := func(i int, e float64, p gpu.Process) gpu.Device {
			return gpu.Device{Index: i, UUID: "GPU-X", Up: true, Mode: gpu.SharingTimeSlice, EnergyJoules: gpu.Float(e),
				Activity: gpu.Activity{SMActive: gpu.Float(0.5)}, Processes: []gpu.Process{p}}
		}
		return &gpu.Readings{Time: at, Interval: time.Second, Devices: []gpu.Device{
			dev(0, first, gpu.Process{PID: 1, Name: "vllm", UID: 1000, GPUInstanceID: -1, SMUtil: gpu.Float(0.5), UsedMemoryBytes: gpu.Uint(gib)}),
			dev(1, second, gpu.Process{PID: 3, Name: "python3", UID: 1002, GPUInstanceID: -1, SMUtil: gpu.Float(0.5), UsedMemoryBytes: gpu.Uint(gib)}),
		}}
	}
	b.Build(readings(0, 0), gpu.SamplerStats{})
	var s *Snapshot
	for i := 1; i <= 10; i++ {
		s = b.Build(readings(float64(100*i), float64(300*i)), gpu.SamplerStats{})
	}
	const metered = 10.0 // seconds: the first sample's counter is the one the increase counts from
	if len(s.GPUMeters) != 1 {
		t.Fatalf("GPU meters %+v, want GPU-X's", s.GPUMeters)
	}
	g := s.GPUMeters[0]
	if g.GPU != 0 || g.EnergyJoules != 1000 {
		t.Errorf("GPU meter %+v: want device 0's, 1000 J", g)
	}
	var held, energy float64
	for _, m := range s.Meters {
		held += m.GPUSecondsReserved
		energy += m.EnergyJoules
		if m.Tenant != "chat" || m.GPU != 0 {
			t.Errorf("meter of %s on GPU %d %s: the device repeating GPU-X's UUID is metered", m.Tenant, m.GPU, m.UUID)
		}
	}
	if held > metered+1+1e-9 { // the first sample's interval is metered time too
		t.Errorf("the tenants held %g GPU-seconds of GPU-X over %g s", held, metered+1)
	}
	if math.Abs(energy+g.IdleEnergyJoules-g.EnergyJoules) > 1e-9 {
		t.Errorf("tenants %g J + idle %g J, the GPU counted %g J", energy, g.IdleEnergyJoules, g.EnergyJoules)
	}
	if n := strings.Count(logs.String(), "GPU UUID reported by more than one device"); n != 1 || !strings.Contains(logs.String(), "uuid=GPU-X gpu=0 not_metered_gpu=1") {
		t.Errorf("logged %d times, want once naming both devices:\n%s", n, logs)
	}
}
