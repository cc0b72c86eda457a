// Package testutil builds the readings and fakes that tests of several
// packages share: processes and devices with the unknowns a backend
// reports, a sim:// application served from memory, and a buffer that
// concurrent loggers write to, a gatherer of collectors' families, the
// bytes a call allocates, a server of status lines too long, self-signed
// certificates and keys for TLS tests (SelfSignedPEM, WriteSelfSigned), a
// directory seen read-only (BindReadOnly), a file replaced as an operator
// should (ReplaceFile), the check of the User-Agent the exporter sends,
// and the check of a loop's cadence on a manual clock.
// Only test files import it.
package testutil

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Proc is a process outside MIG whose owner the backend does not know:
// UID, GPU instance and compute instance -1, as the backends report them.
func Proc(pid uint32, name string) gpu.Process {
	return gpu.Process{PID: pid, Name: name, UID: -1, GPUInstanceID: -1, ComputeInstanceID: -1}
}

// MIGProc is a process in GPU instance gi (compute instance 0) whose
// owner the backend does not know.
func MIGProc(pid uint32, name string, gi int) gpu.Process {
	return gpu.Process{PID: pid, Name: name, UID: -1, GPUInstanceID: gi}
}

// Device is an up GPU, not shared in any mode, running procs.
func Device(index int, uuid string, procs ...gpu.Process) gpu.Device {
	return gpu.Device{Index: index, UUID: uuid, Up: true, Processes: procs}
}

// FakeApp serves sim://APP expositions from memory: Body by application,
// or Err for every one.
type FakeApp struct {
	mu   sync.Mutex
	Body map[string][]byte
	Err  error
}

// AppMetrics writes app's exposition to w.
func (f *FakeApp) AppMetrics(app string, w io.Writer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return f.Err
	}
	b, ok := f.Body[app]
	if !ok {
		return errors.New("no such app")
	}
	_, err := w.Write(b)
	return err
}

// Set replaces app's exposition.
func (f *FakeApp) Set(app string, body []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Body[app] = body
}

// SetErr makes every application fail with err (nil: serve again).
func (f *FakeApp) SetErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Err = err
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers, such as a
// logger used by several goroutines while the test reads what it wrote.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Gather registers cs on a pedantic registry (which checks each metric
// against its description) and returns what it gathers by family name.
func Gather(t testing.TB, cs ...prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	r := prometheus.NewPedanticRegistry()
	r.MustRegister(cs...)
	mfs, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// Allocated returns the bytes f allocates: the heap's running total around
// the call, after a collection (what a test of a memory bound compares
// with the bound).
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// LongReasonServer serves every request an HTTP status line with code and
// a reason phrase of n bytes (what net/http's server cannot write) and
// returns its base URL; it stops when the test ends.
func LongReasonServer(t testing.TB, code, n int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = bufio.NewReader(c).ReadString('\n')
				_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", code, strings.Repeat("x", n))
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// BindReadOnly mounts dir read-only at a directory of its own, unmounted
// when the test ends (a file system remounted read-only, as a disk error
// does, with the same files seen writable through dir); it skips the test
// where it cannot mount (not root).
func BindReadOnly(t *testing.T, dir string) string {
	t.Helper()
	ro := t.TempDir()
	if err := syscall.Mount(dir, ro, "", syscall.MS_BIND, ""); err != nil {
		t.Skip("no bind mount (needs root): ", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(ro, syscall.MNT_DETACH) })
	if err := syscall.Mount("", ro, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	return ro
}

// ReplaceFile puts data at path as an operator should while a program
// watches it: written beside it, then renamed over it, so that a reader
// finds the old content or the new one, never a file cut short.
func ReplaceFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
