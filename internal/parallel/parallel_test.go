package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// Calls of Each from several goroutines at once, and from inside a call,
// each call every index exactly once.
func TestEachConcurrent(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				calls := make([]atomic.Int32, 20)
				Each(len(calls), func(i int) {
					calls[i].Add(1)
					if i%7 == 0 {
						inner := make([]atomic.Int32, 3)
						Each(len(inner), func(k int) { inner[k].Add(1) })
						for k := range inner {
							if c := inner[k].Load(); c != 1 {
								t.Errorf("inner f(%d) called %d times", k, c)
							}
						}
					}
				})
				for i := range calls {
					if c := calls[i].Load(); c != 1 {
						t.Errorf("f(%d) called %d times", i, c)
					}
				}
			}
		})
	}
	wg.Wait()
}

// What the calls write is seen by the caller once Each returns, however
// long the caller waited (the helpers asleep in between, or not).
func TestEachWritesSeen(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for round := range 20 {
		if round%5 == 0 {
			time.Sleep(3 * linger) // the helpers fall asleep
		}
		got := make([]int, 16)
		Each(len(got), func(i int) { got[i] = i + round })
		for i, v := range got {
			if v != i+round {
				t.Fatalf("round %d: got[%d] = %d", round, i, v)
			}
		}
	}
}
