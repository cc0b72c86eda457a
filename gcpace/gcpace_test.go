package gcpace

import "testing"

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name string
		live uint64
		want int
	}{
		{"no collection yet", 0, MaxPercent},
		{"small heap: the most", 4 * mib, MaxPercent},
		{"floor reached at the most", 8 * mib, MaxPercent},
		{"between", 16 * mib, 200},
		{"floor equals the heap", 32 * mib, 100},
		{"large heap: the default", 1 << 30, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percent(tc.live, Floor, MaxPercent); got != tc.want {
				t.Errorf("Percent(%d MiB) = %d, want %d", tc.live/mib, got, tc.want)
			}
		})
	}
}

// Adjust sets the percent only when it changes; GOGC in the environment
// leaves the collector alone.
func TestAdjust(t *testing.T) {
	var live uint64
	var sets []int
	p := &Pacer{floor: Floor, max: MaxPercent, cur: minPercent, live: func() uint64 { return live }, set: func(pc int) int { sets = append(sets, pc); return 0 }}
	for _, l := range []uint64{4 << 20, 5 << 20, 16 << 20, 16 << 20, 64 << 20} {
		live = l
		p.Adjust()
	}
	want := []int{400, 200, 100}
	if len(sets) != len(want) {
		t.Fatalf("set %v, want %v", sets, want)
	}
	for i := range want {
		if sets[i] != want[i] {
			t.Fatalf("set %v, want %v", sets, want)
		}
	}

	t.Setenv("GOGC", "100")
	if p := New(Floor, MaxPercent); p != nil {
		t.Error("a pacer with GOGC set")
	}
	var none *Pacer
	none.Adjust() // does nothing, does not panic
}
