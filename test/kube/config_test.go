//go:build kube

package kube

import "fmt"

// containerdConfig is Debian's containerd 1.6 set up for the kubelet with
// all its state under dir.
func containerdConfig(dir string) string {
	return fmt.Sprintf(`version = 2
root = "%[1]s/containerd/root"
state = "%[1]s/containerd/state"

[grpc]
  address = "%[1]s/containerd/containerd.sock"
[ttrpc]
  address = "%[1]s/containerd/containerd.sock.ttrpc"
[debug]
  address = "%[1]s/containerd/debug.sock"
[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  # the pause image the test builds and imports; nothing is pulled
  sandbox_image = "%[2]s"
  enable_selinux = false
  # runc may not lower oom_score_adj without CAP_SYS_RESOURCE, which
  # containers and sandboxes running this test may lack
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "%[1]s/cni/net.d"
`, dir, pauseImage)
}

// cniConfig is a bridge network with host-local addresses and no route
// out of the node.
func cniConfig(dir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "vgpu-kube",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": "%s/cni/ipam",
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "routes": []
    }
  }]
}
`, bridgeName, dir, podSubnet, nodeIP)
}

// kubeletConfig serves the kubelet API on the node's address only (the
// exporter's pods reach /pods there), authenticates and authorizes through
// the API server, and relaxes what a shared test machine cannot give:
// cgroup v1 hosts, swap, full disks.
func kubeletConfig(dir string, p *pki, serving keyPair) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[2]s
port: 10250
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[3]q}
authorization: {mode: Webhook}
tlsCertFile: %[4]q
tlsPrivateKeyFile: %[5]q
containerRuntimeEndpoint: unix://%[1]s/containerd/containerd.sock
imageServiceEndpoint: unix://%[1]s/containerd/containerd.sock
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podLogsDir: %[1]s/pod-logs
serializeImagePulls: false
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
protectKernelDefaults: false
makeIPTablesUtilChains: false
`, dir, nodeIP, p.path("ca.crt"), serving.cert, serving.key)
}
