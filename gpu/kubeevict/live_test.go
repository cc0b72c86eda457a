package kubeevict

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// counting counts the requests of a transport.
type counting struct {
	n  atomic.Int32
	rt http.RoundTripper
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// TestLiveCluster evicts one pod of a real cluster: the Kubernetes
// end-to-end test (test/kube) runs it with the release's service account
// token and the cluster's CA, before and after the chart grants evictions
// and under a PodDisruptionBudget. Elsewhere it skips. VGPU_EVICT_WANT
// says the outcome: forbidden (the pod's read, 403), budget (429),
// evicted, gone (the pod gone already: the API server's NotFound, taken as
// moved) or replaced (VGPU_EVICT_UID another pod's than the one read: not
// evicted); each is the pod's read and, where it allows, one eviction,
// never retried.
func TestLiveCluster(t *testing.T) {
	api := os.Getenv("VGPU_EVICT_API")
	if api == "" {
		t.Skip("VGPU_EVICT_API is not set: test/kube runs this test against its cluster")
	}
	httpc, err := kube.ClientWithCA(os.Getenv("VGPU_EVICT_CA"))
	if err != nil {
		t.Fatal(err)
	}
	rt := &counting{rt: httpc.Transport}
	httpc.Transport = rt
	e, err := New(Options{APIServer: api, TokenFile: os.Getenv("VGPU_EVICT_TOKEN"), HTTPClient: httpc, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ns, pod, uid := os.Getenv("VGPU_EVICT_NAMESPACE"), os.Getenv("VGPU_EVICT_POD"), os.Getenv("VGPU_EVICT_UID")
	err = e.Rebalance(context.Background(), gpu.Plan{Reason: "end-to-end test",
		Moves: []gpu.Move{{Tenant: "e2e", Pod: &gpu.Pod{Namespace: ns, Name: pod, UID: uid}}}})
	want := os.Getenv("VGPU_EVICT_WANT")
	fmt.Printf("built-in eviction of %s/%s: %d request(s), error: %v\n", ns, pod, rt.n.Load(), err)
	requests := map[string]int32{"evicted": 2, "budget": 2}[want]
	if requests == 0 {
		requests = 1 // the read alone
	}
	if rt.n.Load() != requests {
		t.Errorf("%d requests, want %d", rt.n.Load(), requests)
	}
	switch want {
	case "evicted":
		if err != nil {
			t.Fatal(err)
		}
	case "replaced":
		if err == nil || !strings.Contains(err.Error(), "not the one planned (UID "+uid+",") {
			t.Fatalf("error %v, want the pod read refused: it is not the one of UID %s", err, uid)
		}
	case "gone":
		if err != nil {
			t.Fatalf("error %v, want none: the pod is gone already", err)
		}
	case "budget":
		if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "eviction of "+ns+"/"+pod) {
			t.Fatalf("error %v, want the budget's refusal of %s/%s", err, ns, pod)
		}
	case "forbidden":
		if err == nil || errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "reading the pod: HTTP 403") || !strings.Contains(err.Error(), `"pods"`) {
			t.Fatalf("error %v, want 403 on the pod's read (pods get)", err)
		}
	default:
		t.Fatalf("VGPU_EVICT_WANT %q: forbidden, budget, evicted, gone or replaced", want)
	}
}
