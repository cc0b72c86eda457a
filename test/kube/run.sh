#!/usr/bin/env bash
# make e2e-kube: the Helm chart in a real single-node Kubernetes cluster
# (doc.go). Skips, with the reason, on a machine that cannot run it (not
# Linux, not root, a missing Debian package, no right to make a network
# bridge); under CI=true each of those fails instead. Builds the cluster's
# binaries (build.sh, cached between runs), then runs the Go test, and
# prints the time of each part.
set -euo pipefail
cd "$(dirname "$0")"
began=$(date +%s)

# The Debian packages .ci/run installs (README, "What the tests need").
packages="etcd-server containerd runc containernetworking-plugins buildah iptables conntrack jq"
cannot() {
  if [ "${CI:-}" = true ]; then
    echo "e2e-kube: FAIL: $*" >&2
    exit 1
  fi
  echo "e2e-kube: SKIP: $*"
  exit 0
}
[ "$(uname -s)" = Linux ] || cannot "needs Linux, not $(uname -s)"
[ "$(id -u)" = 0 ] || cannot "needs root (containerd, the kubelet and a network bridge), running as uid $(id -u)"
for tool in etcd containerd ctr runc buildah ip iptables ldd jq; do
  command -v "$tool" >/dev/null || cannot "needs $tool (apt-get install $packages)"
done
for plugin in bridge host-local loopback; do
  [ -x "/usr/lib/cni/$plugin" ] || cannot "needs the CNI plugin /usr/lib/cni/$plugin (apt-get install containernetworking-plugins)"
done
probe=vgpukubeprobe
if ! ip link add "$probe" type bridge 2>/dev/null; then
  cannot "cannot create a network bridge here (no CAP_NET_ADMIN?)"
fi
ip link del "$probe"
[ -w /sys/fs/cgroup ] || [ -w /sys/fs/cgroup/cpu ] || cannot "cgroups are not writable here: the kubelet cannot run pods"

# -trimpath as in build.sh, so that the test shares its compiled packages.
export GOFLAGS="-trimpath -modcacherw -mod=readonly"
bin=$(./build.sh | tail -n 1)
built=$(date +%s)
echo "e2e-kube: binaries in $bin ($(( built - began ))s)"

status=0
nice -n 19 go vet -tags kube ./... || status=$?
if [ "$status" = 0 ]; then
  # Two clusters on one machine would share the kubelet's and the
  # device plugins' fixed paths: one at a time.
  exec 9>"${TMPDIR:-/tmp}/vgpu_exporter-e2e-kube.lock"
  if ! flock -n 9; then
    echo "e2e-kube: another cluster of this test is running on this machine; waiting for it"
    flock 9
  fi
  VGPU_KUBE_BIN=$bin go test -tags kube -count=1 -v -timeout 30m ./ || status=$?
  exec 9>&-
fi
end=$(date +%s)
echo "e2e-kube: build $(( built - began ))s, test $(( end - built ))s, total $(( end - began ))s (exit $status)"
exit "$status"
