package kube_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/urlmask/urlmasktest"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// TestPodMetadataURLSecretsNotShown: a pod metadata URL's password
// (user:PASSWORD@, sent as basic auth) and query token are sent with the
// request, and appear neither in the Mapper's log lines (the failure, the
// recovery) nor in its status, whichever way the read fails: refused,
// HTTP 500, a page that is not a pod list. The host and path still name
// the source there.
func TestPodMetadataURLSecretsNotShown(t *testing.T) {
	refused := urlmasktest.RefusedAddr(t)
	var rec urlmasktest.Recorder
	failing, notJSON := &podsServer{}, &podsServer{}
	outcomes := []struct {
		name    string
		host    string
		srv     *podsServer // nil: refused
		fail    func()
		wantErr string
	}{
		{"refused", refused, nil, func() {}, "connection refused"},
		{"HTTP 500", rec.Serve(t, failing), failing, func() { failing.set(http.StatusInternalServerError, "") }, "HTTP 500 Internal Server Error"},
		{"not a pod list", rec.Serve(t, notJSON), notJSON, func() { notJSON.set(http.StatusOK, "<html>") }, "invalid character"},
	}
	fk := &fakeKubelet{}
	fk.set(pod("llm", "search-0", "triton", "nvidia.com/gpu", "GPU-b"))
	socket, _ := serveKubelet(t, fk)
	for _, o := range outcomes {
		// the chart's query (the node's name) is masked too
		for _, u := range urlmasktest.Cases("reader", "/pods", "fieldSelector=spec.nodeName%3Dn1") {
			t.Run(o.name+"/"+u.Name, func(t *testing.T) {
				rec.Reset()
				o.fail()
				var logs bytes.Buffer
				clk := gpu.NewManualClock(time.Unix(100, 0))
				m, err := kube.NewMapper(kube.Options{PodResourcesSocket: socket, PodMetadata: urlmasktest.Host(u.URL, o.host),
					Clock: clk, Logger: log.NewLogfmtLogger(log.NewSyncWriter(&logs))})
				if err != nil {
					t.Fatal(err)
				}
				m.Refresh(context.Background())
				if st := m.Status(); !st.Up || st.Metadata.Up || st.Metadata.ErrorsTotal != 1 {
					t.Fatalf("status %+v, want the pod-resources up and the metadata down", st)
				}
				if o.srv != nil { // and it reads again
					o.srv.set(http.StatusOK, podListJSON)
					clk.Advance(10 * time.Second)
					m.Refresh(context.Background())
					if !strings.Contains(logs.String(), "pod metadata read recovered") {
						t.Errorf("the recovery is not logged:\n%s", logs.String())
					}
				}
				shown := urlmasktest.Host(u.Shown, o.host)
				for what, text := range map[string]string{"log": logs.String(), "status": m.Status().Metadata.Source} {
					if urlmasktest.Shows(text) || strings.Contains(text, "nodeName") {
						t.Errorf("the %s holds a secret of the URL: %s", what, text)
					}
					if !strings.Contains(text, shown) {
						t.Errorf("the %s = %s; want it to name the source as %s", what, text, shown)
					}
				}
				if !strings.Contains(logs.String(), o.wantErr) {
					t.Errorf("log:\n%s\nwant it to say %q", logs.String(), o.wantErr)
				}
				if sent := rec.Sent(); o.srv != nil && (len(sent) != 2 || sent[0] != u.Asked || sent[1] != u.Asked) {
					t.Errorf("the server was sent (password, query) %q; want %q twice", sent, u.Asked)
				}
			})
		}
	}
}

// TestPodMetadataURLSecretsNotInErrors: NewMapper's errors about a pod
// metadata URL it refuses quote it with its password and query values
// masked, url.Parse's reason included.
func TestPodMetadataURLSecretsNotInErrors(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "kubelet.sock")
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts kube.Options
		want string
	}{
		{"no socket", kube.Options{PodMetadata: "https://reader:hunter2@node:10250/pods?token=s3cr3t"},
			"https://reader:xxxxx@node:10250/pods?token=xxxxx is read only with a kubelet pod-resources socket"},
		{"port out of range", kube.Options{PodResourcesSocket: socket, PodMetadata: "https://reader:hunter2@node:70000/pods?token=s3cr3t"},
			`"https://reader:xxxxx@node:70000/pods?token=xxxxx": port 70000`},
		{"no host", kube.Options{PodResourcesSocket: socket, PodMetadata: "https://reader:hunter2@/pods?token=s3cr3t"},
			`"https://reader:xxxxx@/pods?token=xxxxx": no host`},
		{"unparsed", kube.Options{PodResourcesSocket: socket, PodMetadata: "https://reader:hunt/er2@node/pods?token=s3cr3t"},
			`"https://reader:xxxxx@node/pods?token=xxxxx": invalid port "xxxxx" after host`},
		{"token over http", kube.Options{PodResourcesSocket: socket, BearerTokenFile: token, PodMetadata: "http://reader:hunter2@node/pods?token=s3cr3t"},
			`https:// URL, not "http://reader:xxxxx@node/pods?token=xxxxx"`},
		{"address for a URL", kube.Options{PodResourcesSocket: socket, KubeletAddress: "10.0.0.5", PodMetadata: "https://reader:hunter2@node/pods?token=s3cr3t"},
			`not "https://reader:xxxxx@node/pods?token=xxxxx"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := kube.NewMapper(tc.opts)
			if err == nil {
				t.Fatal("NewMapper took it")
			}
			if msg := err.Error(); strings.Contains(msg, "hunt") || strings.Contains(msg, "er2") || strings.Contains(msg, "s3cr3t") || !strings.Contains(msg, tc.want) {
				t.Errorf("err = %v, want no secret and %q", err, tc.want)
			}
		})
	}
}
