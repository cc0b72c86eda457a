package tenant

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// fixture is a latency exposition from the latency package's test data.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "latency", "testdata", "latency", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeProc is the process facts of a few PIDs; the others have none.
type fakeProc map[uint32]struct {
	cgroup, comm string
	uid          int
}

// Cgroup is the process's cgroup path, its file a v2 host's.
func (f fakeProc) Cgroup(pid uint32) (kube.ProcCgroup, error) {
	p, ok := f[pid]
	if !ok {
		return kube.ProcCgroup{}, fmt.Errorf("no such process: %w", fs.ErrNotExist)
	}
	return kube.ReadProcCgroup([]byte("0::"+p.cgroup+"\n"), nil)
}

func (f fakeProc) Comm(pid uint32) string { return f[pid].comm }

func (f fakeProc) UID(pid uint32) int {
	if p, ok := f[pid]; ok {
		return p.uid
	}
	return -1
}

// loopPods is a PodMapper whose Start runs one goroutine until the context
// ends; the mapping is up once that goroutine ran. It has no pods.
type loopPods struct {
	mu    sync.Mutex
	up    bool
	loops sync.WaitGroup
}

func (p *loopPods) Start(ctx context.Context) {
	p.loops.Go(func() {
		p.mu.Lock()
		p.up = true
		p.mu.Unlock()
		<-ctx.Done()
	})
}

func (p *loopPods) Wait()                   { p.loops.Wait() }
func (p *loopPods) Refresh(context.Context) {}
func (p *loopPods) Mapping() *kube.Mapping  { return nil }

func (p *loopPods) Status() kube.Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return kube.Status{Up: p.up}
}

// fixedPods is a PodMapper with one fixed mapping.
type fixedPods struct{ m *kube.Mapping }

func (p fixedPods) Start(context.Context)   {}
func (p fixedPods) Wait()                   {}
func (p fixedPods) Refresh(context.Context) {}
func (p fixedPods) Mapping() *kube.Mapping  { return p.m }
func (p fixedPods) Status() kube.Status     { return kube.Status{Up: true} }

// fileBuilder writes yaml to a tenants file in a temporary directory and
// returns a Builder loaded from it, and the file, for reloads.
func fileBuilder(t testing.TB, yaml string, opts BuilderOptions) (*Builder, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBuilder(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return b, file
}
