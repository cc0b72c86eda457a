// Command fakedp is a Kubernetes device plugin for the end-to-end test: it
// advertises the given device IDs (the UUIDs of the simulator's GPUs, or
// time-sliced replicas of one named <UUID>::<n> as NVIDIA's device plugin
// names them) as healthy devices of one extended resource, so that the kubelet assigns
// them to pods and reports the assignments through its pod-resources API as
// it does for the NVIDIA device plugin's GPUs. Allocate hands the container
// nothing (there is no device to mount). Test-only code.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devices []*pluginapi.Device
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the device list once and then holds the stream open:
// the devices never change.
func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		log.Printf("allocate %s", strings.Join(c.DevicesIds, ","))
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{})
	}
	return resp, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

func main() {
	dir := flag.String("dir", pluginapi.DevicePluginPath, "the kubelet's device plugin directory")
	resource := flag.String("resource", "nvidia.com/gpu", "extended resource name")
	ids := flag.String("devices", "", "comma-separated device IDs")
	flag.Parse()
	if *ids == "" {
		log.Fatal("fakedp: -devices is empty")
	}
	p := &plugin{}
	for id := range strings.SplitSeq(*ids, ",") {
		p.devices = append(p.devices, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}

	endpoint := fmt.Sprintf("fakedp-%d.sock", os.Getpid())
	sock := filepath.Join(*dir, endpoint)
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		log.Fatalf("fakedp: %v", err)
	}
	defer os.Remove(sock)
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(lis) }()

	conn, err := grpc.NewClient("unix://"+filepath.Join(*dir, filepath.Base(pluginapi.KubeletSocket)),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatalf("fakedp: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: endpoint, ResourceName: *resource,
	})
	cancel()
	conn.Close()
	if err != nil {
		log.Fatalf("fakedp: register with the kubelet: %v", err)
	}
	log.Printf("fakedp: %s registered with %d devices", *resource, len(p.devices))

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	srv.Stop()
}
