package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
)

// Persistent is a simulator whose GPU settings outlive the process, as a
// real GPU's do: every setting changed through it (MPS active-thread
// fractions, power limits, locked SM clocks, compute time-slice levels) is
// written to a file before it is made, with the value the GPU had before
// the first change, and a new Persistent on the same file starts with
// the settings left in it. A process killed after changing a setting
// leaves it changed for the next one, which is what crash tests of the
// tuner's restore need; the file says which settings differ from their
// first values (Leftovers).
//
// While the file named by the path plus ".hang" exists, a client restart
// waits for the duration it holds (or for its context), and fails where it
// holds no duration: a hung restart hook, for fault injection.
type Persistent struct {
	*Simulator
	path string
	mu   sync.Mutex
	set  map[string]PersistedSetting
}

// PersistedSetting is one setting in the file: the GPU's value before the
// first change through the file, and the value now.
type PersistedSetting struct {
	GPU     string        `json:"gpu"`
	Knob    gpu.Knob      `json:"knob"`
	PID     uint32        `json:"pid,omitempty"`
	Initial SettingsValue `json:"initial"`
	Current SettingsValue `json:"current"`
}

// SettingsValue is a setting's value: a number (fraction, watts), a clock
// range or a level.
type SettingsValue struct {
	Num    float64 `json:"num,omitempty"`
	MinMHz float64 `json:"min_mhz,omitempty"`
	MaxMHz float64 `json:"max_mhz,omitempty"`
	Text   string  `json:"text,omitempty"`
}

// Persist makes s keep its settings in path, and first sets the ones the
// file holds.
func Persist(s *Simulator, path string) (*Persistent, error) {
	p := &Persistent{Simulator: s, path: path, set: map[string]PersistedSetting{}}
	set, err := ReadPersisted(path)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, ps := range set {
		if err := s.setValue(ps.GPU, ps.Knob, ps.PID, ps.Current); err != nil {
			return nil, fmt.Errorf("sim settings %s: entry %d (%s): %w", path, i+1, ps.key(), err)
		}
		p.set[ps.key()] = ps
	}
	return p, nil
}

// maxPersistedBytes bounds the settings file: a setting per GPU, knob
// and MPS client is a few hundred bytes.
const maxPersistedBytes = 4 << 20

// ReadPersisted reads the settings a Persistent keeps in path (none when
// it does not exist).
// What is there and no regular file (a FIFO, whose read would block the
// start for good) or over maxPersistedBytes is refused, naming path.
func ReadPersisted(path string) ([]PersistedSetting, error) {
	b, err := fileread.Regular(path, maxPersistedBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var set []PersistedSetting
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("sim settings %s: %w", path, err)
	}
	return set, nil
}

// Leftovers returns the settings that differ from their first values.
func Leftovers(set []PersistedSetting) []PersistedSetting {
	var out []PersistedSetting
	for _, ps := range set {
		if ps.Current != ps.Initial {
			out = append(out, ps)
		}
	}
	return out
}

func (ps PersistedSetting) key() string { return fmt.Sprintf("%s/%s/%d", ps.GPU, ps.Knob, ps.PID) }

// change writes the new value to the file, then makes it with f; when f
// fails, the file gets the old value back.
func (p *Persistent) change(uuid string, k gpu.Knob, pid uint32, v SettingsValue, f func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := PersistedSetting{GPU: uuid, Knob: k, PID: pid}.key()
	old, ok := p.set[key]
	if !ok {
		p.Simulator.mu.Lock()
		cur, err := p.Simulator.value(uuid, k, pid)
		p.Simulator.mu.Unlock()
		if err != nil {
			return f() // not a setting this GPU has: the simulator says why
		}
		old = PersistedSetting{GPU: uuid, Knob: k, PID: pid, Initial: cur, Current: cur}
	}
	next := old
	next.Current = v
	p.set[key] = next
	if err := p.write(); err != nil {
		p.set[key] = old
		return fmt.Errorf("sim settings: %w", err)
	}
	if err := f(); err != nil {
		p.set[key] = old
		_ = p.write()
		return err
	}
	return nil
}

// write replaces the file (a temporary file renamed over it).
func (p *Persistent) write() error {
	set := make([]PersistedSetting, 0, len(p.set))
	for _, ps := range p.set {
		set = append(set, ps)
	}
	b, err := json.Marshal(set)
	if err != nil {
		return err
	}
	tmp := p.path + ".tmp"
	f, err := createTemp(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p.path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// createTemp creates tmp afresh. A regular file or symbolic link there (a
// crash between a write and its rename) is removed, the link not followed;
// anything else is refused, naming it: the open of a FIFO would block for
// good, holding the lock. The file is made with O_EXCL, so nothing put
// there meanwhile is opened either: a link or FIFO made between the check
// and the open fails it with EEXIST, not followed nor waited on (no
// O_NOFOLLOW, which Windows lacks, is needed).
func createTemp(tmp string) (*os.File, error) {
	fi, err := os.Lstat(tmp)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	case fi.Mode().IsRegular() || fi.Mode()&os.ModeSymlink != 0:
		if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%s is not a regular file (%s); refusing to write the settings through it", tmp, fileread.Kind(fi.Mode()))
	}
	return os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
}

// value reads a setting; s.mu is held.
func (s *Simulator) value(uuid string, k gpu.Knob, pid uint32) (SettingsValue, error) {
	g, err := s.gpuByUUID(uuid)
	if err != nil {
		return SettingsValue{}, err
	}
	switch k {
	case gpu.KnobMPSActiveThreads:
		t := s.tenantByPID(pid)
		if t == nil {
			return SettingsValue{}, fmt.Errorf("no process %d", pid)
		}
		return SettingsValue{Num: t.contextFraction()}, nil
	case gpu.KnobPowerLimit:
		return SettingsValue{Num: g.powerLimit}, nil
	case gpu.KnobLockedClocks:
		return SettingsValue{MinMHz: g.lockMin, MaxMHz: g.lockMax}, nil
	case gpu.KnobComputeTimeSlice:
		return SettingsValue{Text: string(g.level)}, nil
	}
	return SettingsValue{}, fmt.Errorf("knob %s is not kept", k)
}

// setValue sets a setting as the file holds it; s.mu is held. The file
// is outside input: a value is refused as the live setter refuses it,
// unless the GPU has it already (what a failed first change leaves in
// the file).
func (s *Simulator) setValue(uuid string, k gpu.Knob, pid uint32, v SettingsValue) error {
	g, err := s.gpuByUUID(uuid)
	if err != nil {
		return err
	}
	check := true
	if cur, err := s.value(uuid, k, pid); err == nil && cur == v {
		check = false
	}
	switch k {
	case gpu.KnobMPSActiveThreads:
		t := s.tenantByPID(pid)
		if t == nil {
			return fmt.Errorf("no process %d", pid)
		}
		// (the value alone: where the client runs, and whether its GPU
		// is in MPS mode, is run-time state the file does not keep: a
		// client moved to another GPU, or a GPU relaid out, is where the
		// scenario puts it at the next start)
		if check && !(v.Num > 0 && v.Num <= 1) {
			return fmt.Errorf("active-thread fraction %g outside (0, 1]", v.Num)
		}
		t.mpsPending = v.Num
	case gpu.KnobPowerLimit:
		if msg := g.m.powerProblem(v.Num); check && msg != "" {
			return errors.New(msg)
		}
		g.powerLimit = v.Num
	case gpu.KnobLockedClocks:
		if check {
			lo, hi := wholeMHz(v.MinMHz), wholeMHz(v.MaxMHz)
			if lo < 0 || hi < 0 {
				return fmt.Errorf("locked clocks [%g, %g] MHz: not whole MHz in [0, %d]", v.MinMHz, v.MaxMHz, uint32(math.MaxUint32))
			}
			if msg := g.m.lockProblem(uint32(lo), uint32(hi)); msg != "" {
				return errors.New(msg)
			}
		}
		g.lockMin, g.lockMax = v.MinMHz, v.MaxMHz
	case gpu.KnobComputeTimeSlice:
		d, ok := timeSliceLevels[gpu.TimeSliceLevel(v.Text)]
		if !ok {
			return fmt.Errorf("unknown time-slice level %q", v.Text)
		}
		// (a known level is taken whatever the GPU's mode: a GPU relaid
		// out from MIG under MPS to time-sliced instances took it, and is
		// back in the scenario's layout at the next start; the level does
		// nothing where the GPU's mode ignores it)
		g.level, g.slice = gpu.TimeSliceLevel(v.Text), int64(d)
	default:
		return fmt.Errorf("knob %s is not kept", k)
	}
	return nil
}

// wholeMHz is a clock in the file as a uint32's value, -1 where it is
// none (a fraction, out of range).
func wholeMHz(f float64) int64 {
	if !(f >= 0 && f <= math.MaxUint32) || f != math.Trunc(f) {
		return -1
	}
	return int64(f)
}

// SetMPSActiveThreads sets and keeps a client's fraction.
func (p *Persistent) SetMPSActiveThreads(ctx context.Context, uuid string, pid uint32, fraction float64) error {
	return p.change(uuid, gpu.KnobMPSActiveThreads, pid, SettingsValue{Num: fraction}, func() error {
		return p.Simulator.SetMPSActiveThreads(ctx, uuid, pid, fraction)
	})
}

// SetPowerLimit sets and keeps a power limit.
func (p *Persistent) SetPowerLimit(ctx context.Context, uuid string, watts float64) error {
	return p.change(uuid, gpu.KnobPowerLimit, 0, SettingsValue{Num: watts}, func() error {
		return p.Simulator.SetPowerLimit(ctx, uuid, watts)
	})
}

// LockClocks sets and keeps a locked SM clock range.
func (p *Persistent) LockClocks(ctx context.Context, uuid string, l gpu.ClockLock) error {
	return p.change(uuid, gpu.KnobLockedClocks, 0, SettingsValue{MinMHz: float64(l.MinMHz), MaxMHz: float64(l.MaxMHz)}, func() error {
		return p.Simulator.LockClocks(ctx, uuid, l)
	})
}

// SetComputeTimeSlice sets and keeps a time-slice level.
func (p *Persistent) SetComputeTimeSlice(ctx context.Context, uuid string, level gpu.TimeSliceLevel) error {
	return p.change(uuid, gpu.KnobComputeTimeSlice, 0, SettingsValue{Text: string(level)}, func() error {
		return p.Simulator.SetComputeTimeSlice(ctx, uuid, level)
	})
}

// maxHangBytes bounds the ".hang" file: a duration.
const maxHangBytes = 1 << 10

// RestartClient restarts a client, after the hang the ".hang" file asks
// for, if any. A ".hang" that is no regular file of at most maxHangBytes
// (a FIFO, whose read would block for good, whatever ctx), or that holds
// no duration of 0 or more, fails the restart, naming it: garbage there
// held the restart an hour, saying nothing.
func (p *Persistent) RestartClient(ctx context.Context, uuid string, pid uint32, tenant string) error {
	b, err := fileread.Regular(p.path+".hang", maxHangBytes)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("sim hang file: %w", err)
	default:
		v := strings.TrimSpace(string(b))
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("sim hang file %s: %q is not a duration such as 2s or 500ms (how long a client restart hangs)", p.path+".hang", v)
		}
		after := time.After
		if p.clock != nil {
			after = p.clock.After
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-after(d):
		}
	}
	return p.Simulator.RestartClient(ctx, uuid, pid, tenant)
}
