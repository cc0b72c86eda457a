package kube_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// TestPodMetadataOneTenantsLabels: pods of one tenant of more labels than
// a pod is allowed (ten of 10,001, within the API server's object size)
// made the node's whole pod metadata unreadable. They are read without
// their labels, the other pods whole; the metadata is up, and each such
// pod is logged by name, at most every 10 minutes.
func TestPodMetadataOneTenantsLabels(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{"items":[{"metadata":{"name":"chat-0","namespace":"llm","uid":"` + uidChat + `","labels":{"app":"chat"}}}`)
	for p := range 10 {
		fmt.Fprintf(&sb, `,{"metadata":{"name":"x-%d","namespace":"evil","uid":"deadbeef-0000-4000-8000-%012d","labels":{`, p, p)
		for i := range 10_001 {
			if i > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `"k%d":""`, i)
		}
		sb.WriteString(`}}}`)
	}
	sb.WriteString(`]}`)
	file := filepath.Join(t.TempDir(), "pods.json")
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	fk := &fakeKubelet{}
	fk.set(pod("llm", "chat-0", "server", "nvidia.com/gpu", "GPU-a"), pod("evil", "x-0", "main", "nvidia.com/gpu", "GPU-b"))
	socket, _ := serveKubelet(t, fk)
	var logs bytes.Buffer
	clk := gpu.NewManualClock(time.Unix(100, 0))
	m, err := kube.NewMapper(kube.Options{PodResourcesSocket: socket, PodMetadata: file, Clock: clk, Logger: log.NewLogfmtLogger(log.NewSyncWriter(&logs))})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []time.Duration{0, 10 * time.Second, 10 * time.Minute} {
		clk.Advance(step)
		m.Refresh(context.Background())
	}
	if st := m.Status(); !st.Metadata.Up || st.Metadata.ErrorsTotal != 0 {
		t.Fatalf("metadata status %+v", st.Metadata)
	}
	chat, _ := m.Mapping().ResolvePod(kube.ParseCgroupPath(podCgroup(uidChat)), "GPU-a")
	if chat == nil || chat.Name != "chat-0" || chat.Labels["app"] != "chat" {
		t.Errorf("chat-0: %+v, want its labels", chat)
	}
	x, _ := m.Mapping().ResolvePod(kube.ParseCgroupPath(podCgroup("deadbeef-0000-4000-8000-000000000000")), "GPU-b")
	if x == nil || x.Name != "x-0" || x.Namespace != "evil" || x.UID != "deadbeef-0000-4000-8000-000000000000" || len(x.Labels) != 0 {
		t.Errorf("x-0: %+v, want its pod without labels", x)
	}
	out := logs.String()
	for p := range 10 {
		// three reads, a line at the first and at the one 10 minutes on
		if n := strings.Count(out, fmt.Sprintf("pod=evil/x-%d ", p)); n != 2 {
			t.Errorf("evil/x-%d logged %d times, want 2:\n%s", p, n, out)
		}
	}
	if strings.Contains(out, "chat-0") || !strings.Contains(out, "more than 1000 labels") {
		t.Errorf("log:\n%s", out)
	}
}
