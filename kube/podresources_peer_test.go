package kube

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// hostileKubelet answers List as its field says.
type hostileKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	answer func(ctx context.Context) (*podresourcesv1.ListPodResourcesResponse, error)
}

func (h *hostileKubelet) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return h.answer(ctx)
}

// A pod-resources socket that never answers, answers past the 16 MiB
// message limit, or speaks no gRPC at all gives an error naming the socket
// within the refresh's timeout; nothing past the limit is decoded. Only the
// silent socket is meant to reach the timeout: the others have one long
// enough for a loaded machine to marshal and refuse 20 MiB, so that their
// error is the one they are about.
func TestPodResourcesHostileSocket(t *testing.T) {
	huge := &podresourcesv1.ListPodResourcesResponse{}
	for i := range 20 {
		huge.PodResources = append(huge.PodResources, &podresourcesv1.PodResources{Namespace: "n", Name: strings.Repeat("p", 1<<20) + string(rune('a'+i))})
	}
	for _, tc := range []struct {
		name    string
		answer  func(ctx context.Context) (*podresourcesv1.ListPodResourcesResponse, error)
		timeout time.Duration
		want    string
	}{
		{"never answers", func(ctx context.Context) (*podresourcesv1.ListPodResourcesResponse, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, 500 * time.Millisecond, "DeadlineExceeded"},
		{"20 MiB answer", func(context.Context) (*podresourcesv1.ListPodResourcesResponse, error) { return huge, nil }, 20 * time.Second, "larger than max"},
		{"not gRPC", nil, 20 * time.Second, "List:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			socket := filepath.Join(t.TempDir(), "kubelet.sock")
			lis, err := net.Listen("unix", socket)
			if err != nil {
				t.Fatal(err)
			}
			if tc.answer != nil {
				srv := grpc.NewServer()
				podresourcesv1.RegisterPodResourcesListerServer(srv, &hostileKubelet{answer: tc.answer})
				go func() { _ = srv.Serve(lis) }()
				defer srv.Stop()
			} else {
				defer lis.Close()
				ServeGarbage(lis, []byte("HTTP/1.1 200 OK\r\n\r\n\x00\xff garbage"))
			}
			k, err := newKubeClient(socket, "", nil, time.Second, tc.timeout)
			if err != nil {
				t.Fatal(err)
			}
			defer k.close()
			start := time.Now()
			_, err = k.list(context.Background())
			if d := time.Since(start); d > tc.timeout+5*time.Second {
				t.Errorf("List took %v, past its timeout of %v", d, tc.timeout)
			}
			if err == nil || !strings.Contains(err.Error(), socket) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %.300v, want one naming the socket and %q", err, tc.want)
			}
		})
	}
}

// ServeGarbage answers every connection to lis with payload, then reads
// until the peer goes: a socket that speaks no gRPC (exported for the
// tests of package kube_test).
func ServeGarbage(lis net.Listener, payload []byte) {
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = c.Write(payload)
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
}
