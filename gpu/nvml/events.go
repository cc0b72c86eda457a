package nvml

import (
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

const (
	// eventWaitMs is how long one nvmlEventSetWait blocks; it bounds how
	// long Close waits for the event goroutine.
	eventWaitMs = 500
	// maxPendingEvents caps the events kept per GPU between two samples.
	maxPendingEvents = 1000
	// eventRetry is the pause after a failed wait before the next one.
	eventRetry = 5 * time.Second
	// eventMinTurn is the least time a wait that brought no event takes:
	// one that returns at once (ERROR_TIMEOUT without waiting, events of
	// no GPU of this host) is paced to it rather than spinning a core.
	eventMinTurn = 50 * time.Millisecond
)

// eventWatcher waits for XID events in its own goroutine and keeps them per
// GPU until the next sample takes them.
type eventWatcher struct {
	set  nvml.EventSet
	quit chan struct{}
	done chan struct{}

	mu sync.Mutex
	// registered are the GPU handles registered with set, by UUID; a GPU
	// that was missing at start or re-acquired after it was lost is added
	// when its handle is acquired.
	registered map[string]nvml.Device
	pending    map[string][]gpu.Event
	dropped    map[string]int
	// started: the goroutine runs, from the first GPU registered (the set
	// is kept without one, for GPUs whose handles come later)
	started bool
}

// startEvents creates the event set and registers every GPU for XID
// events. Without the event calls there is none; the goroutine starts with
// the first GPU registered, here or when a GPU missing at start (every
// GPU, on a host started while they were in reset) is acquired.
func (b *Backend) startEvents() {
	if !b.has(symEventSetCreate, symRegisterEvents) || !(b.has(symEventSetWait) || b.has(symEventSetWaitV1)) {
		level.Info(b.logger).Log("msg", "driver lacks the NVML event calls; XID events are not reported")
		return
	}
	set, r := b.lib.EventSetCreate()
	if r != nvml.SUCCESS || set == nil {
		level.Warn(b.logger).Log("msg", "cannot create an NVML event set; XID events are not reported", "err", returnName(r))
		return
	}
	w := &eventWatcher{set: set, quit: make(chan struct{}), done: make(chan struct{}),
		registered: map[string]nvml.Device{}, pending: map[string][]gpu.Event{}, dropped: map[string]int{}}
	b.events = w
	for _, ds := range b.devs {
		if ds.handle != nil {
			w.register(b, ds)
		}
	}
}

// register adds a GPU's current handle to the event set, starting the
// goroutine at the first.
func (w *eventWatcher) register(b *Backend, ds *devState) {
	if r := ds.handle.RegisterEvents(nvml.EventTypeXidCriticalError, w.set); r != nvml.SUCCESS {
		b.logOnce(ds.uuid+"/events", "msg", "GPU cannot report XID events; left out",
			"gpu", ds.index, "uuid", ds.uuid, "reason", returnName(r))
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.registered[ds.uuid] = ds.handle
	select {
	case <-w.quit: // stopped
	default:
		if !w.started {
			w.started = true
			go w.run(b)
		}
	}
}

func (w *eventWatcher) run(b *Backend) {
	defer close(w.done)
	for {
		select {
		case <-w.quit:
			return
		default:
		}
		start := time.Now() // the library's own time, not b.clock
		data, r := w.wait()
		switch r {
		case nvml.SUCCESS, nvml.ERROR_TIMEOUT:
			if r == nvml.SUCCESS && w.safeDeliver(b, data) {
				continue
			}
			if rest := eventMinTurn - time.Since(start); rest > 0 {
				t := time.NewTimer(rest)
				select {
				case <-w.quit:
					t.Stop()
					return
				case <-t.C:
				}
			}
		default:
			b.logOnce("events/"+returnName(r), "msg", "waiting for NVML events failed; retrying",
				"err", returnName(r))
			select {
			case <-w.quit:
				return
			case <-b.clock.After(eventRetry):
			}
		}
	}
}

// wait calls nvmlEventSetWait, turning a panic of a broken wrapper into an
// error so that the goroutine keeps the process alive.
func (w *eventWatcher) wait() (data nvml.EventData, r nvml.Return) {
	defer func() {
		if p := recover(); p != nil {
			r = nvml.ERROR_UNKNOWN
		}
	}()
	return w.set.Wait(eventWaitMs)
}

// safeDeliver delivers an event and says whether it was one of a GPU of
// this backend; a panic of a library wrapper while identifying its GPU
// drops the event, not the process.
func (w *eventWatcher) safeDeliver(b *Backend, data nvml.EventData) (ours bool) {
	defer func() {
		if p := recover(); p != nil {
			ours = false
			b.logOnce("events/panic", "msg", "identifying the GPU of an NVML event failed; event dropped", "err", panicErr("the library", p))
		}
	}()
	return w.deliver(b, data)
}

func (w *eventWatcher) deliver(b *Backend, data nvml.EventData) bool {
	uuid := ""
	w.mu.Lock()
	for u, h := range w.registered {
		if sameHandle(h, data.Device) {
			uuid = u
			break
		}
	}
	w.mu.Unlock()
	if uuid == "" && data.Device != nil {
		uuid = w.uuidOf(data.Device)
	}
	if uuid == "" {
		return false // not a GPU this backend reports
	}
	ev := gpu.Event{Time: b.clock.Now(), Kind: gpu.EventXID}
	if data.EventType&nvml.EventTypeXidCriticalError != 0 {
		ev.Code = data.EventData
		ev.Message = fmt.Sprintf("XID %d", data.EventData)
		if data.GpuInstanceId != noInstance {
			ev.Message += fmt.Sprintf(" (GPU instance %d)", data.GpuInstanceId)
		}
	} else {
		ev.Message = fmt.Sprintf("NVML event type 0x%x", data.EventType)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending[uuid]) >= maxPendingEvents {
		w.dropped[uuid]++
		return true
	}
	w.pending[uuid] = append(w.pending[uuid], ev)
	return true
}

// uuidOf finds the registered GPU of a handle that is not one of the
// registered handles: a MIG device handle (by its parent) or a handle of
// another type (by UUID).
func (w *eventWatcher) uuidOf(h nvml.Device) string {
	var u string
	if parent, r := h.GetDeviceHandleFromMigDeviceHandle(); r == nvml.SUCCESS && parent != nil {
		if pu, r := parent.GetUUID(); r == nvml.SUCCESS {
			u = pu
		}
	} else if hu, r := h.GetUUID(); r == nvml.SUCCESS {
		u = hu
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.registered[u]; ok {
		return u
	}
	return ""
}

func sameHandle(a, b nvml.Device) (same bool) {
	defer func() {
		if recover() != nil { // handles of an uncomparable type
			same = false
		}
	}()
	return a == b
}

// takeEvents returns and clears the events of a GPU since the last call.
func (b *Backend) takeEvents(ds *devState) []gpu.Event {
	w := b.events
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	evs := w.pending[ds.uuid]
	delete(w.pending, ds.uuid)
	if n := w.dropped[ds.uuid]; n > 0 {
		level.Warn(b.logger).Log("msg", "too many NVML events between two samples; some dropped", "uuid", ds.uuid, "dropped", n)
		delete(w.dropped, ds.uuid)
	}
	return evs
}

// stop ends the goroutine, where one started, and frees the event set.
func (w *eventWatcher) stop() {
	w.mu.Lock()
	close(w.quit)
	started := w.started
	w.mu.Unlock()
	if started {
		<-w.done
	}
	_ = w.set.Free()
}
