package dcgmexp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// pages serves the bodies in turn, one a request, the last for good.
func pages(t *testing.T, bodies ...string) *httptest.Server {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := min(int(n.Add(1))-1, len(bodies)-1)
		if bodies[i] == "" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(bodies[i]))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// newSource is New(inner, opts), closed when the test ends.
func newSource(t *testing.T, inner gpu.Source, opts Options) *Source {
	t.Helper()
	s, err := New(inner, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// sampleOnce is one sample of s, which must not fail.
func sampleOnce(t *testing.T, s *Source) *gpu.Readings {
	t.Helper()
	rd, err := s.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

// energyPage is a page with GPU A's energy counter at mJ.
func energyPage(mJ string) string {
	return fmt.Sprintf("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=%q} %s\n", uuidA, mJ)
}

// The page's energy counter fills a GPU whose NVML counter was never read.
// It was served as the page gave it: one page of 0 between true readings
// billed the whole counter (388.8 MJ) to one tenant, and one of DCGM's
// blanks (2147483632 mJ) spiked it, after which the true readings, lower,
// read as late copies. It now goes through the guard the NVML backend's
// counter goes through: a reading that does not follow from the last
// taken is left out, the sample read without its counter.
func TestPageEnergyCounterGuarded(t *testing.T) {
	const (
		s = 777_600_000_000 // mJ: 30 days at 300 W
		w = 300_000         // mJ a second at 300 W
	)
	mj := func(v int64) string { return fmt.Sprint(v) }
	for _, tc := range []struct {
		name  string
		pages []string
		limit *float64 // NVML's power limit, W
		want  []int64  // served, mJ; -1 absent
	}{
		{"true readings", []string{mj(s), mj(s + w), mj(s + 2*w)}, nil, []int64{s, s + w, s + 2*w}},
		{"zero between true readings", []string{mj(s), mj(s + w), "0", mj(s + 3*w), mj(s + 4*w)}, nil,
			[]int64{s, s + w, -1, s + 3*w, s + 4*w}},
		// 2 MJ in a second: beyond the bound of 10 kW
		{"ahead once", []string{mj(100e6), mj(100e6 + w), mj(2100e6), mj(100e6 + 3*w)}, nil,
			[]int64{100e6, 100e6 + w, -1, 100e6 + 3*w}},
		// 30 kJ in a second is within 10 kW, not within twice a 700 W limit
		{"ahead by more than the power limit allows", []string{mj(s), mj(s + 30e6), mj(s + 2*w)}, gpu.Float(700),
			[]int64{s, -1, s + 2*w}},
		{"counter restarted", []string{mj(s), mj(w), mj(2 * w), mj(3 * w), mj(4 * w)}, nil,
			[]int64{s, -1, -1, 3 * w, 4 * w}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := pages(t, mapPages(tc.pages)...)
			inner := &fakeSource{}
			s := newSource(t, inner, Options{URL: srv.URL})
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i, want := range tc.want {
				inner.rd = &gpu.Readings{Time: at.Add(time.Duration(i) * time.Second),
					Devices: []gpu.Device{{UUID: uuidA, Up: true, PowerLimitW: tc.limit}}}
				rd := sampleOnce(t, s)
				got := rd.Devices[0].EnergyJoules
				switch {
				case want < 0 && got != nil:
					t.Errorf("sample %d: page %s mJ served as %g J; want absent", i, tc.pages[i], *got)
				case want >= 0 && (got == nil || *got != float64(want)/1000):
					t.Errorf("sample %d: page %s mJ served as %s; want %g J", i, tc.pages[i], show(got), float64(want)/1000)
				}
			}
		})
	}
}

func mapPages(mJ []string) []string {
	out := make([]string, len(mJ))
	for i, v := range mJ {
		out[i] = energyPage(v)
	}
	return out
}

// DCGM writes a blank (a base of 16 values) in place of a reading it does
// not have; dcgm-exporter serves it as it is. Those of the energy counter
// were parsed as energy (2147483632 mJ, 2^47 mJ): now skipped, with a
// warning naming them; the values beside them are not.
func TestParseSkipsDCGMBlanks(t *testing.T) {
	for _, tc := range []struct {
		value string
		blank bool
	}{
		{"2147483632", true},             // DCGM_INT32_BLANK
		{"2147483647", true},             // DCGM_INT32_BLANK + 15
		{"2147483631", false},            // a reading
		{"2147483648", false},            // a reading
		{"140737488355328", true},        // DCGM_FP64_BLANK
		{"140737488355328.000000", true}, // as dcgm-exporter formats it
		{"140737488355343", true},        // DCGM_FP64_BLANK + 15
		{"140737488355344", false},
		{"140737488355327", false},
	} {
		f, warns, err := Parse(strings.NewReader(energyPage(tc.value)))
		if err != nil {
			t.Fatal(err)
		}
		v := f[Key{UUID: uuidA, GI: -1}]
		switch {
		case tc.blank && v != nil:
			t.Errorf("%s mJ: parsed as %s; want skipped", tc.value, show(v.EnergyJoules))
		case tc.blank && (len(warns) != 1 || !strings.Contains(warns[0], "DCGM's blanks")):
			t.Errorf("%s mJ: warnings %q; want one naming the blank", tc.value, warns)
		case !tc.blank && (v == nil || v.EnergyJoules == nil):
			t.Errorf("%s mJ: skipped (%q); want read", tc.value, warns)
		}
	}
	// the 64-bit integer blank is past every field's range anyway; a
	// ratio's blank is too
	for _, line := range []string{energyPage("9223372036854775792"), fmt.Sprintf("DCGM_FI_DEV_FB_USED{UUID=%q} 2147483632\n", uuidA)} {
		if f, _, _ := Parse(strings.NewReader(line)); len(f) != 0 {
			t.Errorf("%q: parsed; want skipped", line)
		}
	}
}

// The page's counter was bounded by the power limit NVML read at the
// sample that read it: a limit raised while the page was down or lacked
// the counter, and lowered again before it came back, left the energy
// drawn at the raised limit refused. The guard now sees the limit of
// every sample since the last reading taken.
func TestPageEnergyBoundedByTheLimitSinceTheLastReading(t *testing.T) {
	const s = 777_600_000_000 // mJ
	for _, gap := range []struct{ name, page string }{{"page down", ""}, {"page without the counter", "# nothing\n"}} {
		t.Run(gap.name, func(t *testing.T) {
			srv := pages(t, energyPage(fmt.Sprint(s)), gap.page, gap.page, energyPage(fmt.Sprint(s+650*3500*1000)))
			inner := &fakeSource{}
			src := newSource(t, inner, Options{URL: srv.URL})
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i, c := range []struct {
				at    time.Duration
				limit float64 // W
			}{{0, 100}, {time.Minute, 700}, {59 * time.Minute, 100}, {time.Hour, 100}} {
				inner.rd = &gpu.Readings{Time: t0.Add(c.at), Devices: []gpu.Device{{UUID: uuidA, Up: true, PowerLimitW: gpu.Float(c.limit)}}}
				got := sampleOnce(t, src).Devices[0].EnergyJoules
				if want := i == 0 || i == 3; (got != nil) != want {
					t.Errorf("sample %d at %v: counter %s, want served %v", i, c.at, show(got), want)
				}
			}
		})
	}
}
