package tenant

import (
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestOwedEnergyAtItsPrices: the samples that read a GPU without a new
// reading of its energy counter (here dcgm-exporter's page between two
// collections, 29 copies of the counter) are owed their part of its next
// increase, and that part is charged at the prices in force at each of
// them, not at those of the sample that reads the counter again. Charged
// at the latter, a reload from USD to EUR just before the page's next
// collection billed in EUR the 29 s of energy drawn under USD. The sets of
// prices kept apart are bounded (maxOwedParts): the samples of a set past
// the bound are charged at the latest set kept.
func TestOwedEnergyAtItsPrices(t *testing.T) {
	usd := func(v float64) *Prices { return &Prices{Currency: "USD", PerKWh: gpu.Float(v)} }
	eur := &Prices{Currency: "EUR", PerKWh: gpu.Float(1)}
	const samples = 30 // read by the 30th; each sample's interval 1 s, 300 J
	for _, tc := range []struct {
		name   string
		prices func(i int) *Prices // in force at sample i, 1 to samples
		kept   func(i int) int     // the sample whose prices sample i's part is charged at
	}{
		{"a reload to another currency", func(i int) *Prices {
			if i == samples {
				return eur
			}
			return usd(0.10)
		}, nil},
		{"two reloads to other prices", func(i int) *Prices {
			switch {
			case i <= 10:
				return usd(0.10)
			case i < samples:
				return usd(0.20)
			}
			return usd(0.30)
		}, nil},
		{"back and forth", func(i int) *Prices {
			if i%2 == 0 {
				return eur
			}
			return usd(0.10)
		}, nil},
		{"prices given by the reload", func(i int) *Prices {
			if i == samples {
				return usd(0.10)
			}
			return nil
		}, nil},
		{"prices withdrawn by the reload", func(i int) *Prices {
			if i == samples {
				return nil
			}
			return usd(0.10)
		}, nil},
		{"more sets of prices than kept", func(i int) *Prices { return usd(float64(i)) }, func(i int) int {
			if i < samples {
				return min(i, maxOwedParts)
			}
			return i
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMeterState()
			at := time.Unix(1000, 0)
			usage := []Usage{{Tenant: "a", UUID: "GPU-0", SMActive: gpu.Float(0.5)}}
			read := func(p *Prices, e float64, repeated bool) ([]Meter, []GPUMeter) {
				at = at.Add(time.Second)
				r := &gpu.Readings{Time: at, Interval: time.Second, Devices: []gpu.Device{{UUID: "GPU-0", Up: true, EnergyJoules: gpu.Float(e), EnergyRepeated: repeated}}}
				return m.meter(IdleToIdle, p, r, usage)
			}
			read(tc.prices(1), 0, false)
			for i := 1; i < samples; i++ {
				read(tc.prices(i), 0, true)
				if o := m.owed["GPU-0"]; o == nil || len(o.parts) > maxOwedParts {
					t.Fatalf("sample %d: owed %+v, want at most %d sets of prices", i, o, maxOwedParts)
				}
			}
			meters, gpus := read(tc.prices(samples), 300*samples, false)
			want := map[string]float64{} // energy cost by currency, the tenant's and the idle alike
			for i := 1; i <= samples; i++ {
				j := i
				if tc.kept != nil {
					j = tc.kept(i)
				}
				if p := tc.prices(j); p != nil {
					want[p.Currency] += 150 * *p.PerKWh / joulesPerKWh
				}
			}
			if len(meters) != 1 || len(gpus) != 1 || meters[0].EnergyJoules != 150*samples || gpus[0].IdleEnergyJoules != 150*samples {
				t.Fatalf("meters %+v, GPU %+v: want %d J each to a and to idle", meters, gpus, 150*samples)
			}
			for who, costs := range map[string][]Cost{"tenant a": meters[0].Costs, "idle": gpus[0].IdleCosts} {
				got := map[string]float64{}
				for _, c := range costs {
					got[c.Currency] = c.Energy
				}
				if len(got) != len(want) {
					t.Errorf("%s: energy costs %v, want %v", who, got, want)
				}
				for cur, w := range want {
					if !closeTo(got[cur], w) {
						t.Errorf("%s: energy cost %g %s, want %g (costs %v)", who, got[cur], cur, w, got)
					}
				}
			}
		})
	}
}
