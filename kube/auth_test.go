package kube_test

import (
	"context"
	"encoding/pem"
	"io"
	stdlog "log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// kubeletPods is a TLS server that serves /pods, as a kubelet does, only
// to requests with the bearer token it wants.
type kubeletPods struct {
	mu   sync.Mutex
	want string
	got  []string // Authorization headers seen
}

func (k *kubeletPods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.got = append(k.got, r.Header.Get("Authorization"))
	if r.URL.Path != "/pods" || r.Header.Get("Authorization") != "Bearer "+k.want {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(podListJSON))
}

func (k *kubeletPods) setWant(tok string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.want = tok
}

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPodMetadataTokenAndCA reads the pod list from a TLS server that
// demands a bearer token, verifying it with a CA file, and follows a token
// rotation; a wrong or missing token or CA is a failed read of the pod
// metadata, not of the pod-resources API.
func TestPodMetadataTokenAndCA(t *testing.T) {
	fk := &fakeKubelet{}
	fk.set(pod("llm", "search-0", "triton", "nvidia.com/gpu", "GPU-b"))
	socket, _ := serveKubelet(t, fk)
	kp := &kubeletPods{want: "token-1"}
	srv := httptest.NewUnstartedServer(kp)
	srv.Config.ErrorLog = stdlog.New(io.Discard, "", 0) // the wrong-CA case's handshake error
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	ca := writeFile(t, dir, "ca.crt", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	token := writeFile(t, dir, "token", "token-1\n")
	cfg, err := tenant.ParseConfig("k.yaml", []byte(kubeTenants))
	if err != nil {
		t.Fatal(err)
	}
	r := &gpu.Readings{Devices: []gpu.Device{{Index: 1, UUID: "GPU-b", Up: true, Mode: gpu.SharingExclusive,
		Processes: []gpu.Process{{PID: 9, GPUInstanceID: -1, ComputeInstanceID: -1, UID: -1, Cgroup: podCgroup(uidSearch0)}}}}}

	tests := []struct {
		name         string
		token, ca    string
		tokens       []string // tokens the server wants, one per refresh
		rotateTo     []string // token file content before each refresh ("" keeps it)
		wantMetaUp   []bool   // the metadata read succeeded, refresh by refresh
		wantErrors   uint64   // failed metadata reads
		wantTenant   string
		wantAuthLast string
	}{
		{"token and CA", token, ca, []string{"token-1"}, []string{""}, []bool{true}, 0, "search", "Bearer token-1"},
		{"token rotates", token, ca, []string{"token-1", "token-2", "token-2"}, []string{"token-1\n", "", "token-2\n"},
			[]bool{true, false, true}, 1, "search", "Bearer token-2"},
		{"no token", "", ca, []string{"token-1"}, []string{""}, []bool{false}, 1, tenant.Unassigned, ""},
		{"wrong CA: the system roots do not know the server", token, "", []string{"token-1"}, []string{""}, []bool{false}, 1, tenant.Unassigned, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kp.mu.Lock()
			kp.got = nil
			kp.mu.Unlock()
			b, m := newBuilder(t, cfg, "", kube.Options{PodResourcesSocket: socket, PodMetadata: srv.URL + "/pods",
				BearerTokenFile: tc.token, CAFile: tc.ca})
			for i, want := range tc.tokens {
				kp.setWant(want)
				if c := tc.rotateTo[i]; c != "" {
					writeFile(t, dir, "token", c)
				}
				b.Refresh(context.Background())
				if st := m.Status(); !st.Up || st.Metadata.Up != tc.wantMetaUp[i] {
					t.Errorf("refresh %d: pod-resources up %v, metadata up %v; want true, %v", i+1, st.Up, st.Metadata.Up, tc.wantMetaUp[i])
				}
			}
			st := m.Status()
			if st.ErrorsTotal != 0 || st.Metadata.ErrorsTotal != tc.wantErrors {
				t.Errorf("errors: pod-resources %d, metadata %d; want 0, %d", st.ErrorsTotal, st.Metadata.ErrorsTotal, tc.wantErrors)
			}
			if got := tenantsByKey(b.Build(r, gpu.SamplerStats{})); got["GPU-b"] != tc.wantTenant {
				t.Errorf("GPU-b -> %q, want %q (labels selector through the pod list)", got["GPU-b"], tc.wantTenant)
			}
			kp.mu.Lock()
			defer kp.mu.Unlock()
			if tc.wantAuthLast != "" && (len(kp.got) == 0 || kp.got[len(kp.got)-1] != tc.wantAuthLast) {
				t.Errorf("Authorization headers seen %q, want the last %q", kp.got, tc.wantAuthLast)
			}
			if tc.token == "" && len(kp.got) > 0 && kp.got[0] != "" {
				t.Errorf("a token was sent without a token file: %q", kp.got)
			}
		})
	}
}

func TestPodMetadataAuthOptions(t *testing.T) {
	dir := t.TempDir()
	notPEM := writeFile(t, dir, "ca.crt", "not a certificate")
	empty := writeFile(t, dir, "token", "\n")
	for _, tc := range []struct {
		name string
		opts kube.Options
		want string
	}{
		{"token over plain http", kube.Options{PodMetadata: "http://node:10255/pods", BearerTokenFile: empty}, "https://"},
		{"token for a file", kube.Options{PodMetadata: "/run/pods.json", BearerTokenFile: empty}, "https://"},
		{"CA without PEM", kube.Options{PodMetadata: "https://node:10250/pods", CAFile: notPEM}, notPEM},
		{"CA missing", kube.Options{PodMetadata: "https://node:10250/pods", CAFile: filepath.Join(dir, "none.crt")}, "none.crt"},
		{"CA and a client", kube.Options{PodMetadata: "https://node:10250/pods", CAFile: notPEM, HTTPClient: http.DefaultClient}, "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.PodResourcesSocket = filepath.Join(dir, "kubelet.sock")
			_, err := kube.NewMapper(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
	// An empty token file fails the metadata read.
	fk := &fakeKubelet{}
	socket, _ := serveKubelet(t, fk)
	m, err := kube.NewMapper(kube.Options{PodResourcesSocket: socket, PodMetadata: "https://127.0.0.1:1/pods", BearerTokenFile: empty})
	if err != nil {
		t.Fatal(err)
	}
	m.Refresh(context.Background())
	if st := m.Status(); !st.Up || st.Metadata.Up || st.Metadata.ErrorsTotal != 1 {
		t.Errorf("empty token: status %+v, want a failed metadata read", st)
	}
}
