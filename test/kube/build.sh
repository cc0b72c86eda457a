#!/usr/bin/env bash
# Builds what the Kubernetes end-to-end test runs, once per version, into a
# cache directory kept between runs (the Go build cache makes a rebuild after
# a version change quick too): kube-apiserver, kube-controller-manager,
# kube-scheduler, the kubelet and kubectl from k8s.io/kubernetes at the version pinned
# in go.mod, and helm at HELM_VERSION. Every build runs under `nice -n 19`.
# Prints the binary directory on its last line.
set -euo pipefail
cd "$(dirname "$0")"

KUBE_VERSION=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
case "$KUBE_VERSION" in v1.*) ;; *) echo "build.sh: no k8s.io/kubernetes version in go.mod" >&2; exit 1 ;; esac
HELM_VERSION=v3.22.0
CACHE=${VGPU_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vgpu_exporter-kube}
BIN=$CACHE/kubernetes-$KUBE_VERSION-helm-$HELM_VERSION
mkdir -p "$BIN"

export GOFLAGS="-trimpath -modcacherw -mod=readonly"
minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor
 -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"

for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
  if [ -x "$BIN/$c" ]; then continue; fi
  start=$(date +%s)
  nice -n 19 go build -ldflags="$ldflags" -o "$BIN/$c.tmp" "k8s.io/kubernetes/cmd/$c"
  mv "$BIN/$c.tmp" "$BIN/$c"
  echo "built $c $KUBE_VERSION in $(( $(date +%s) - start ))s" >&2
done

if [ ! -x "$BIN/helm" ]; then
  start=$(date +%s)
  GOBIN=$BIN/.helm nice -n 19 go install -ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  mv "$BIN/.helm/helm" "$BIN/helm"
  echo "built helm $HELM_VERSION in $(( $(date +%s) - start ))s" >&2
fi
echo "$BIN"
