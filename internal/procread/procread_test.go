package procread

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fake is the reads of a fake procfs: each blocks, while blocking, until
// release is closed, and says which process's it was.
type fake struct {
	release chan struct{}

	mu       sync.Mutex
	calls    int
	blocking bool
}

func newFake() *fake { return &fake{release: make(chan struct{}), blocking: true} }

// read returns a read of process pid's file.
func (f *fake) read(pid int) func() ([]byte, error) {
	return func() ([]byte, error) {
		f.mu.Lock()
		f.calls++
		b := f.blocking
		f.mu.Unlock()
		if b {
			<-f.release
		}
		return []byte(strconv.Itoa(pid)), nil
	}
}

// free lets the blocked reads end, and the reads from now on not block.
func (f *fake) free() {
	f.mu.Lock()
	f.blocking = false
	f.mu.Unlock()
	close(f.release)
}

func (f *fake) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (r *Reader) stuckReads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// unstick checks that r counts stuck reads blocked past their deadline,
// lets them end (f's), and checks that r counts none then and reads
// process pid's file name again, answered.
func unstick(t *testing.T, r *Reader, f *fake, stuck, pid int, name string) {
	t.Helper()
	if n := r.stuckReads(); n != stuck {
		t.Errorf("%d reads counted stuck, want %d", n, stuck)
	}
	f.free()
	synctest.Wait()
	if n := r.stuckReads(); n != 0 {
		t.Errorf("%d reads counted stuck once all ended, want 0", n)
	}
	if b, err := r.Read(pid, name, f.read(pid)); err != nil || string(b) != strconv.Itoa(pid) {
		t.Errorf("read once the stuck ones ended: %q, %v; want %q", b, err, strconv.Itoa(pid))
	}
}

// The reads left blocked are bounded: no read of a process is started
// while an earlier one of its has not ended past its deadline, nor any
// while MaxStuck have not; once they end, the processes are read again.
func TestStuckReadsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max = 3
		f := newFake()
		r := New(Options{Timeout: time.Second, MaxStuck: max})
		for _, tc := range []struct {
			name  string
			pid   int
			file  string
			calls int // the reads started so far
		}{
			{"first stuck", 1, "environ", 1},
			{"same process again: not read", 1, "environ", 1},
			{"same process, another file: not read", 1, "stat", 1},
			{"second", 2, "environ", 2},
			{"third: max reached", 3, "environ", 3},
			{"past max: not read", 4, "environ", 3},
			{"past max, again", 5, "stat", 3},
		} {
			if _, err := r.Read(tc.pid, tc.file, f.read(tc.pid)); !errors.Is(err, ErrStuck) {
				t.Errorf("%s: error %v, want %v", tc.name, err, ErrStuck)
			}
			if got := f.count(); got != tc.calls {
				t.Errorf("%s: %d reads started, want %d", tc.name, got, tc.calls)
			}
		}
		unstick(t, r, f, max, 1, "environ")
	})
}

// MaxStuck bounds the reads running at once, not only those already past
// their deadline: many asked at once (a sample naming each process in a
// goroutine of its own) each started a read before any was counted stuck,
// and left as many blocked. A read beyond waits for one to end, until its
// own deadline; one that ends frees its place for the next.
func TestConcurrentReadsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max, pids = 16, 100
		f := newFake()
		r := New(Options{Timeout: time.Second, MaxStuck: max, Join: true})
		var wg sync.WaitGroup
		for pid := 1; pid <= pids; pid++ {
			wg.Go(func() {
				if _, err := r.Read(pid, "cmdline", f.read(pid)); !errors.Is(err, ErrStuck) {
					t.Errorf("PID %d: error %v, want %v", pid, err, ErrStuck)
				}
			})
		}
		wg.Wait()
		if n := f.count(); n != max {
			t.Errorf("%d reads started by %d asked at once, want %d", n, pids, max)
		}
		unstick(t, r, f, max, 1, "cmdline")

		// reads that answer, asked at once: each waits its turn, and
		// every one is read
		g := newFake()
		got := make([][]byte, pids)
		for pid := 1; pid <= pids; pid++ {
			wg.Go(func() {
				got[pid-1], _ = r.Read(pid, "comm", g.read(pid))
			})
		}
		synctest.Wait()
		if n := g.count(); n != max {
			t.Errorf("%d reads running at once, want %d", n, max)
		}
		g.free()
		wg.Wait()
		for i, b := range got {
			if string(b) != strconv.Itoa(i+1) {
				t.Errorf("PID %d read %q", i+1, b)
			}
		}
	})
}

// A read not started is refused at once, without waiting for the
// deadline; a read that does not end by it is waited for exactly that
// long.
func TestStuckReadWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		r := New(Options{Timeout: time.Second})
		for _, tc := range []struct {
			name string
			want time.Duration
		}{
			{"a read that blocks", time.Second},
			{"the same process again", 0},
		} {
			start := time.Now()
			if _, err := r.Read(1, "cmdline", f.read(1)); !errors.Is(err, ErrStuck) {
				t.Errorf("%s: error %v, want %v", tc.name, err, ErrStuck)
			}
			if waited := time.Since(start); waited != tc.want {
				t.Errorf("%s: waited %v, want %v", tc.name, waited, tc.want)
			}
		}
		f.free()
	})
}

// Without MaxStuck, only the processes stuck are passed over: every other
// process is read however many reads are blocked.
func TestNoMaxStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const pids = 100
		f := newFake()
		r := New(Options{Timeout: time.Second})
		for pid := 1; pid <= pids; pid++ {
			if _, err := r.Read(pid, "cmdline", f.read(pid)); !errors.Is(err, ErrStuck) {
				t.Errorf("PID %d: error %v, want %v", pid, err, ErrStuck)
			}
		}
		if n := f.count(); n != pids {
			t.Errorf("%d reads started, want %d", n, pids)
		}
		f.free()
	})
}

// With Join, a read of a file while an earlier read of it is under way
// waits for that read and takes its result, and a stuck read is counted
// once however many waited for it; without, each read is made, and
// counted, on its own.
func TestJoin(t *testing.T) {
	for _, tc := range []struct {
		join  bool
		reads int // the reads started by two lookups at once
		stuck int // those counted past their deadline
	}{
		{true, 1, 1},
		{false, 2, 2},
	} {
		t.Run("join="+strconv.FormatBool(tc.join), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake()
				r := New(Options{Timeout: time.Second, Join: tc.join})
				// two lookups of one file past the deadline
				var wg sync.WaitGroup
				for range 2 {
					wg.Go(func() {
						if _, err := r.Read(7, "cmdline", f.read(7)); !errors.Is(err, ErrStuck) {
							t.Errorf("error %v, want %v", err, ErrStuck)
						}
					})
				}
				wg.Wait()
				if n := f.count(); n != tc.reads {
					t.Errorf("%d reads started, want %d", n, tc.reads)
				}
				unstick(t, r, f, tc.stuck, 7, "cmdline")
				// (made anew, not joined to one that ended)
				if n := f.count(); n != tc.reads+1 {
					t.Errorf("%d reads started once the stuck ones ended, want %d: a read joined one that had ended", n, tc.reads+1)
				}

				// two lookups of one file that answers in time: both get
				// its result
				g := newFake()
				var got [2][]byte
				for i := range 2 {
					wg.Go(func() {
						b, err := r.Read(8, "cmdline", g.read(8))
						if err != nil {
							t.Errorf("error %v", err)
						}
						got[i] = b
					})
				}
				synctest.Wait() // both under way
				g.free()
				wg.Wait()
				if string(got[0]) != "8" || string(got[1]) != "8" {
					t.Errorf("results %q, want \"8\" each", got)
				}
				if n := g.count(); n != tc.reads {
					t.Errorf("%d reads started of a file that answers, want %d", n, tc.reads)
				}
			})
		})
	}
}

// A read that ends in time is returned as it ended, its error too (not
// ErrStuck); its deadline is taken before it starts, so that a manual
// clock advanced once the read is under way is sure to pass it (a
// deadline taken after the read starts is a data race on afters, which
// -race reports).
func TestReadInTime(t *testing.T) {
	afters := 0
	after := func(time.Duration) <-chan time.Time {
		afters++
		return make(chan time.Time) // never
	}
	r := New(Options{Timeout: time.Second, After: after})
	b, err := r.Read(1, "status", func() ([]byte, error) {
		if afters != 1 {
			t.Errorf("the read started with %d deadlines taken, want 1", afters)
		}
		return []byte("x"), os.ErrPermission
	})
	if string(b) != "x" || !errors.Is(err, os.ErrPermission) {
		t.Errorf("Read = %q, %v; want \"x\", %v", b, err, os.ErrPermission)
	}
}

// The deadline is the injected clock's: a read waits until that clock
// passes it, and no longer.
func TestReadOnInjectedClock(t *testing.T) {
	deadline := make(chan time.Time)
	r := New(Options{Timeout: time.Hour, After: func(d time.Duration) <-chan time.Time {
		if d != time.Hour {
			t.Errorf("deadline in %v, want the timeout, 1h", d)
		}
		return deadline
	}})
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(1, "cmdline", func() ([]byte, error) {
			close(started)
			<-release
			return nil, nil
		})
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("Read returned %v without starting the read", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Read returned %v before its clock passed the deadline", err)
	default:
	}
	select {
	case deadline <- time.Time{}:
	case <-time.After(5 * time.Second): // (a guard against a hang)
		t.Fatal("Read does not wait on the injected clock")
	}
	if err := <-done; !errors.Is(err, ErrStuck) {
		t.Errorf("error %v, want %v", err, ErrStuck)
	}
}
