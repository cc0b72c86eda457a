// Package mps drives the CUDA MPS control daemon: active-thread percentages
// and pinned device memory limits of MPS servers and clients, through the
// daemon's client program (nvidia-cuda-mps-control, commands written on its
// stdin), and the restart of a client through a hook command so that a new
// setting takes effect.
//
// MPS fixes a client's active-thread percentage when the client creates its
// context: a change to a server (set_active_thread_percentage) or to the
// default (set_default_active_thread_percentage) reaches only clients
// created afterwards, and a running client's percentage cannot be edited.
// The Controller therefore keeps, per client, the pending value (set, for
// its next context) apart from the effective one (its running context's),
// and moves pending to effective only when a restart hook reports success
// (State, States).
//
// Controller implements gpu.MPSActuator, gpu.CapabilityLister and
// gpu.ProcessStarter.
package mps

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command"
	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
)

// Defaults.
const (
	DefaultControlBinary  = "nvidia-cuda-mps-control"
	DefaultPipeDirectory  = "/tmp/nvidia-mps" // the daemon's own default; the Kubernetes device plugin's is /run/nvidia/mps/RESOURCE/pipe
	DefaultTimeout        = 5 * time.Second
	DefaultRestartTimeout = 2 * time.Minute
)

// Options configure a Controller.
type Options struct {
	// ControlBinary is the daemon's client program: a path, or a name
	// looked up on PATH. Default DefaultControlBinary.
	ControlBinary string
	// PipeDirectory is the daemon's CUDA_MPS_PIPE_DIRECTORY. Default
	// DefaultPipeDirectory.
	PipeDirectory string
	// Timeout bounds one daemon command. Default DefaultTimeout.
	Timeout time.Duration
	// TimeoutName is what sets Timeout (the command line's flag), named in
	// the error of a command it kills; "" names none.
	TimeoutName string
	// RestartHook is the program RestartClient runs (see RestartClient for
	// its arguments and environment); empty: restarts are not supported.
	RestartHook string
	// RestartTimeout bounds one run of the hook. Default DefaultRestartTimeout.
	RestartTimeout time.Duration
	// RestartTimeoutName is what sets RestartTimeout, as TimeoutName.
	RestartTimeoutName string
	// DeviceIndex maps a GPU UUID to the device ordinal the daemon uses in
	// pinned memory limits (CUDA's enumeration as the daemon sees it); nil,
	// or false for a GPU: pinned memory limits are not supported there.
	DeviceIndex func(uuid string) (int, bool)
	// Processes tells a client from a later process of its PID
	// (ProcessStarts: the host's procfs); nil: it is not told.
	Processes gpu.ProcessStarter
	Clock     gpu.Clock  // default gpu.RealClock
	Logger    log.Logger // default a no-op logger
}

// Role is what a PID is to the daemon.
type Role string

// Roles.
const (
	RoleServer Role = "server" // an nvidia-cuda-mps-server
	RoleClient Role = "client" // a CUDA process connected to a server
)

// ClientState is what the Controller knows of one MPS server or client.
type ClientState struct {
	UUID      string
	PID       uint32
	Role      Role
	ServerPID uint32 // the client's server (the PID itself for a server)
	// Pending is the active-thread fraction set for the next context and
	// not yet in effect; nil when nothing is pending.
	Pending *float64
	// Effective is the fraction the running context has, when known: after
	// a successful restart, or for a server the value the daemon reported
	// for the clients it starts from now on. nil when unknown.
	Effective *float64
	// Server is a client's server's fraction as last read, when a value
	// was set for the client or its server, or read again to hold a
	// fraction back (HeldFraction); nil when not read. ServerRead is when.
	Server     *float64
	ServerRead time.Time
	// PendingPinnedBytes is a pinned device memory limit waiting for the
	// client's restart; nil when none.
	PendingPinnedBytes *uint64
	// Changed is when Pending or Effective last changed.
	Changed time.Time
}

// Controller drives one MPS control daemon (one pipe directory). It is safe
// for concurrent use; daemon commands run one at a time.
type Controller struct {
	opts   Options
	logger log.Logger
	clock  gpu.Clock

	opMu sync.Mutex // serializes the daemon commands (not the restart hooks)
	// setStderr bounds the warnings of set commands that printed on stderr
	setStderr *ratelog.Keyed

	mu     sync.Mutex // guards the fields below
	states map[key]*ClientState
	seen   map[key]time.Time // when the readings last listed a client
	// succ are the successors the restart hook named, by the client it
	// restarted, kept for forgetAfter (Successor)
	succ map[key]succession
	// index is each GPU's ordinal, by UUID, as the readings last said;
	// restarting are the clients whose restart hook runs (never forgotten).
	index      map[string]int
	restarting map[key]int
}

type key struct {
	uuid string
	pid  uint32
}

// succession is the PID a client went on under after a restart, and when.
type succession struct {
	pid uint32
	at  time.Time
}

var (
	_ gpu.MPSActuator      = (*Controller)(nil)
	_ gpu.MPSSuccessors    = (*Controller)(nil)
	_ gpu.CapabilityLister = (*Controller)(nil)
	_ gpu.KnobWithholder   = (*Controller)(nil)
)

// New returns a Controller without checking that the daemon runs (see
// Detect).
func New(opts Options) *Controller {
	if opts.ControlBinary == "" {
		opts.ControlBinary = DefaultControlBinary
	}
	if opts.PipeDirectory == "" {
		opts.PipeDirectory = DefaultPipeDirectory
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.RestartTimeout <= 0 {
		opts.RestartTimeout = DefaultRestartTimeout
	}
	c := &Controller{opts: opts, logger: opts.Logger, clock: opts.Clock, setStderr: ratelog.NewKeyed(setStderrLogEvery, setStderrTexts),
		states: map[key]*ClientState{}, seen: map[key]time.Time{}, restarting: map[key]int{}}
	if c.logger == nil {
		c.logger = log.NewNopLogger()
	}
	if c.clock == nil {
		c.clock = gpu.RealClock{}
	}
	return c
}

// Detect returns a Controller when this host runs an MPS control daemon on
// opts.PipeDirectory: the control binary exists, the pipe directory exists
// and is root's or the exporter's alone (checkPipeDirectory, also checked
// before each command), and the daemon answers
// get_default_active_thread_percentage. The error says which of these
// failed and what to do. A restart hook that is not found or not
// executable is logged as a warning.
func Detect(ctx context.Context, opts Options) (*Controller, error) {
	c := New(opts)
	if _, err := exec.LookPath(c.opts.ControlBinary); err != nil {
		return nil, fmt.Errorf("MPS control binary %q not found (install the CUDA MPS tools or set --mps.control-binary): %w", c.opts.ControlBinary, err)
	}
	if err := checkPipeDirectory(c.opts.PipeDirectory, os.Geteuid()); err != nil {
		return nil, err
	}
	c.opMu.Lock()
	defer c.opMu.Unlock()
	if _, err := c.defaultPercentage(ctx); err != nil {
		return nil, fmt.Errorf("MPS control daemon on %s not answering: %w", c.opts.PipeDirectory, err)
	}
	// A hook that cannot be run fails every restart: said at start, not at
	// the first cap. It is still tried (it may be installed later).
	if h := c.opts.RestartHook; h != "" {
		if _, err := exec.LookPath(h); err != nil {
			level.Warn(c.logger).Log("msg", "MPS restart hook not found or not executable (--mps.restart-hook): every client restart will fail until it is", "hook", h, "err", err)
		}
	}
	return c, nil
}

// Capabilities lists the MPS knobs: active threads on every GPU, pinned
// memory where DeviceIndex knows the GPU's ordinal.
func (c *Controller) Capabilities(uuid string) []gpu.Knob {
	knobs := []gpu.Knob{gpu.KnobMPSActiveThreads}
	if _, ok := c.deviceIndex(uuid); ok {
		knobs = append(knobs, gpu.KnobMPSPinnedMemory)
	}
	return knobs
}

// SetMPSActiveThreads sets the active-thread fraction (0-1], rounded to a
// whole percentage, for the MPS server or client with this PID:
//
//   - for a server, set_active_thread_percentage: the clients it creates
//     from now on get it, so each of its current clients becomes pending;
//   - for a client, nothing is sent to the daemon (a running client cannot
//     be changed): the fraction is pending until RestartClient starts its
//     successor with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE. Without a restart
//     hook nothing does (Withheld): a client that restarts by itself
//     gets its server's value, not this one. A client's value can
//     only lower its server's, so a fraction at or above the server's is
//     the server's: the successor is started with the server's value,
//     which lowers nothing under that server (so 1, a client nobody
//     capped, sets a client back where its server runs below 100%). A
//     server's value reaches only the clients created after it is set:
//     neither the original client nor such a successor gains from a later
//     raise of it.
func (c *Controller) SetMPSActiveThreads(ctx context.Context, uuid string, pid uint32, fraction float64) error {
	pct, err := percentage(fraction)
	if err != nil {
		return err
	}
	c.opMu.Lock()
	defer c.opMu.Unlock()
	role, server, clients, err := c.resolve(ctx, pid)
	if err != nil {
		return err
	}
	f := float64(pct) / 100
	if role == RoleServer {
		if _, err := c.send(ctx, fmt.Sprintf("set_active_thread_percentage %d %d", pid, pct)); err != nil {
			return err
		}
		// The daemon may answer nothing and change nothing: the value is
		// read back, and must be the one set.
		got, err := c.serverPercentage(ctx, pid)
		if err != nil {
			return fmt.Errorf("MPS server %d on GPU %s: active threads set to %d%%, but reading it back failed: %w", pid, uuid, pct, err)
		}
		if math.Abs(got-float64(pct)) > 0.5 {
			return fmt.Errorf("MPS server %d on GPU %s: active threads set to %d%% through %s, but get_active_thread_percentage reads %g%%", pid, uuid, pct, c.opts.ControlBinary, got)
		}
		eff := got / 100
		c.update(uuid, pid, RoleServer, pid, func(s *ClientState) { s.Effective, s.Pending = &eff, nil })
		now := c.clock.Now()
		for _, cl := range clients {
			c.update(uuid, cl, RoleClient, pid, func(s *ClientState) { s.Pending, s.Server, s.ServerRead = &f, &eff, now })
		}
		level.Info(c.logger).Log("msg", "MPS server active threads set; its clients get it when they restart", "uuid", uuid, "server_pid", pid, "percentage", pct, "clients_pending", len(clients))
		return nil
	}
	var limit *float64
	if got, err := c.serverPercentage(ctx, server); err == nil {
		l := got / 100
		limit = &l
		if float64(pct) > got-1e-9 {
			f = l
			level.Info(c.logger).Log("msg", "MPS client active threads at or above its server's: the client takes its server's value at its restart", "uuid", uuid, "pid", pid, "server_pid", server, "percentage", pct, "server_percentage", got)
		}
	}
	now := c.clock.Now()
	c.update(uuid, pid, RoleClient, server, func(s *ClientState) {
		s.Pending = &f
		if limit != nil {
			s.Server, s.ServerRead = limit, now
		}
	})
	level.Info(c.logger).Log("msg", "MPS client active threads pending until its restart", "uuid", uuid, "pid", pid, "percentage", pct)
	return nil
}

// SetMPSPinnedMemoryLimit limits the device memory a server's clients (or
// one client) may pin on the GPU, in whole MiB rounded down (at least
// 1 MiB): for a server, set_device_pinned_mem_limit; for a client, pending
// until RestartClient starts its successor with
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT.
func (c *Controller) SetMPSPinnedMemoryLimit(ctx context.Context, uuid string, pid uint32, bytes uint64) error {
	dev, ok := c.deviceIndex(uuid)
	if !ok {
		return fmt.Errorf("MPS pinned memory limit on GPU %s: its device ordinal is not known: %w", uuid, gpu.ErrNotSupported)
	}
	if bytes < 1<<20 {
		return fmt.Errorf("MPS pinned memory limit %d bytes on GPU %s: must be at least 1 MiB", bytes, uuid)
	}
	c.opMu.Lock()
	defer c.opMu.Unlock()
	role, server, _, err := c.resolve(ctx, pid)
	if err != nil {
		return err
	}
	if role == RoleServer {
		_, err := c.send(ctx, fmt.Sprintf("set_device_pinned_mem_limit %d %d %dM", pid, dev, bytes>>20))
		return err
	}
	b := bytes
	c.update(uuid, pid, RoleClient, server, func(s *ClientState) { s.PendingPinnedBytes = &b })
	return nil
}

// RestartClient runs the restart hook for the MPS client with this PID, so
// that a serving stack starts a successor (or switches over to a standby)
// with the pending setting, and stops the old one. The hook is run as
//
//	HOOK TENANT PID GPU_UUID FRACTION
//
// (FRACTION: the pending active-thread fraction such as 0.45, else the
// effective one, else empty) with these variables added to the exporter's
// environment: VGPU_TENANT, VGPU_PID, VGPU_GPU_UUID,
// VGPU_MPS_ACTIVE_THREAD_FRACTION (as FRACTION), CUDA_MPS_PIPE_DIRECTORY,
// and, when there is a value to start the successor with,
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
// (as DEV=NM). Exit status 0 is success; the hook may name the
// successor with a last line of stdout "pid=1234" (see successorPID). On
// success what the successor started with becomes effective (under its
// PID when printed), a value set while the hook ran staying pending; on
// failure the values stay pending, the error has the hook's exit and stderr.
func (c *Controller) RestartClient(ctx context.Context, uuid string, pid uint32, tenant string) error {
	if c.opts.RestartHook == "" {
		return fmt.Errorf("restart of MPS client %d on GPU %s: no restart hook configured (--mps.restart-hook): %w", pid, uuid, gpu.ErrNotSupported)
	}
	// The hook runs outside the daemon's command lock: a restart may take
	// minutes, and the other clients' settings do not wait for it; the
	// client is not forgotten meanwhile (ObserveReadings), though the
	// hook may stop it long before it ends.
	st, _ := c.State(uuid, pid)
	c.mu.Lock()
	c.restarting[key{uuid, pid}]++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.restarting[key{uuid, pid}]--; c.restarting[key{uuid, pid}] <= 0 {
			delete(c.restarting, key{uuid, pid})
		}
	}()
	frac := st.Pending
	if frac == nil {
		frac = st.Effective
	}
	fs := ""
	env := []string{
		"VGPU_TENANT=" + tenant,
		"VGPU_PID=" + strconv.FormatUint(uint64(pid), 10),
		"VGPU_GPU_UUID=" + uuid,
		"CUDA_MPS_PIPE_DIRECTORY=" + c.opts.PipeDirectory,
	}
	if frac != nil {
		fs = strconv.FormatFloat(*frac, 'f', -1, 64)
		env = append(env, fmt.Sprintf("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%.0f", *frac*100))
	}
	env = append(env, "VGPU_MPS_ACTIVE_THREAD_FRACTION="+fs)
	if st.PendingPinnedBytes != nil {
		if dev, ok := c.deviceIndex(uuid); ok {
			env = append(env, fmt.Sprintf("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%d=%dM", dev, *st.PendingPinnedBytes>>20))
		}
	}
	res, err := command.Run(ctx, command.Spec{
		Path:        c.opts.RestartHook,
		Args:        []string{tenant, strconv.FormatUint(uint64(pid), 10), uuid, fs},
		Env:         env,
		Timeout:     c.opts.RestartTimeout,
		TimeoutName: c.opts.RestartTimeoutName,
	})
	if err != nil {
		return fmt.Errorf("restart hook for MPS client %d (tenant %q) on GPU %s: %w", pid, tenant, uuid, err)
	}
	newPID, hasNew := successorPID(res.Stdout)
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.states[key{uuid, pid}]
	if s == nil {
		s = &ClientState{UUID: uuid, PID: pid, Role: RoleClient}
	}
	// a value set while the hook ran stays pending, for the next restart
	if frac != nil {
		f := *frac
		s.Effective = &f
	}
	if s.Pending != nil && st.Pending != nil && *s.Pending == *st.Pending {
		s.Pending = nil
	}
	if s.PendingPinnedBytes != nil && st.PendingPinnedBytes != nil && *s.PendingPinnedBytes == *st.PendingPinnedBytes {
		s.PendingPinnedBytes = nil
	}
	s.Changed = c.clock.Now()
	if hasNew && newPID != pid {
		delete(c.states, key{uuid, pid})
		delete(c.seen, key{uuid, pid})
		s.PID = newPID
		c.noteSuccessor(key{uuid, pid}, newPID)
	}
	c.states[key{uuid, s.PID}] = s
	kv := []any{"msg", "MPS client restarted by the hook", "uuid", uuid, "tenant", tenant, "pid", pid, "new_pid", s.PID, "fraction", fs}
	level.Info(c.logger).Log(append(kv, command.OutputKV(res, 512)...)...)
	return nil
}

// noteSuccessor records the successor of the client k, and forgets those
// older than forgetAfter.
func (c *Controller) noteSuccessor(k key, pid uint32) {
	now := c.clock.Now()
	for old, s := range c.succ {
		if now.Sub(s.at) >= forgetAfter {
			delete(c.succ, old)
		}
	}
	if c.succ == nil {
		c.succ = map[key]succession{}
	}
	c.succ[k] = succession{pid: pid, at: now}
}

// Successor implements gpu.MPSSuccessors: the PID the hook named for the
// client's successor at its last restart (within forgetAfter).
func (c *Controller) Successor(uuid string, pid uint32) (uint32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.succ[key{uuid, pid}]
	return s.pid, ok
}

// State returns what the Controller knows of the server or client with
// this PID on the GPU (false when nothing was set for it).
func (c *Controller) State(uuid string, pid uint32) (ClientState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.states[key{uuid, pid}]
	if !ok {
		return ClientState{}, false
	}
	return *s, true
}

// States returns every server and client the Controller knows, by GPU UUID
// and PID.
func (c *Controller) States() []ClientState {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ClientState, 0, len(c.states))
	for _, s := range c.states {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b ClientState) int {
		if r := strings.Compare(a.UUID, b.UUID); r != 0 {
			return r
		}
		return cmp.Compare(a.PID, b.PID)
	})
	return out
}

// Observe records the effective fraction of a process's running context as
// read elsewhere (gpu.Process.MPSActiveThreads); a pending value equal to it
// is no longer pending.
func (c *Controller) Observe(uuid string, pid uint32, effective float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.states[key{uuid, pid}]
	if s == nil {
		s = &ClientState{UUID: uuid, PID: pid, Role: RoleClient}
		c.states[key{uuid, pid}] = s
	}
	e := effective
	s.Effective = &e
	if s.Pending != nil && math.Abs(*s.Pending-e) < 0.005 {
		s.Pending = nil
	}
	s.Changed = c.clock.Now()
}

// ObserveReadings takes what a sample says of MPS: the effective fraction
// of every process's running context (Observe) and each GPU's ordinal (for
// pinned memory limits, where Options.DeviceIndex is nil). A client of a
// GPU the sample read that has not been among its processes for
// forgetAfter is dropped, with anything pending for it: it has exited (a
// restart through the hook moves the state to the successor's PID first),
// and a long-running exporter must not keep every PID it ever saw.
// Subscribe it to the sampler (gpu.Sampler.Subscribe).
func (c *Controller) ObserveReadings(r *gpu.Readings) {
	if r == nil {
		return
	}
	idx := make(map[string]int, len(r.Devices))
	running := map[key]bool{}
	read := map[string]bool{}
	for _, d := range r.Devices {
		idx[d.UUID] = d.Index
		if d.Up {
			read[d.UUID] = true
		}
		for _, p := range d.Processes {
			running[key{d.UUID, p.PID}] = true
			if p.MPSActiveThreads != nil {
				c.Observe(d.UUID, p.PID, *p.MPSActiveThreads)
			}
		}
	}
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.index = idx
	for k, s := range c.states {
		switch {
		case s.Role != RoleClient || !read[k.uuid]:
		case running[k]:
			c.seen[k] = now
		case c.restarting[k] > 0:
		case now.Sub(c.lastSeen(k, s)) >= forgetAfter:
			delete(c.states, k)
			delete(c.seen, k)
		}
	}
}

// forgetAfter is how long a client may be missing from the readings of
// its GPU before the Controller forgets it: several samples, so that a
// cap set on a process the sample has not listed yet is kept.
const forgetAfter = time.Minute

// lastSeen is when the readings last listed k's process, or when its
// state last changed where they never have. c.mu is held.
func (c *Controller) lastSeen(k key, s *ClientState) time.Time {
	if t, ok := c.seen[k]; ok && t.After(s.Changed) {
		return t
	}
	return s.Changed
}

// ClientStates returns the pending and effective fractions of every client
// the Controller knows, by GPU UUID and PID.
func (c *Controller) ClientStates() []gpu.MPSClientState {
	var out []gpu.MPSClientState
	for _, s := range c.States() {
		if s.Role == RoleClient {
			out = append(out, gpu.MPSClientState{UUID: s.UUID, PID: s.PID, Pending: s.Pending, Effective: s.Effective})
		}
	}
	return out
}

func (c *Controller) update(uuid string, pid uint32, role Role, server uint32, f func(*ClientState)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.states[key{uuid, pid}]
	if s == nil {
		s = &ClientState{UUID: uuid, PID: pid}
		c.states[key{uuid, pid}] = s
	}
	s.Role, s.ServerPID = role, server
	f(s)
	s.Changed = c.clock.Now()
}

func (c *Controller) deviceIndex(uuid string) (int, bool) {
	if c.opts.DeviceIndex == nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		i, ok := c.index[uuid]
		return i, ok
	}
	i, ok := c.opts.DeviceIndex(uuid)
	return i, ok && i >= 0
}

// resolve says whether pid is a server or a client of the daemon, and
// returns the client's server, or the server's clients.
func (c *Controller) resolve(ctx context.Context, pid uint32) (Role, uint32, []uint32, error) {
	out, err := c.send(ctx, "get_server_list")
	if err != nil {
		return "", 0, nil, err
	}
	servers, err := parsePIDs(out)
	if err != nil {
		return "", 0, nil, fmt.Errorf("MPS get_server_list: %w", err)
	}
	// Each server listed costs a run of the control program (under the
	// controller's lock): a list longer than a daemon keeps is refused,
	// and a server listed twice is asked once.
	seen := make(map[uint32]bool, len(servers))
	servers = slices.DeleteFunc(servers, func(s uint32) bool {
		dup := seen[s]
		seen[s] = true
		return dup
	})
	if len(servers) > maxServers {
		return "", 0, nil, fmt.Errorf("MPS get_server_list: %w: %d servers listed, more than the %d a daemon runs", errReply, len(servers), maxServers)
	}
	for _, s := range servers {
		out, err := c.send(ctx, fmt.Sprintf("get_client_list %d", s))
		if err != nil {
			return "", 0, nil, err
		}
		clients, err := parsePIDs(out)
		if err != nil {
			return "", 0, nil, fmt.Errorf("MPS get_client_list %d: %w", s, err)
		}
		if s == pid {
			return RoleServer, s, clients, nil
		}
		if slices.Contains(clients, pid) {
			return RoleClient, s, nil, nil
		}
	}
	return "", 0, nil, fmt.Errorf("PID %d is neither an MPS server nor an MPS client of the daemon on %s (servers: %v)", pid, c.opts.PipeDirectory, servers)
}

// maxServers bounds the MPS servers a daemon's get_server_list may name:
// a daemon runs one per user (and device set) at a time, a handful.
const maxServers = 64

func (c *Controller) defaultPercentage(ctx context.Context) (float64, error) {
	out, err := c.send(ctx, "get_default_active_thread_percentage")
	if err != nil {
		return 0, err
	}
	p, err := parsePercentage(out)
	if err != nil {
		return 0, fmt.Errorf("MPS get_default_active_thread_percentage: %w", err)
	}
	return p, nil
}

func (c *Controller) serverPercentage(ctx context.Context, pid uint32) (float64, error) {
	out, err := c.send(ctx, fmt.Sprintf("get_active_thread_percentage %d", pid))
	if err != nil {
		return 0, err
	}
	return parsePercentage(out)
}

// send runs one daemon command and returns its reply. A reply that says
// the command failed is an error even when the program exits with 0.
// What a set command that exited 0 printed on stderr is logged at warning
// (each text at most once per setStderrLogEvery, so that a harmless
// warning printed on every command does not hold back another): it may be
// a refusal, but harmless warnings (a preloaded library's) are printed
// there too, so it fails nothing.
func (c *Controller) send(ctx context.Context, cmd string) (string, error) {
	// checked at each command: the directory may have been made again since
	if err := checkPipeDirectory(c.opts.PipeDirectory, os.Geteuid()); err != nil {
		return "", fmt.Errorf("MPS command %q: %w", cmd, err)
	}
	res, err := command.Run(ctx, command.Spec{
		Path:        c.opts.ControlBinary,
		Env:         []string{"CUDA_MPS_PIPE_DIRECTORY=" + c.opts.PipeDirectory},
		Stdin:       []byte(cmd + "\n"),
		Timeout:     c.opts.Timeout,
		TimeoutName: c.opts.TimeoutName,
	})
	if err != nil {
		return "", fmt.Errorf("MPS command %q: %w", cmd, err)
	}
	out := string(res.Stdout)
	if refused(out) {
		return "", fmt.Errorf("MPS command %q refused by the daemon: %s", cmd, command.Excerpt(res.Stdout, 256))
	}
	if said := command.Excerpt(res.Stderr, 256); strings.HasPrefix(cmd, "set_") && said != "" {
		if held, ok := c.setStderr.NoteAt(said, c.clock.Now()); ok {
			level.Warn(c.logger).Log("msg", "MPS control program exited 0 for a set command but printed on stderr; the value is taken as set (each text logged at most once per minute)",
				"command", cmd, "stderr", said, "not_logged", held)
		}
	}
	return out, nil
}

// setStderrLogEvery is how often a set command's stderr may be logged,
// each of at most setStderrTexts texts apart (and that many lines in all).
const (
	setStderrLogEvery = time.Minute
	setStderrTexts    = 16
)
