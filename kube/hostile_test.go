package kube_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-kit/log"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// switchKubelet answers as its mode says: 0 a good answer, 1 never (until
// the caller gives up), 2 an answer over the exporter's bound.
type switchKubelet struct {
	fakeKubelet
	mode atomic.Int32
}

func (s *switchKubelet) List(ctx context.Context, r *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	switch s.mode.Load() {
	case 1:
		<-ctx.Done()
		return nil, ctx.Err()
	case 2:
		// 17 MiB of device IDs: 17 Ki IDs of 1 KiB
		ids := make([]string, 17<<10)
		for i := range ids {
			ids[i] = "GPU-" + strings.Repeat("f", 1020)
		}
		return &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{pod("x", "huge", "c", "nvidia.com/gpu", ids...)}}, nil
	}
	return s.fakeKubelet.List(ctx, r)
}

// A kubelet that answers too late or too much fails the refresh within the
// timeout, and the last good mapping is kept.
func TestKubeletHostileAnswers(t *testing.T) {
	sk := &switchKubelet{}
	sk.set(pod("llm", "chat-0", "server", "nvidia.com/gpu", "GPU-a"))
	sock, _ := serveKubelet(t, sk)
	const timeout = 300 * time.Millisecond
	m, err := kube.NewMapper(kube.Options{PodResourcesSocket: sock, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	m.Refresh(context.Background())
	if st := m.Status(); !st.Up || st.PodsMapped != 1 {
		t.Fatalf("first refresh: %+v", st)
	}
	for i, tc := range []struct {
		name string
		mode int32
		want string
	}{
		{"never answers", 1, "DeadlineExceeded"},
		{"answers 17 MiB", 2, "ResourceExhausted"},
	} {
		sk.mode.Store(tc.mode)
		start := time.Now()
		m.Refresh(context.Background())
		took := time.Since(start)
		st := m.Status()
		if st.Up || st.ErrorsTotal != uint64(i+1) || st.PodsMapped != 1 || m.Mapping() == nil || m.Mapping().Pods() != 1 {
			t.Errorf("%s: %+v (the last good mapping of 1 pod kept)", tc.name, st)
		}
		if took > timeout+2*time.Second {
			t.Errorf("%s: the refresh took %v, past its timeout of %v", tc.name, took, timeout)
		}
	}
}

// A socket that speaks no gRPC (it answers garbage) fails the refresh
// within the timeout.
func TestKubeletGarbageSocket(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "kubelet.sock")
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	kube.ServeGarbage(lis, []byte("HTTP/1.1 200 OK\r\n\r\n"+strings.Repeat("\xff", 1<<16)))
	const timeout = 300 * time.Millisecond
	m, err := kube.NewMapper(kube.Options{PodResourcesSocket: socket, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	m.Refresh(context.Background())
	if took := time.Since(start); took > timeout+2*time.Second {
		t.Errorf("the refresh took %v, past its timeout of %v", took, timeout)
	}
	if st := m.Status(); st.Up || st.ErrorsTotal != 1 || m.Mapping() != nil {
		t.Errorf("%+v", st)
	}
}

// A pod-resources answer of more than 100,000 GPU device IDs, all
// containers together (under the 16 MiB message limit: 1.4 million short
// ones fit), is refused, naming the socket and the count, and the last
// good mapping is kept: each became a container's hold on a device of the
// mapping, hundreds of MiB allocated at every refresh. One at the limit is
// mapped, however many IDs of other devices (left out of the mapping) it
// has besides: a device plugin giving one per MiB of memory made three
// pods of 40,000 MiB refuse the node's answer, its GPU pods never mapped.
func TestKubeletAnswerPastDeviceIDLimit(t *testing.T) {
	const limit = 100_000
	idsOf := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%d", prefix, i)
		}
		return out
	}
	ids := func(n int) []string { return idsOf("GPU-x", n) }
	withOthers := pod("x", "p", "c", "nvidia.com/gpu", ids(limit)...)
	for i := range 3 {
		withOthers.Containers = append(withOthers.Containers, &podresourcesv1.ContainerResources{Name: fmt.Sprintf("m%d", i),
			Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "example.com/memory-mib", DeviceIds: idsOf(fmt.Sprintf("mib%d-", i), 40_000)}}})
	}
	claims := func(n int) []*podresourcesv1.DynamicResource {
		cr := make([]*podresourcesv1.ClaimResource, n)
		for i := range cr {
			// a device and a CDI device: two device IDs
			cr[i] = &podresourcesv1.ClaimResource{DeviceName: fmt.Sprintf("MIG-x%d", i), CdiDevices: []*podresourcesv1.CDIDevice{{Name: fmt.Sprintf("k8s.gpu.example.com/gpu=MIG-x%d", i)}}}
		}
		return []*podresourcesv1.DynamicResource{{ClaimName: "gpu", ClaimResources: cr}}
	}
	withClaims := pod("x", "p", "c", "nvidia.com/gpu", ids(limit/2)...)
	withClaims.Containers = append(withClaims.Containers, &podresourcesv1.ContainerResources{Name: "d", DynamicResources: claims(limit/4 + 1)})
	for _, tc := range []struct {
		name    string
		answer  *podresourcesv1.PodResources
		refused string // the count the error names; "" for mapped
	}{
		{"at the limit", pod("x", "p", "c", "nvidia.com/gpu", ids(limit)...), ""},
		{"at the limit, with 120,000 IDs of other devices", withOthers, ""},
		{"one past it", pod("x", "p", "c", "nvidia.com/gpu", ids(limit+1)...), "100001"},
		{"past it with dynamic resources", withClaims, "100002"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fk := &fakeKubelet{}
			fk.set(pod("llm", "chat-0", "server", "nvidia.com/gpu", "GPU-a"))
			sock, _ := serveKubelet(t, fk)
			var logs bytes.Buffer
			m, err := kube.NewMapper(kube.Options{PodResourcesSocket: sock, Timeout: 20 * time.Second,
				Logger: log.NewLogfmtLogger(log.NewSyncWriter(&logs))})
			if err != nil {
				t.Fatal(err)
			}
			m.Refresh(context.Background())
			fk.set(tc.answer)
			m.Refresh(context.Background())
			st := m.Status()
			if tc.refused == "" {
				if !st.Up || st.ErrorsTotal != 0 || len(m.Mapping().PodsOn("GPU-x0")) != 1 {
					t.Errorf("%+v, GPU-x0 held by %v: want the answer mapped", st, m.Mapping().PodsOn("GPU-x0"))
				}
				return
			}
			if st.Up || st.ErrorsTotal != 1 || st.PodsMapped != 1 || len(m.Mapping().PodsOn("GPU-a")) != 1 {
				t.Errorf("%+v, GPU-a held by %v: want the answer refused, the last good mapping (chat-0) kept", st, m.Mapping().PodsOn("GPU-a"))
			}
			if l := logs.String(); !strings.Contains(l, sock) || !strings.Contains(l, tc.refused+" GPU device IDs, more than 100000") {
				t.Errorf("the refusal is not logged naming the socket and %s GPU device IDs:\n%.1000s", tc.refused, l)
			}
		})
	}
}
