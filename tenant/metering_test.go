package tenant

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

func price(v float64) *float64 { return &v }

func TestPricesConfig(t *testing.T) {
	const tenants = "tenants: [{name: a, selectors: [{executable: a}]}]\n"
	for _, tc := range []struct {
		name string
		yaml string
		want *Prices // when valid
		errs []string
	}{
		{"none", tenants, nil, nil},
		{"both", tenants + "metering: {currency: USD, price_per_gpu_hour: 2.5, price_per_kwh: 0.12}\n",
			&Prices{Currency: "USD", PerGPUHour: price(2.5), PerKWh: price(0.12)}, nil},
		{"energy only", tenants + "metering:\n  currency: EUR\n  price_per_kwh: 0.3\n",
			&Prices{Currency: "EUR", PerKWh: price(0.3)}, nil},
		{"free GPU time", tenants + "metering: {currency: JPY, price_per_gpu_hour: 0}\n",
			&Prices{Currency: "JPY", PerGPUHour: price(0)}, nil},
		{"no currency", tenants + "metering:\n  price_per_gpu_hour: 2\n", nil,
			[]string{"t.yaml:3: metering.currency is needed with a price"}},
		{"lower-case currency", tenants + "metering:\n  currency: usd\n  price_per_kwh: 0.1\n", nil,
			[]string{`t.yaml:3: metering.currency "usd" is not an ISO 4217 code`}},
		{"currency symbol", tenants + "metering:\n  currency: \"$\"\n  price_per_kwh: 0.1\n", nil,
			[]string{`t.yaml:3: metering.currency "$" is not an ISO 4217 code`}},
		{"negative", tenants + "metering:\n  currency: USD\n  price_per_gpu_hour: -1\n  price_per_kwh: -0.5\n", nil,
			[]string{"t.yaml:4: metering.price_per_gpu_hour must be a number, 0 or more, got -1",
				"t.yaml:5: metering.price_per_kwh must be a number, 0 or more, got -0.5"}},
		{"not a number", tenants + "metering:\n  currency: USD\n  price_per_kwh: 12c\n", nil,
			[]string{`t.yaml:4: metering.price_per_kwh must be a number, got "12c"`}},
		{"infinite", tenants + "metering:\n  currency: USD\n  price_per_kwh: .inf\n", nil,
			[]string{`t.yaml:4: metering.price_per_kwh must be a number, got ".inf"`}},
		{"no price", tenants + "metering:\n  currency: USD\n", nil,
			[]string{"t.yaml:3: metering sets no price: give price_per_gpu_hour, price_per_kwh or both"}},
		{"empty section", tenants + "metering:\n", nil, []string{"metering sets no price"}},
		{"unknown key", tenants + "metering:\n  currency: USD\n  price_per_gpu_second: 1\n", nil,
			[]string{`t.yaml:4: unknown key "price_per_gpu_second" in metering`, "metering sets no price"}},
		{"not a mapping", tenants + "metering: 2.5\n", nil, []string{"t.yaml:2: metering must be a mapping"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig("t.yaml", []byte(tc.yaml))
			if len(tc.errs) > 0 {
				if err == nil {
					t.Fatalf("parsed %+v, want errors %q", cfg.Metering, tc.errs)
				}
				for _, w := range tc.errs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := cfg.Metering.String(), tc.want.String(); (tc.want == nil) != (cfg.Metering == nil) || got != want {
				t.Errorf("prices %q, want %q", got, want)
			}
		})
	}
}

func TestPricesString(t *testing.T) {
	for _, tc := range []struct {
		p    *Prices
		want string
	}{
		{nil, "none (no cost series)"},
		{&Prices{Currency: "USD", PerGPUHour: price(2.5), PerKWh: price(0.12)}, "2.5 USD per GPU-hour, 0.12 USD per kWh"},
		{&Prices{Currency: "EUR", PerKWh: price(0.3)}, "0.3 EUR per kWh"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
}

func TestPricesInUse(t *testing.T) {
	file := &Prices{Currency: "EUR", PerKWh: price(0.3)}
	flags := &Prices{Currency: "USD", PerGPUHour: price(2.5)}
	for _, tc := range []struct {
		name        string
		file, flags *Prices
		want        string
	}{
		{"none", nil, nil, "none (no cost series)"},
		{"the flags'", nil, flags, "2.5 USD per GPU-hour (the --metering.* flags)"},
		{"the file's", file, nil, "0.3 EUR per kWh (the tenants file's metering section)"},
		{"the file's over the flags'", file, flags, "0.3 EUR per kWh (the tenants file's metering section)"},
	} {
		cfg := EmptyConfig()
		cfg.Metering = tc.file
		if got := cfg.PricesInUse(tc.flags); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestMeterCosts meters TestMeterRules' GPUs at 3.6 per GPU-hour (0.001
// per GPU-second) and 36 per kWh (1e-5 per joule): each tenant's cost is
// its reserved GPU-seconds and energy at those prices, and per GPU the
// tenants' and the idle costs add up to the time and energy metered.
func TestMeterCosts(t *testing.T) {
	ts := func(energy float64) gpu.Device {
		return gpu.Device{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, EnergyJoules: gpu.Float(energy), MemoryUsedBytes: 10}
	}
	mig := func(energy float64) gpu.Device {
		return gpu.Device{Index: 1, UUID: "GPU-1", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true, SMCount: 100,
			EnergyJoules: gpu.Float(energy), MemoryUsedBytes: 20,
			MIG: []gpu.MIGInstance{{GPUInstanceID: 1, SMCount: 60}, {GPUInstanceID: 2, SMCount: 40}}}
	}
	usage := []Usage{
		{Tenant: "a", UUID: "GPU-0", SMActive: gpu.Float(0.5), MemoryUsedBytes: 4},
		{Tenant: "b", UUID: "GPU-0", SMActive: gpu.Float(0.25), MemoryUsedBytes: 2},
		{Tenant: "c", UUID: "GPU-1", GPUInstance: "1", SMActive: gpu.Float(0.5), MemoryUsedBytes: 8},
	}
	usd := &Prices{Currency: "USD", PerGPUHour: price(3.6), PerKWh: price(36)}
	sample := func(sec int64, e0, e1 float64) *gpu.Readings {
		r := &gpu.Readings{Time: time.Unix(100+sec, 0), Interval: 2 * time.Second, Devices: []gpu.Device{ts(e0), mig(e1)}}
		if sec == 0 {
			r.Interval = 0 // the first sample only sets the counters' start
		}
		return r
	}
	m := newMeterState()
	m.meter(IdleToIdle, usd, sample(0, 1000, 5000), usage)
	meters, gpus := m.meter(IdleToIdle, usd, sample(2, 1100, 5200), usage)
	// a: 1 reserved GPU-second (half of GPU-0 for 2 s), 50 J; b the same
	// time, 25 J; c: 1.2 GPU-seconds (60% for 2 s), 60 J. Idle: GPU-0 no
	// time, 25 J; GPU-1 0.8 GPU-seconds, 140 J.
	want := map[string][2]float64{"a": {0.001, 50e-5}, "b": {0.001, 25e-5}, "c": {0.0012, 60e-5}}
	idle := map[string][2]float64{"GPU-0": {0, 25e-5}, "GPU-1": {0.0008, 140e-5}}
	for _, mt := range meters {
		if len(mt.Costs) != 1 || !closeTo(mt.Costs[0].GPUTime, want[mt.Tenant][0]) || !closeTo(mt.Costs[0].Energy, want[mt.Tenant][1]) ||
			!mt.Costs[0].GPUTimePriced || !mt.Costs[0].EnergyPriced {
			t.Errorf("%s: costs %+v, want %v", mt.Tenant, mt.Costs, want[mt.Tenant])
		}
	}
	for _, g := range gpus {
		if len(g.IdleCosts) != 1 || !closeTo(g.IdleCosts[0].GPUTime, idle[g.UUID][0]) || !closeTo(g.IdleCosts[0].Energy, idle[g.UUID][1]) {
			t.Errorf("%s: idle costs %+v, want %v", g.UUID, g.IdleCosts, idle[g.UUID])
		}
		if want := map[string]float64{"GPU-0": 20, "GPU-1": 40}[g.UUID]; g.MemoryByteSeconds != want {
			t.Errorf("%s: %g byte-seconds, want %g", g.UUID, g.MemoryByteSeconds, want)
		}
	}
	checkCostsConserved(t, meters, gpus, usd, 2)

	// A reload to other prices and another currency: USD stops growing,
	// EUR starts; a snapshot already taken does not change.
	before := meters[0].Costs[0]
	eur := &Prices{Currency: "EUR", PerKWh: price(360)}
	meters2, gpus2 := m.meter(IdleToIdle, eur, sample(4, 1200, 5400), usage)
	if meters[0].Costs[0] != before || len(meters[0].Costs) != 1 {
		t.Errorf("an earlier snapshot's costs changed: %+v", meters[0].Costs)
	}
	a := meters2[0]
	if a.Tenant != "a" || len(a.Costs) != 2 || a.Costs[0].Currency != "EUR" || a.Costs[1] != before ||
		a.Costs[0].GPUTimePriced || !closeTo(a.Costs[0].Energy, 50*360/3.6e6) {
		t.Errorf("a after the reload: %+v; want USD as before (%+v) and EUR energy only", a.Costs, before)
	}
	checkCostsConserved(t, meters2, gpus2, nil, 0)

	// No prices: nothing charged, nothing created.
	m = newMeterState()
	m.meter(IdleToIdle, nil, sample(0, 1000, 5000), usage)
	meters, gpus = m.meter(IdleToIdle, nil, sample(2, 1100, 5200), usage)
	if len(meters[0].Costs) != 0 || len(gpus[0].IdleCosts) != 0 {
		t.Errorf("costs without prices: %+v, %+v", meters[0].Costs, gpus[0].IdleCosts)
	}
}

func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-12*max(1, math.Abs(b)) }

// checkCostsConserved fails unless, per GPU and currency, the tenants' and
// the idle costs add up to the GPU's time (sec, the seconds metered) and
// energy at prices (nil: only that they are not negative, the prices
// having changed).
func checkCostsConserved(t *testing.T, meters []Meter, gpus []GPUMeter, prices *Prices, sec float64) {
	t.Helper()
	type key struct{ uuid, cur string }
	sum := map[key][2]float64{}
	add := func(uuid string, cs []Cost) {
		for _, c := range cs {
			if c.GPUTime < 0 || c.Energy < 0 {
				t.Errorf("%s: negative cost %+v", uuid, c)
			}
			s := sum[key{uuid, c.Currency}]
			sum[key{uuid, c.Currency}] = [2]float64{s[0] + c.GPUTime, s[1] + c.Energy}
		}
	}
	for _, m := range meters {
		add(m.UUID, m.Costs)
	}
	for _, g := range gpus {
		add(g.UUID, g.IdleCosts)
		if prices == nil {
			continue
		}
		s := sum[key{g.UUID, prices.Currency}]
		if w := sec * *prices.PerGPUHour / 3600; !closeTo(s[0], w) {
			t.Errorf("%s: GPU time costs add up to %g, the GPU's %g s at the price %g", g.UUID, s[0], sec, w)
		}
		if w := g.EnergyJoules * *prices.PerKWh / 3.6e6; !closeTo(s[1], w) {
			t.Errorf("%s: energy costs add up to %g, the GPU's %g J at the price %g", g.UUID, s[1], g.EnergyJoules, w)
		}
	}
}

// TestPricesFromFlagsAndFile: the flags' prices hold while the tenants
// file has no metering section; a file's section replaces them; a reload
// of a file with bad prices fails and keeps the prices in use.
func TestPricesFromFlagsAndFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tenants.yaml")
	write := func(s string) {
		if err := os.WriteFile(file, []byte("tenants: [{name: a, selectors: [{uid: 1}]}]\n"+s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	cfg, err := LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	flags := &Prices{Currency: "USD", PerGPUHour: price(2)}
	b, err := NewBuilder(cfg, BuilderOptions{Prices: flags})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		file string
		ok   bool
		want string
	}{
		{"", true, "2 USD per GPU-hour"},
		{"metering: {currency: EUR, price_per_kwh: 0.25}\n", true, "0.25 EUR per kWh"},
		{"metering: {currency: EUR, price_per_kwh: -0.25}\n", false, "0.25 EUR per kWh"},
		{"metering: {currency: eur, price_per_kwh: 0.25}\n", false, "0.25 EUR per kWh"},
		{"", true, "2 USD per GPU-hour"},
	} {
		write(step.file)
		err := b.Reload("")
		if (err == nil) != step.ok {
			t.Errorf("%q: reload error %v, want ok=%v", step.file, err, step.ok)
		}
		if got := b.cfg.Load().prices.String(); got != step.want {
			t.Errorf("%q: prices %q in use, want %q", step.file, got, step.want)
		}
	}
}
