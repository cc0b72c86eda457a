//go:build kube

package kube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The release under test: the chart of deploy/helm as docs/deploy.md's
// "Try it on any cluster" installs it (backend sim), with the locally built
// image, the kubelet's pod-resources directory of this cluster and pod
// metadata from the kubelet's /pods (from the API server, the chart's
// default, after the upgrade); no tenants file.
const (
	release   = "vgpu-exporter"
	releaseNS = "vgpu"
	// A built-in scenario with two simulated GPUs, two processes on the
	// first. The exporter reads it from a ConfigMap of its own (not part
	// of the release) as a scenario file: a built-in scenario brings its
	// tenants file, a file without a <name>.tenants.yaml beside it none, so
	// every pod's tenant comes from Kubernetes.
	scenario = "placement-spare"
	// The simulated GPU (its gpu label) whose time-sliced replicas the
	// fake device plugin advertises, one to each workload's pod.
	sharedGPU   = "0"
	scenarioCM  = "sim-scenario"
	scenarioDir = "/etc/vgpu-scenario"
	gpuRes      = "nvidia.com/gpu"
	// the label the upgraded release names tenants by
	teamLabel = "team"
)

// The prometheus-operator release whose CRDs (ServiceMonitor,
// PrometheusRule) the chart's monitoring objects need; read from the Go
// module cache.
const (
	promOperatorModule  = "github.com/prometheus-operator/prometheus-operator"
	promOperatorVersion = "v0.85.0"
)

// repoRoot is the repository's top directory (go test runs in the
// package's directory; -trimpath leaves no source path to find it by).
func repoRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Join(wd, "..", "..")
}

// TestChartOnKubernetes installs the Helm chart into a real single-node
// cluster and checks the exporter there end to end; see doc.go.
func TestChartOnKubernetes(t *testing.T) {
	bin := os.Getenv("VGPU_KUBE_BIN")
	if bin == "" {
		t.Skip("VGPU_KUBE_BIN is not set: run this test through `make e2e-kube` (test/kube/run.sh), which builds the cluster's binaries")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	began := time.Now()
	step := func(what string) { t.Logf("[%6.1fs] %s", time.Since(began).Seconds(), what) }

	moduleDir, _ := os.Getwd()
	imgDir, err := os.MkdirTemp("", "vgpu-kube-images-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(imgDir) })
	images, err := buildImages(ctx, repoRoot(), moduleDir, imgDir)
	if err != nil {
		t.Fatal(err)
	}
	step("pause and exporter images built")
	crds := promOperatorCRDs(t, ctx)

	c := up(t, bin)
	step("cluster up")
	for _, img := range images {
		if out, err := c.ctr("images", "import", img); err != nil {
			t.Fatalf("import %s: %v\n%s", img, err, out)
		}
	}
	c.applyCRDs(ctx, crds)
	step("images imported, prometheus-operator CRDs established")

	// Every values example, rendered for this cluster, passes a server-side
	// dry run with strict field validation; a broken copy does not.
	h := &helm{c: c, bin: filepath.Join(bin, "helm"), chart: filepath.Join(repoRoot(), "deploy", "helm", "vgpu-exporter")}
	c.dryRunExamples(ctx, h)
	step("values examples: server-side dry run, strict field validation")

	if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.writeScenario(ctx, nil)
	h.run(ctx, "install", release, h.chart, "-n", releaseNS, "--create-namespace",
		"--set", "backend=sim",
		"--set", "sim.scenario="+scenarioDir+"/"+scenario+".yaml",
		"--set-json", `extraVolumes=[{"name":"scenario","configMap":{"name":"`+scenarioCM+`"}}]`,
		"--set-json", `extraVolumeMounts=[{"name":"scenario","mountPath":"`+scenarioDir+`","readOnly":true}]`,
		"--set", "image.repository="+exporterRepo, "--set", "image.tag="+exporterTag, "--set", "image.pullPolicy=Never",
		"--set", "kubernetes.podResources.hostPath="+c.path("kubelet", "root", "pod-resources"),
		"--set", "kubernetes.podMetadata.enabled=true", "--set", "kubernetes.podMetadata.source=kubelet",
		"--set", "kubernetes.podInfo.enabled=true")
	first := c.waitExporterReady(ctx, "")
	step("helm install: DaemonSet pod " + first + " Running and Ready")
	// The kubelet's /pods read with the chart's default grant, nodes/pods
	// get alone (the kubelet authorizes through the API server: Webhook).
	if rules := c.roleRules(ctx); !slices.Equal(rules, []string{"nodes/pods:get"}) {
		t.Fatalf("ClusterRole %s.%s rules %v: want nodes/pods:get alone", releaseNS, release, rules)
	}
	c.checkMonitoringObjects(ctx)

	// /metrics through the API server's service proxy: the simulated GPUs.
	m := c.scrape(ctx)
	var uuids []string
	shared := ""
	for _, s := range series(m, "vgpu_gpu_info", nil) {
		uuids = append(uuids, s.labels["uuid"])
		if s.labels["gpu"] == sharedGPU {
			shared = s.labels["uuid"]
		}
	}
	sort.Strings(uuids)
	if len(uuids) != 2 || shared == "" {
		t.Fatalf("vgpu_gpu_info: GPUs %v, GPU %s %q; want 2 (scenario %s)", uuids, sharedGPU, shared, scenario)
	}
	step(fmt.Sprintf("/metrics through the API server: GPUs %v", uuids))

	// The fake device plugin advertises time-sliced replicas of one
	// simulated GPU, named as NVIDIA's device plugin names them
	// (<UUID>::<n>); two pods of two namespaces get one each.
	fakedp := filepath.Join(c.dir, "fakedp")
	if out, err := run(ctx, moduleDir, nil, "nice", "-n", "19", "go", "build", "-o", fakedp, "./fakedp"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var replicas []string
	for i := range workloads {
		replicas = append(replicas, fmt.Sprintf("%s::%d", shared, i))
	}
	c.startProc("fakedp", false, fakedp, "-dir", devicePluginDir, "-resource", gpuRes, "-devices", strings.Join(replicas, ","))
	c.waitAllocatable(ctx, int64(len(replicas)))
	for _, w := range workloads {
		c.createWorkload(ctx, w.namespace, w.team)
	}
	held := c.waitGPUsHeld(ctx)
	step(fmt.Sprintf("fake device plugin: pod-resources assigns %v", held))

	// The simulated processes run in the pods (their cgroups name the
	// pods' UIDs), from a new exporter pod.
	first = c.runProcessesIn(ctx, held, first)
	step("exporter pod " + first + " simulates the processes in the pods")

	// Tenant per namespace, no tenants file: both namespaces' tenants on
	// the one GPU, their figures adding up to the device's.
	c.checkAttribution(ctx, held, time.Time{}, func(p podRef) string { return p.namespace })
	step("exporter: each namespace's tenant served on the shared GPU, figures conserve")
	c.checkPodInfo(ctx, held, nil, func(p podRef) string { return p.namespace })
	step("exporter: each pod's vgpu_tenant_pod_info with its namespace, pod and container")
	c.checkMetadataRead(ctx)
	step("exporter: pod metadata read from the kubelet's /pods with nodes/pods get alone")

	// The release's service account may not evict pods until the chart
	// grants it (tuner.rebalanceHook.evictPods).
	c.checkHookForbidden(ctx, held[0])
	step("rebalancing hook with the release's token, no eviction grant: refused (403)")

	// helm upgrade: tenants named by the pods' team label, which only the
	// pod metadata carries, now read from the API server (the chart's
	// default source: RBAC pods list instead of nodes/pods); the
	// tuner in enforce with the built-in eviction as its rebalancing hook,
	// as docs/deploy.md sets it up, which grants the service account
	// pods/eviction. (No tenant has an SLO yet, so the tuner plans no move:
	// the test runs the shell hook and the built-in eviction itself, with
	// the service account's token; checkTunerEviction has the tuner plan.)
	h.run(ctx, "upgrade", release, h.chart, "-n", releaseNS, "--reuse-values",
		"--set", "tenants.kubernetesDefault=label:"+teamLabel,
		"--set", "kubernetes.podMetadata.source=apiserver",
		"--set", "kubernetes.apiServer="+c.rest.Host,
		"--set", "tuner.mode=enforce",
		"--set", "tuner.journal.hostPath="+c.path("tuner-journal"),
		"--set", "tuner.mps.enabled=false",
		"--set", "tuner.rebalanceHook.command=builtin:kubernetes-evict",
		"--set", "tuner.rebalanceHook.evictPods=true")
	second := c.waitExporterReady(ctx, first)
	step("helm upgrade: new pod " + second + " Ready")
	c.checkMetadataSource(ctx)
	c.checkAttribution(ctx, held, time.Time{}, func(p podRef) string { return p.team })
	step("exporter: tenants by the pods' team label, pod metadata from the API server")
	c.checkPodInfo(ctx, held, nil, func(p podRef) string { return p.team })

	// The rebalancing hook and the built-in eviction, with the release's
	// token and RBAC, move the first pod through the Eviction API: refused
	// under a PodDisruptionBudget, then done (the hook in a dry run, the
	// built-in eviction for real); the Deployment recreates the pod and the
	// exporter maps the new one.
	evicted := held[0]
	held = c.checkRebalancingHook(ctx, held[0])
	c.checkPodInfo(ctx, held, []podRef{evicted}, func(p podRef) string { return p.team })
	step("exporter: the evicted pod's vgpu_tenant_pod_info gone, its replacement's served")
	third := c.runProcessesIn(ctx, held, second)
	c.checkAttribution(ctx, held, time.Now(), func(p podRef) string { return p.team })
	step(fmt.Sprintf("rebalancing hook: refused under the budget, then evicted; pods now %v", held))

	// The exporter's own tuner plans the training job's move and evicts
	// its pod: refused once under a budget, then done (tunerevict_test.go).
	held = c.checkTunerEviction(ctx, h, held, third)
	step(fmt.Sprintf("tuner's eviction: refused once under the budget, then evicted; pods now %v", held))

	// helm uninstall leaves nothing of the release.
	h.run(ctx, "uninstall", release, "-n", releaseNS, "--wait", "--timeout", "3m")
	if err := c.client.CoreV1().ConfigMaps(releaseNS).Delete(ctx, scenarioCM, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.checkNothingLeft(ctx)
	step("helm uninstall: nothing left")
}

// checkMetadataSource: the release reads pod metadata from the API server
// (the address this cluster's pods reach it at), with RBAC pods list and
// no nodes/ grant, and sends the built-in eviction's there.
func (c *cluster) checkMetadataSource(ctx context.Context) {
	t := c.t
	t.Helper()
	ds, err := c.client.AppsV1().DaemonSets(releaseNS).Get(ctx, release, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(ds.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--kubernetes.pod-metadata=" + c.rest.Host + "/api/v1/pods?fieldSelector=spec.nodeName%3D$(NODE_NAME)",
		"--tuner.rebalance-hook.kubernetes-api-server=" + c.rest.Host} {
		if !strings.Contains(args, want) {
			t.Fatalf("exporter args %s: no %s", args, want)
		}
	}
	if rules := c.roleRules(ctx); !slices.Contains(rules, "pods:list") || slices.Contains(rules, "nodes/proxy:get") || slices.Contains(rules, "nodes/pods:get") {
		t.Fatalf("ClusterRole %s.%s rules %v: want pods:list, no nodes/proxy:get or nodes/pods:get", releaseNS, release, rules)
	}
}

// checkMetadataRead: the exporter's last read of the pod metadata
// succeeded (vgpu_kubelet_pod_metadata_up 1): a grant the kubelet refuses
// (HTTP 403) reads 0.
func (c *cluster) checkMetadataRead(ctx context.Context) {
	c.t.Helper()
	if err := poll(time.Minute, 2*time.Second, func() (bool, string, error) {
		v, ok := value(c.scrape(ctx), "vgpu_kubelet_pod_metadata_up", nil)
		return ok && v == 1, fmt.Sprintf("vgpu_kubelet_pod_metadata_up %v (served %v)", v, ok), nil
	}); err != nil {
		c.t.Fatalf("pod metadata from the kubelet: %v", err)
	}
}

// roleRules are the release's ClusterRole's rules, each as
// "resources:verbs".
func (c *cluster) roleRules(ctx context.Context) []string {
	c.t.Helper()
	role, err := c.client.RbacV1().ClusterRoles().Get(ctx, releaseNS+"."+release, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var rules []string
	for _, r := range role.Rules {
		rules = append(rules, strings.Join(r.Resources, ",")+":"+strings.Join(r.Verbs, ","))
	}
	return rules
}

// helm runs the helm binary against the cluster, with its own state.
type helm struct {
	c          *cluster
	bin, chart string
}

// env is helm's environment: the cluster's admin kubeconfig, its own state.
func (h *helm) env() []string {
	return []string{"KUBECONFIG=" + h.c.kubeconfig,
		"HELM_CACHE_HOME=" + h.c.path("helm", "cache"),
		"HELM_CONFIG_HOME=" + h.c.path("helm", "config"),
		"HELM_DATA_HOME=" + h.c.path("helm", "data")}
}

func (h *helm) run(ctx context.Context, args ...string) string {
	h.c.t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := run(cctx, repoRoot(), h.env(), h.bin, args...)
	if err != nil {
		h.c.t.Fatal(err)
	}
	return out
}

// promOperatorCRDs reads the ServiceMonitor and PrometheusRule CRDs of the
// pinned prometheus-operator module (downloaded into the module cache).
func promOperatorCRDs(t *testing.T, ctx context.Context) []*apiextv1.CustomResourceDefinition {
	t.Helper()
	out, err := run(ctx, os.TempDir(), []string{"GOFLAGS=-modcacherw"}, "go", "mod", "download", "-json", promOperatorModule+"@"+promOperatorVersion)
	if err != nil {
		t.Fatal(err)
	}
	var dl struct{ Dir string }
	if err := yaml.Unmarshal([]byte(out), &dl); err != nil || dl.Dir == "" {
		t.Fatalf("go mod download %s: no directory in %s (%v)", promOperatorModule, out, err)
	}
	var crds []*apiextv1.CustomResourceDefinition
	for _, kind := range []string{"servicemonitors", "prometheusrules"} {
		b, err := os.ReadFile(filepath.Join(dl.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+kind+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(b, crd); err != nil {
			t.Fatal(err)
		}
		crds = append(crds, crd)
	}
	return crds
}

func (c *cluster) applyCRDs(ctx context.Context, crds []*apiextv1.CustomResourceDefinition) {
	t := c.t
	t.Helper()
	cs := apiextclient.NewForConfigOrDie(c.rest)
	for _, crd := range crds {
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create CRD %s: %v", crd.Name, err)
		}
	}
	for _, crd := range crds {
		if err := poll(time.Minute, 500*time.Millisecond, func() (bool, string, error) {
			got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextv1.Established && cond.Status == apiextv1.ConditionTrue {
					return true, "", nil
				}
			}
			return false, "not Established", nil
		}); err != nil {
			t.Fatalf("CRD %s: %v", crd.Name, err)
		}
	}
	// The API server's discovery, which Helm's .Capabilities reads, serves
	// them once established.
	if err := poll(time.Minute, 500*time.Millisecond, func() (bool, string, error) {
		res, err := c.client.Discovery().ServerResourcesForGroupVersion("monitoring.coreos.com/v1")
		if err != nil {
			return false, err.Error(), nil
		}
		return len(res.APIResources) >= len(crds), fmt.Sprintf("%d resources", len(res.APIResources)), nil
	}); err != nil {
		t.Fatalf("monitoring.coreos.com/v1 discovery: %v", err)
	}
}

// waitExporterReady waits until the release's DaemonSet has exactly one
// pod, not named old, Running and Ready, and returns its name.
func (c *cluster) waitExporterReady(ctx context.Context, old string) string {
	t := c.t
	t.Helper()
	var name string
	sel := "app.kubernetes.io/instance=" + release
	if err := poll(4*time.Minute, time.Second, func() (bool, string, error) {
		pods, err := c.client.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err.Error(), nil
		}
		if len(pods.Items) != 1 {
			return false, fmt.Sprintf("%d pods", len(pods.Items)), nil
		}
		p := pods.Items[0]
		if p.Name == old || p.DeletionTimestamp != nil {
			return false, "old pod " + p.Name + " still there", nil
		}
		name = p.Name
		if p.Status.Phase != corev1.PodRunning {
			return false, describePod(&p), nil
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, describePod(&p), nil
	}); err != nil {
		t.Fatalf("exporter pod never Running and Ready: %v\nevents:\n%s", err, c.events(ctx, releaseNS))
	}
	return name
}

func describePod(p *corev1.Pod) string {
	s := fmt.Sprintf("pod %s phase %s", p.Name, p.Status.Phase)
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			s += fmt.Sprintf("; %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
		case cs.State.Terminated != nil:
			s += fmt.Sprintf("; %s terminated: %s (exit %d) %s", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode, cs.State.Terminated.Message)
		default:
			s += fmt.Sprintf("; %s ready %v, restarts %d", cs.Name, cs.Ready, cs.RestartCount)
		}
	}
	return s
}

func (c *cluster) events(ctx context.Context, ns string) string {
	evs, err := c.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range evs.Items {
		fmt.Fprintf(&b, "  %s %s/%s: %s %s\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	return b.String()
}

// checkMonitoringObjects: with the CRDs served, the chart made its
// ServiceMonitor and PrometheusRule.
func (c *cluster) checkMonitoringObjects(ctx context.Context) {
	t := c.t
	t.Helper()
	for _, kind := range []string{"servicemonitors", "prometheusrules"} {
		body, err := c.client.RESTClient().Get().AbsPath("/apis/monitoring.coreos.com/v1/namespaces", releaseNS, kind).DoRaw(ctx)
		if err != nil {
			t.Fatalf("list %s: %v", kind, err)
		}
		if !strings.Contains(string(body), `"name":"`+release) {
			t.Errorf("no %s of the release in %s: %s", kind, releaseNS, body)
		}
	}
}

// scrape reads the exporter's /metrics through the API server's proxy to
// its Service. A pod just Ready may not be in the Service's endpoints yet
// (the endpoints controller follows readiness a moment later): the proxy's
// "no endpoints available" is waited out for up to 30 s; any other error,
// or that one for longer, fails the test.
func (c *cluster) scrape(ctx context.Context) []sample {
	c.t.Helper()
	var body []byte
	err := poll(30*time.Second, time.Second, func() (bool, string, error) {
		var err error
		body, err = c.client.CoreV1().Services(releaseNS).ProxyGet("http", release, "metrics", "/metrics", nil).DoRaw(ctx)
		if err != nil && strings.Contains(err.Error()+string(body), "no endpoints available") {
			return false, err.Error(), nil
		}
		return true, "", err
	})
	if err != nil {
		c.t.Fatalf("/metrics through the API server: %v %s", err, body)
	}
	return parseMetrics(string(body))
}

func (c *cluster) waitAllocatable(ctx context.Context, n int64) {
	c.t.Helper()
	if err := poll(time.Minute, time.Second, func() (bool, string, error) {
		node, err := c.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		q := node.Status.Allocatable[gpuRes]
		return q.Value() == n, fmt.Sprintf("allocatable %s: %s", gpuRes, q.String()), nil
	}); err != nil {
		c.t.Fatalf("fake device plugin: %v", err)
	}
}
