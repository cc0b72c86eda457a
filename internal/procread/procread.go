// Package procread reads other processes' procfs files, each read waited
// for at most a deadline, with the reads left blocked past theirs bounded.
//
// A read of a process's procfs file may block for good, and cannot be
// interrupted: /proc/PID/environ and /proc/PID/cmdline read the process's
// memory under its mmap lock, which a process stuck in a wedged driver, or
// whose pages a file system that never answers holds, keeps; so may a
// read of its other files. So each read runs in a goroutine of its own,
// waited for at most the reader's timeout; past that the caller is told
// ErrStuck, and the goroutine is left to end when the read does, its
// result dropped. No read of a process is started while an earlier one of
// its has run past its deadline (the process is passed over at once), nor
// any while MaxStuck have; and where MaxStuck is set, no more than that
// many reads run at once, whoever asks: a read beyond waits for one to end,
// until its own deadline. The goroutines left blocked are at most one per
// file read of each stuck process, and MaxStuck in all where it is set.
// How much a read reads is its caller's bound: the reader only times it.
package procread

import (
	"errors"
	"sync"
	"time"
)

// ErrStuck is the error of a read not made, or not waited for: it did not
// end by its deadline, an earlier read of the process's has not ended past
// its own, or MaxStuck reads have not.
var ErrStuck = errors.New("procfs read not answered in time")

// Options configure New.
type Options struct {
	// Timeout is how long each read is waited for.
	Timeout time.Duration
	// After returns a channel that receives once d has passed on the
	// clock the reads are timed on; time.After when nil.
	After func(d time.Duration) <-chan time.Time
	// MaxStuck bounds the reads running at once, and so those left
	// blocked past their deadline: once that many run, a read waits for
	// one to end (until its deadline), and once that many are stuck, no
	// read is started. 0: no bound but the one per file of each process.
	MaxStuck int
	// Join makes a read of a process's file while an earlier read of the
	// same file is under way wait for that read, and take its result,
	// rather than start another. A caller that must read a file anew after
	// some event (a check after the process is pinned) does not join.
	Join bool
}

// Reader reads processes' procfs files with a deadline each. It is safe
// for concurrent use.
type Reader struct {
	timeout time.Duration
	after   func(time.Duration) <-chan time.Time
	max     int
	join    bool

	// slots holds a token for each read running where MaxStuck bounds
	// them (nil: no bound)
	slots chan struct{}

	mu    sync.Mutex
	calls map[file]*call // the reads under way, where reads join
	stuck map[int]int    // the reads of each process past their deadline, not ended
	n     int            // the sum of stuck
}

// file is a process's procfs file.
type file struct {
	pid  int
	name string
}

// call is one read under way.
type call struct {
	done chan struct{} // closed once the read has ended, b and err set
	b    []byte
	err  error
	late bool // given up at its deadline: counted in stuck
}

// New returns a Reader on the options o.
func New(o Options) *Reader {
	if o.After == nil {
		o.After = time.After
	}
	r := &Reader{timeout: o.Timeout, after: o.After, max: o.MaxStuck, join: o.Join, calls: map[file]*call{}, stuck: map[int]int{}}
	if o.MaxStuck > 0 {
		r.slots = make(chan struct{}, o.MaxStuck)
	}
	return r
}

// Read runs read, a read of process pid's file name, and returns what it
// returns; or fails with ErrStuck where it does not end by the reader's
// timeout, or is not started (an earlier read of the process's, or
// MaxStuck reads, not ended past their deadline; MaxStuck reads running
// until its deadline).
func (r *Reader) Read(pid int, name string, read func() ([]byte, error)) ([]byte, error) {
	r.mu.Lock()
	if r.refused(pid) {
		r.mu.Unlock()
		return nil, ErrStuck
	}
	// the deadline is set before the read starts: a test that advances a
	// manual clock once the read is under way is sure to pass it
	deadline := r.after(r.timeout)
	f := file{pid, name}
	c, ok := r.calls[f]
	r.mu.Unlock()
	if !ok {
		if c = r.start(f, deadline, read); c == nil {
			return nil, ErrStuck
		}
	}
	return r.wait(c, pid, deadline)
}

// refused says whether a read of process pid is not started: one of its
// is stuck, or MaxStuck are. Called with r.mu held.
func (r *Reader) refused(pid int) bool {
	return r.stuck[pid] > 0 || (r.max > 0 && r.n >= r.max)
}

// start starts read, of file f, once fewer than MaxStuck reads run (where
// it is set), waited for until deadline; or joins a read of f started
// meanwhile. Nil where it is not started: no read ended by the deadline,
// or f's process or MaxStuck reads got stuck meanwhile.
func (r *Reader) start(f file, deadline <-chan time.Time, read func() ([]byte, error)) *call {
	if r.slots != nil {
		select {
		case r.slots <- struct{}{}:
		case <-deadline:
			return nil
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.calls[f]; ok || r.refused(f.pid) {
		r.free()
		return c
	}
	c := &call{done: make(chan struct{})}
	if r.join {
		r.calls[f] = c
	}
	go r.run(c, f, read)
	return c
}

// free gives back the slot of a read that ended, or was not started.
func (r *Reader) free() {
	if r.slots != nil {
		<-r.slots
	}
}

// wait waits for c, a read of process pid's, until deadline; past it the
// read is counted stuck (once, however many wait for it).
func (r *Reader) wait(c *call, pid int, deadline <-chan time.Time) ([]byte, error) {
	select {
	case <-c.done:
		return c.b, c.err
	case <-deadline:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-c.done: // ended as the deadline passed
		return c.b, c.err
	default:
	}
	if !c.late { // (a joined read is counted once)
		c.late = true
		r.stuck[pid]++
		r.n++
	}
	return nil, ErrStuck
}

// run runs read, the read c of file f, in the slot start took.
func (r *Reader) run(c *call, f file, read func() ([]byte, error)) {
	b, err := read()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.free()
	if r.join {
		delete(r.calls, f)
	}
	if c.late {
		r.n--
		if r.stuck[f.pid]--; r.stuck[f.pid] <= 0 {
			delete(r.stuck, f.pid)
		}
	}
	c.b, c.err = b, err
	close(c.done)
}
