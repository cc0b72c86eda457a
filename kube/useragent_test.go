package kube_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/prometheus/common/version"

	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// The pod metadata's request names the exporter and, where the build set
// it, its version, as the latency scrapes do. Before, it named the
// exporter only, whatever its version.
func TestPodMetadataUserAgent(t *testing.T) {
	defer func(v string) { version.Version = v }(version.Version)
	var mu sync.Mutex
	var got string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Get("User-Agent")
		mu.Unlock()
		_, _ = w.Write([]byte(podListJSON))
	}))
	defer hs.Close()
	for _, tc := range []struct{ version, want string }{
		{"1.2.3", "vgpu_exporter/1.2.3"},
		{"", "vgpu_exporter"},
	} {
		version.Version = tc.version
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
			t.Fatalf("version %q: pod metadata not read: %+v", tc.version, st)
		}
		mu.Lock()
		ua := got
		mu.Unlock()
		if ua != tc.want {
			t.Errorf("version %q: User-Agent %q, want %q", tc.version, ua, tc.want)
		}
	}
}
