package kube_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/metadata"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// The pod metadata's request names the exporter and, where the build set
// it, its version, as the latency scrapes do. Before, it named the
// exporter only, whatever its version.
func TestPodMetadataUserAgent(t *testing.T) {
	h, last := testutil.KeepHeaders(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(podListJSON))
	})
	hs := httptest.NewServer(h)
	defer hs.Close()
	testutil.CheckUserAgent(t, func(version string) http.Header {
		fk := &fakeKubelet{}
		fk.set(pod("llm", "search-0", "triton", "nvidia.com/gpu", "GPU-b"))
		socket, _ := serveKubelet(t, fk)
		cfg, err := tenant.ParseConfig("k.yaml", []byte(kubeTenants))
		if err != nil {
			t.Fatal(err)
		}
		b, m := newBuilder(t, cfg, "", kube.Options{PodResourcesSocket: socket, PodMetadata: hs.URL + "/pods"})
		b.Refresh(context.Background())
		if st := m.Status(); !st.Metadata.Up {
			t.Fatalf("version %q: pod metadata not read: %+v", version, st)
		}
		return last()
	})
}

// uaKubelet is a fake kubelet that keeps the user-agent of its List calls.
type uaKubelet struct {
	fakeKubelet
	mu sync.Mutex
	ua []string
}

func (f *uaKubelet) List(ctx context.Context, r *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	f.ua = append(f.ua, md.Get("user-agent")...)
	f.mu.Unlock()
	return f.fakeKubelet.List(ctx, r)
}

// The pod-resources calls name the exporter too, as its HTTP requests
// do (before, gRPC's own "grpc-go/..." alone: the kubelet's logs could
// not tell the exporter's calls from another agent's).
func TestPodResourcesUserAgent(t *testing.T) {
	fk := &uaKubelet{}
	fk.set(pod("llm", "search-0", "triton", "nvidia.com/gpu", "GPU-b"))
	socket, _ := serveKubelet(t, fk)
	cfg, err := tenant.ParseConfig("k.yaml", []byte(kubeTenants))
	if err != nil {
		t.Fatal(err)
	}
	b, m := newBuilder(t, cfg, "", kube.Options{PodResourcesSocket: socket})
	b.Refresh(context.Background())
	if st := m.Status(); !st.Up {
		t.Fatalf("pod resources not read: %+v", st)
	}
	fk.mu.Lock()
	defer fk.mu.Unlock()
	if len(fk.ua) == 0 || !strings.HasPrefix(fk.ua[0], kube.UserAgent()+" ") || !strings.HasPrefix(kube.UserAgent(), "vgpu_exporter") {
		t.Errorf("pod-resources user-agent %q, want it to start with %q", fk.ua, kube.UserAgent())
	}
}
