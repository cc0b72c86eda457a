package parallel

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// Every index is called exactly once, whatever the processors.
func TestEach(t *testing.T) {
	for _, tc := range []struct {
		name  string
		procs int
		n     int
	}{
		{"none", 2, 0},
		{"one", 2, 1},
		{"serial", 1, 10},
		{"parallel", 4, 100},
		{"more processors than work", 8, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(tc.procs))
			calls := make([]atomic.Int32, tc.n)
			Each(tc.n, func(i int) { calls[i].Add(1) })
			for i := range calls {
				if c := calls[i].Load(); c != 1 {
					t.Errorf("f(%d) called %d times", i, c)
				}
			}
		})
	}
}

// With one processor the calls are made in order.
func TestEachSerialInOrder(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var got []int
	Each(5, func(i int) { got = append(got, i) })
	for i, v := range got {
		if v != i {
			t.Fatalf("calls in order %v", got)
		}
	}
	if len(got) != 5 {
		t.Fatalf("%d calls", len(got))
	}
}
