package nvml

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// backendLock serializes sampling and control, as a mutex does, but a
// caller with a context stops waiting for it once the context ends: a
// sample may hold it for as long as a driver call takes, and a control
// call (the tuner changing or reverting a clock or power limit) must not
// wait past its own deadline for it. The zero value is unlocked.
type backendLock struct {
	once   sync.Once
	slot   chan struct{}          // holds one token while locked
	holder atomic.Pointer[string] // what holds it ("a sample", a control call's name); nil: unnamed
}

func (l *backendLock) ch() chan struct{} {
	l.once.Do(func() { l.slot = make(chan struct{}, 1) })
	return l.slot
}

// Lock waits for the lock without bound (Close, Capabilities: no context).
func (l *backendLock) Lock() { l.ch() <- struct{}{} }

// Unlock releases the lock.
func (l *backendLock) Unlock() {
	l.holder.Store(nil)
	select {
	case <-l.ch():
	default:
		panic("nvml: unlock of the unlocked backend lock")
	}
}

// lockFor waits for the lock until ctx ends, then holds it for who (named
// in the error of a caller that gave up waiting while it held it). The
// error wraps gpu.ErrBusy (nothing was asked of the GPU) and ctx's error.
func (l *backendLock) lockFor(ctx context.Context, who string) error {
	select {
	case l.ch() <- struct{}{}: // free: taken without looking at ctx, as sync.Mutex would be
	default:
		select {
		case l.ch() <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("%w: %s gave up waiting for the NVML backend, which %s holds: %w",
				gpu.ErrBusy, who, l.holding(), ctx.Err())
		}
	}
	l.holder.Store(&who)
	return nil
}

// holding names what holds the lock, for an error.
func (l *backendLock) holding() string {
	if h := l.holder.Load(); h != nil {
		return *h
	}
	return "another call"
}
