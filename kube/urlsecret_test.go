package kube_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// TestPodMetadataURLSecretsNotShown: a pod metadata URL's password
// (user:PASSWORD@, sent as basic auth) and query token are sent with the
// request, and appear neither in the Mapper's log lines (the failure, the
// recovery) nor in its status, whichever way the read fails: refused,
// HTTP 500, a page that is not a pod list. The host and path still name
// the source there.
func TestPodMetadataURLSecretsNotShown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close()
	var mu sync.Mutex
	var sent []string // the basic-auth password and query of each request
	answer := func(srv *podsServer) string {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, pw, _ := r.BasicAuth()
			mu.Lock()
			sent = append(sent, pw+" "+r.URL.RawQuery)
			mu.Unlock()
			srv.ServeHTTP(w, r)
		}))
		t.Cleanup(hs.Close)
		return strings.TrimPrefix(hs.URL, "http://")
	}
	failing, notJSON := &podsServer{}, &podsServer{}
	outcomes := []struct {
		name    string
		host    string
		srv     *podsServer // nil: refused
		fail    func()
		wantErr string
	}{
		{"refused", refused, nil, func() {}, "connection refused"},
		{"HTTP 500", answer(failing), failing, func() { failing.set(http.StatusInternalServerError, "") }, "HTTP 500 Internal Server Error"},
		{"not a pod list", answer(notJSON), notJSON, func() { notJSON.set(http.StatusOK, "<html>") }, "invalid character"},
	}
	urls := []struct {
		name, url, shown string // url's HOST is the outcome's host
		asked            string // what the server is to be sent
	}{
		{"password", "http://reader:hunter2@HOST/pods", "http://reader:xxxxx@HOST/pods", "hunter2 "},
		{"query token", "http://HOST/pods?token=s3cr3t&fieldSelector=spec.nodeName%3Dn1", "http://HOST/pods?token=xxxxx&fieldSelector=xxxxx", " token=s3cr3t&fieldSelector=spec.nodeName%3Dn1"},
		{"both", "http://reader:hunter2@HOST/pods?token=s3cr3t", "http://reader:xxxxx@HOST/pods?token=xxxxx", "hunter2 token=s3cr3t"},
	}
	fk := &fakeKubelet{}
	fk.set(pod("llm", "search-0", "triton", "nvidia.com/gpu", "GPU-b"))
	socket, _ := serveKubelet(t, fk)
	for _, o := range outcomes {
		for _, u := range urls {
			t.Run(o.name+"/"+u.name, func(t *testing.T) {
				mu.Lock()
				sent = nil
				mu.Unlock()
				o.fail()
				var logs bytes.Buffer
				clk := gpu.NewManualClock(time.Unix(100, 0))
				m, err := kube.NewMapper(kube.Options{PodResourcesSocket: socket, PodMetadata: strings.Replace(u.url, "HOST", o.host, 1),
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
				shown := strings.Replace(u.shown, "HOST", o.host, 1)
				for what, text := range map[string]string{"log": logs.String(), "status": m.Status().Metadata.Source} {
					if strings.Contains(text, "hunter2") || strings.Contains(text, "s3cr3t") || strings.Contains(text, "nodeName") {
						t.Errorf("the %s holds a secret of the URL: %s", what, text)
					}
					if !strings.Contains(text, shown) {
						t.Errorf("the %s = %s; want it to name the source as %s", what, text, shown)
					}
				}
				if !strings.Contains(logs.String(), o.wantErr) {
					t.Errorf("log:\n%s\nwant it to say %q", logs.String(), o.wantErr)
				}
				mu.Lock()
				defer mu.Unlock()
				if o.srv != nil && (len(sent) != 2 || sent[0] != u.asked || sent[1] != u.asked) {
					t.Errorf("the server was sent (password, query) %q; want %q twice", sent, u.asked)
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
