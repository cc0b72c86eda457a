package simrun

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"hash"
	"math"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/autotune"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/baseline"
)

var update = flag.Bool("update", false, "rewrite testdata/readings.sha256 from this build's runs")

// readingsFile pins the hash of every snapshot, decision and window of a
// few runs: a change meant to make the runs faster must leave it as it
// is; a change to the model rewrites it (go test ./simrun -run
// TestReadingsHash -update) and says so.
const readingsFile = "testdata/readings.sha256"

// hashRuns are the pinned runs: the benchmark scenario under the policy
// of the speed target, and the tuner on each sharing mechanism.
var hashRuns = []struct {
	scenario, policy string
	duration         time.Duration
}{
	{"eight-gpu-hot", baseline.StaticEqualName, 10 * time.Minute},
	{"eight-gpu-hot", autotune.Name, 3 * time.Minute},
	{"bursty-llm-ttft", autotune.Name, 5 * time.Minute},
	{"h200-mig", autotune.Name, 5 * time.Minute},
	{"vgpu-contention", autotune.Name, 5 * time.Minute},
	{"timeslice-levels", autotune.Name, 5 * time.Minute},
	{"noisy-neighbour", baseline.UncappedName, 5 * time.Minute},
	{"bursty-llm-itl", autotune.Name, 5 * time.Minute},
}

// TestReadingsHash runs each pinned run and compares the hash of every
// step's snapshot (the readings and their attribution), the policy's
// decisions and the recorded window with testdata/readings.sha256. The
// hashes are of the exact float bits, which another architecture's
// floating point (fused multiply-adds, its math.Exp) may change: they
// are checked on amd64 only. The runs are made serially (GOMAXPROCS 1)
// and in parallel (GOMAXPROCS 4: the simulator's GPUs and the tenants'
// fits on several goroutines), whatever the machine's, and must give the
// same bits.
func TestReadingsHash(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 43 virtual minutes")
	}
	if runtime.GOARCH != "amd64" && !*update {
		t.Skipf("the pinned hashes are of amd64 floating point, not %s", runtime.GOARCH)
	}
	got := hashesAt(t, 1)
	if !*update {
		if par := hashesAt(t, 4); !slices.Equal(par, got) {
			t.Errorf("the runs at GOMAXPROCS=4 differ from those at 1:\n%s\nagainst\n%s", strings.Join(par, "\n"), strings.Join(got, "\n"))
		}
	}
	if *update {
		if err := os.WriteFile(readingsFile, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(readingsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		want = append(want, sc.Text())
	}
	for i, g := range got {
		if i >= len(want) || g != want[i] {
			t.Errorf("readings changed:\n got %s\nwant %s", g, strings.Join(want[min(i, len(want)):min(i+1, len(want))], ""))
		}
	}
	if len(want) != len(got) {
		t.Errorf("%s has %d runs, the test %d", readingsFile, len(want), len(got))
	}
}

// hashesAt makes the pinned runs at GOMAXPROCS procs and returns each
// one's hash line.
func hashesAt(t *testing.T, procs int) []string {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	var got []string
	for _, r := range hashRuns {
		h := sha256.New()
		steps := 0
		cfg := Config{Scenario: r.scenario, Policy: r.policy, Duration: r.duration, Step: time.Second,
			observe: func(snap *tenant.Snapshot, decs []tuner.Decision, w *sim.WindowStats) {
				steps++
				hashValue(h, reflect.ValueOf(deterministic(snap)), 0)
				hashValue(h, reflect.ValueOf(decs), 0)
				hashValue(h, reflect.ValueOf(w), 0)
			}}
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatalf("GOMAXPROCS=%d: %s %s: %v", procs, r.scenario, r.policy, err)
		}
		if want := int(r.duration / time.Second); steps != want {
			t.Fatalf("GOMAXPROCS=%d: %s %s: observed %d steps, want %d", procs, r.scenario, r.policy, steps, want)
		}
		got = append(got, fmt.Sprintf("%x  %s %s %v", h.Sum(nil), r.scenario, r.policy, r.duration))
	}
	return got
}

// deterministic is snap less what differs from one run to the next, or
// with where the scenario was read from: the wall time a sample took, the
// name of the tenants file and when it was loaded.
func deterministic(snap *tenant.Snapshot) tenant.Snapshot {
	s := *snap
	s.Sampler.LastDuration = 0
	s.Sampler.PublishDuration = 0 // wall time too
	s.Sampler.Interval = 0        // the interval configured, not a reading (and added since the pins)
	s.Config.File = ""
	s.Config.LastReloadSuccessTime = time.Time{}
	// each tenant's SLO window, copied from the tenants file beside its
	// class (not a reading, and added since the pins)
	s.Tenants = slices.Clone(s.Tenants)
	for i := range s.Tenants {
		s.Tenants[i].SLOWindow = 0
	}
	return s
}

func TestHashValueSeesEveryField(t *testing.T) {
	type inner struct{ F float64 }
	type outer struct {
		A int
		p *inner
		M map[string]float64
		S []any
		T time.Time
	}
	base := outer{A: 1, p: &inner{F: 0.5}, M: map[string]float64{"a": 1, "b": 2}, S: []any{"x", 3}, T: time.Unix(5, 0)}
	sum := func(v outer) string {
		h := sha256.New()
		hashValue(h, reflect.ValueOf(v), 0)
		return fmt.Sprintf("%x", h.Sum(nil))
	}
	b := sum(base)
	if sum(base) != b {
		t.Fatal("the same value hashed twice differs")
	}
	for name, change := range map[string]func(*outer){
		"int":          func(o *outer) { o.A = 2 },
		"pointee":      func(o *outer) { o.p = &inner{F: math.Nextafter(0.5, 1)} },
		"map value":    func(o *outer) { o.M = map[string]float64{"a": 1, "b": 3} },
		"map key":      func(o *outer) { o.M = map[string]float64{"a": 1, "c": 2} },
		"slice length": func(o *outer) { o.S = []any{"x"} },
		"interface":    func(o *outer) { o.S = []any{"x", int64(3)} },
		"time":         func(o *outer) { o.T = time.Unix(5, 1) },
	} {
		v := base
		change(&v)
		if sum(v) == b {
			t.Errorf("%s: changed value, same hash", name)
		}
	}
}

// addedSincePin are the fields added to the hashed types since the pinned
// hashes were written: each is hashed only where it is set, so that the
// pinned hashes still say whether the simulator's runs moved (a new field
// that the simulator leaves unset changes no run).
var addedSincePin = map[string]bool{"gpu.Device.UnlistedActivity": true, "gpu.MIGInstance.ProfileBuilt": true, "gpu.Device.MIGSMCount": true,
	"gpu.Device.NoProcessSamples": true, "gpu.Device.EnergyRepeated": true, "tenant.Meter.UsedUnknown": true, "tenant.Meter.EnergyUnknown": true, "tenant.Meter.ReservedUnknown": true,
	"tenant.GPUMeter.UnattributedEnergyJoules": true, "gpu.MIGInstance.OtherComputeInstances": true, "gpu.Device.ProcessesUnread": true,
	"gpu.Device.MPSProcessesUnread": true, "gpu.Device.MPSProcessesRefused": true, "gpu.MIGInstance.ProcessesUnread": true, "tenant.Usage.MemoryUnknown": true,
	"tenant.Meter.MemoryUnknown": true, "gpu.SamplerStats.Interval": true,
	"gpu.SamplerStats.PublishDuration": true, "gpu.SamplerStats.DuplicatesDropped": true,
	"tenant.Info.SLOWindow": true, "gpu.MIGInstance.ComputeInstancesRead": true, "gpu.Process.MPSServer": true, "gpu.Process.MPSServerUnverified": true}

// pointerSincePin are the fields that were values when the pinned hashes
// were written and are pointers now (nil where the value is unknown): one
// that is set hashes as the value it was, so that the pinned hashes still
// say whether the simulator's runs moved.
var pointerSincePin = map[string]bool{"gpu.VGPUInstance.FramebufferUsed": true}

// trackerState are fields of the latency tracker's own life, added since
// the pinned hashes were written, that the simulator sets at every step
// (a source read, a window counted, the tracker's number): they say
// nothing of a reading, a decision or a window's figures, and leaving
// them out keeps the pinned hashes saying whether those moved.
var trackerState = map[string]bool{"latency.Status.SourceRead": true, "latency.Status.Measured": true, "latency.Status.Epoch": true}

// hashValue writes v into h: every field (unexported ones too), floats by
// their bits, pointers and interfaces by what they hold (and the held
// type), maps in the order of their hashed keys, times as Unix
// nanoseconds; functions and channels are skipped.
func hashValue(h hash.Hash, v reflect.Value, depth int) {
	if depth > 64 {
		panic("hashValue: too deep (a cycle?)")
	}
	var b [8]byte
	u64 := func(x uint64) {
		binary.LittleEndian.PutUint64(b[:], x)
		h.Write(b[:])
	}
	if !v.IsValid() {
		u64(0xdead)
		return
	}
	if v.Type() == reflect.TypeFor[time.Time]() {
		if v.CanInterface() {
			u64(uint64(v.Interface().(time.Time).UnixNano()))
			return
		}
	}
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			u64(1)
		} else {
			u64(0)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		u64(uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u64(v.Uint())
	case reflect.Float32, reflect.Float64:
		u64(math.Float64bits(v.Float()))
	case reflect.Complex64, reflect.Complex128:
		u64(math.Float64bits(real(v.Complex())))
		u64(math.Float64bits(imag(v.Complex())))
	case reflect.String:
		u64(uint64(v.Len()))
		h.Write([]byte(v.String()))
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			u64(0)
			return
		}
		u64(1)
		if v.Kind() == reflect.Interface {
			h.Write([]byte(v.Elem().Type().String()))
		}
		hashValue(h, v.Elem(), depth+1)
	case reflect.Slice, reflect.Array:
		u64(uint64(v.Len()))
		for i := range v.Len() {
			hashValue(h, v.Index(i), depth+1)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			name := v.Type().String() + "." + v.Type().Field(i).Name
			if trackerState[name] || addedSincePin[name] && v.Field(i).IsZero() {
				continue
			}
			if pointerSincePin[name] && !v.Field(i).IsNil() {
				hashValue(h, v.Field(i).Elem(), depth+1) // as the value it was
				continue
			}
			hashValue(h, v.Field(i), depth+1)
		}
	case reflect.Map:
		type entry struct {
			key string
			v   reflect.Value
		}
		var es []entry
		for it := v.MapRange(); it.Next(); {
			kh := sha256.New()
			hashValue(kh, it.Key(), depth+1)
			es = append(es, entry{string(kh.Sum(nil)), it.Value()})
		}
		slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.key, b.key) })
		u64(uint64(len(es)))
		for _, e := range es {
			h.Write([]byte(e.key))
			hashValue(h, e.v, depth+1)
		}
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
	}
}
