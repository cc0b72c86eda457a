package kube_test

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// A kubelet socket that fails for a while is tried again at least every
// refresh interval or so, and used as soon as it serves: gRPC's default
// backoff grows to two minutes (1 s, 1.6 s, 2.56 s, ...), which kept the
// mapping down that long after a long outage. The socket here accepts
// connections and closes them at once, as a kubelet that is restarting.
func TestKubeletReconnectsWithinRefresh(t *testing.T) {
	const (
		refresh = 200 * time.Millisecond
		failFor = 3500 * time.Millisecond // gRPC's default: attempts at about 0, 1 and 2.6 s
		maxGap  = time.Second             // between two attempts; generous for a busy machine
	)
	socket := filepath.Join(t.TempDir(), "kubelet.sock")
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var attempts []time.Time
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			attempts = append(attempts, time.Now())
			mu.Unlock()
			c.Close()
		}
	}()
	m, err := kube.NewMapper(kube.Options{PodResourcesSocket: socket, Refresh: refresh, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); m.Wait() }()
	m.Start(ctx)
	time.Sleep(failFor)
	lis.Close() // (removes the socket)

	mu.Lock()
	got := append([]time.Time(nil), attempts...)
	mu.Unlock()
	if len(got) < 2 {
		t.Fatalf("%d connection attempts in %v", len(got), failFor)
	}
	for i := 1; i < len(got); i++ {
		if gap := got[i].Sub(got[i-1]); gap > maxGap {
			t.Errorf("attempt %d came %v after the one before, want at most %v (refresh %v)", i+1, gap.Round(time.Millisecond), maxGap, refresh)
		}
	}

	fk := &fakeKubelet{}
	fk.set(pod("llm", "chat-0", "server", "nvidia.com/gpu", "GPU-a"))
	lis2, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, fk)
	go func() { _ = srv.Serve(lis2) }()
	defer srv.Stop()
	served := time.Now()
	for !m.Status().Up {
		if time.Since(served) > 10*time.Second {
			t.Fatalf("still down 10s after the socket serves: %+v", m.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if took := time.Since(served); took > 2*maxGap {
		t.Errorf("up %v after the socket serves, want at most %v", took.Round(time.Millisecond), 2*maxGap)
	}
}
