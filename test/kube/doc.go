// Package kube holds the Kubernetes end-to-end test of the Helm chart
// (build tag kube; run it with `make e2e-kube`, which runs run.sh).
//
// The test stands up a real single-node cluster on the machine: Debian's
// etcd and containerd, kube-apiserver, kube-controller-manager,
// kube-scheduler and a kubelet built from k8s.io/kubernetes at the version
// go.mod requires (build.sh keeps the binaries in a cache directory), every
// listener on 127.0.0.1 but the kubelet's and the API server's, which serve
// on the address of a local bridge (the pods' network, with no route out).
// It builds the pause and exporter images with buildah and imports them
// into containerd, then installs the prometheus-operator CRDs, applies the
// chart's defaults and every values example (examples/) with a server-side
// dry run and strict field validation (a broken copy must be refused),
// installs deploy/helm/vgpu-exporter with --set backend=sim, and checks:
// the DaemonSet's pod Running and Ready; /metrics through the API server's
// proxy; a fake nvidia.com/gpu device plugin (fakedp/) giving time-sliced
// replicas of one simulated GPU (<UUID>::<n>, as NVIDIA's device plugin
// names them) to two pods of two namespaces, the scenario's two processes
// on that GPU running in those pods (the test writes the pods' UIDs into
// the processes' cgroups and restarts the exporter); the exporter
// attributing each process to its pod's namespace (no tenants file) from
// the kubelet's pod-resources API and /pods, read with the chart's service
// account token and RBAC, the two tenants' SM and DRAM activity, energy
// and memory adding up to the device's, and each pod's
// vgpu_tenant_pod_info series (kubernetes.podInfo) naming its namespace,
// pod and container; after a helm upgrade, pod metadata
// from the API server (the chart's default source, RBAC pods list) and
// tenants named by a pod label (which only pod metadata gives); the
// rebalancing hook (deploy/hooks/kubernetes-evict.sh) and the exporter's
// built-in eviction (gpu/kubeevict, its test TestLiveCluster built from
// the repository) run with a token of the release's service account:
// forbidden before the upgrade grants evictions, refused once (one
// request) under a PodDisruptionBudget, then the hook's dry run leaving
// the pod and the built-in eviction evicting it, its Deployment recreating
// it, the evicted pod's vgpu_tenant_pod_info gone and the new pod's
// served, whose new UID the processes then follow; then the exporter's own
// tuner (a tenants file giving the scenario's chat its SLO, the slow
// loop's timings shortened by its flags, the fast loop's knobs disabled)
// plans the training job's move and evicts its pod through the built-in
// eviction: refused under a PodDisruptionBudget and reported once (one
// Eviction request by the API server's metrics, one decision in the
// exporter's log, metrics and journal, none more for a minute), the pod
// keeping its UID; then, without the budget, evicted and recreated by its
// Deployment (tunerevict_test.go); after helm uninstall, no object left.
// Everything it starts is stopped by PID, also when it fails.
//
// Environment: VGPU_KUBE_CACHE, where build.sh keeps the binaries
// (default $XDG_CACHE_HOME/vgpu_exporter-kube or ~/.cache/vgpu_exporter-kube);
// VGPU_KUBE_KEEP=1 leaves the cluster running after the test, for a look
// (its directory is in the log; stop its processes by hand).
package kube
