//go:build kube

package kube

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"sigs.k8s.io/yaml"
)

// The release under test: the chart of deploy/helm as docs/deploy.md's
// "Try it on any cluster" installs it (backend sim), with the locally built
// image, the kubelet's pod-resources directory of this cluster and pod
// metadata from the kubelet's /pods; no tenants file.
const (
	release   = "vgpu-exporter"
	releaseNS = "vgpu"
	// A built-in scenario with two simulated GPUs, each given to one pod.
	// The exporter reads it from a ConfigMap of its own (not part of the
	// release) as a scenario file: a built-in scenario brings its tenants
	// file, a file without a <name>.tenants.yaml beside it none, so every
	// pod's tenant comes from Kubernetes.
	scenario    = "placement-spare"
	scenarioCM  = "sim-scenario"
	scenarioDir = "/etc/vgpu-scenario"
	gpuRes      = "nvidia.com/gpu"
	// the label the upgraded release names tenants by
	teamLabel = "team"
)

// Two workloads in two namespaces, one simulated GPU each.
var workloads = []struct{ namespace, team string }{
	{"research", "alpha"},
	{"inference", "beta"},
}

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

	c.createScenarioConfigMap(ctx)
	h.run(ctx, "install", release, h.chart, "-n", releaseNS, "--create-namespace",
		"--set", "backend=sim",
		"--set", "sim.scenario="+scenarioDir+"/"+scenario+".yaml",
		"--set-json", `extraVolumes=[{"name":"scenario","configMap":{"name":"`+scenarioCM+`"}}]`,
		"--set-json", `extraVolumeMounts=[{"name":"scenario","mountPath":"`+scenarioDir+`","readOnly":true}]`,
		"--set", "image.repository="+exporterRepo, "--set", "image.tag="+exporterTag, "--set", "image.pullPolicy=Never",
		"--set", "kubernetes.podResources.hostPath="+c.path("kubelet", "root", "pod-resources"),
		"--set", "kubernetes.podMetadata.enabled=true", "--set", "kubernetes.podMetadata.source=kubelet")
	first := c.waitExporterReady(ctx, "")
	step("helm install: DaemonSet pod " + first + " Running and Ready")
	c.checkMonitoringObjects(ctx)

	// /metrics through the API server's service proxy: the simulated GPUs.
	m := c.scrape(ctx)
	var uuids []string
	for _, s := range series(m, "vgpu_gpu_info", nil) {
		uuids = append(uuids, s.labels["uuid"])
	}
	sort.Strings(uuids)
	if len(uuids) != len(workloads) {
		t.Fatalf("vgpu_gpu_info: %d GPUs (%v), want %d (scenario %s)", len(uuids), uuids, len(workloads), scenario)
	}
	step(fmt.Sprintf("/metrics through the API server: GPUs %v", uuids))

	// The fake device plugin advertises the simulated GPUs; two pods of two
	// namespaces get one each.
	fakedp := filepath.Join(c.dir, "fakedp")
	if out, err := run(ctx, moduleDir, nil, "nice", "-n", "19", "go", "build", "-o", fakedp, "./fakedp"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	c.startProc("fakedp", false, fakedp, "-dir", devicePluginDir, "-resource", gpuRes, "-devices", strings.Join(uuids, ","))
	c.waitAllocatable(ctx, int64(len(uuids)))
	for _, w := range workloads {
		c.createWorkload(ctx, w.namespace, w.team)
	}
	held := c.waitGPUsHeld(ctx)
	step(fmt.Sprintf("fake device plugin: pod-resources assigns %v", held))

	// Tenant per namespace, no tenants file: each pod's GPU is its
	// namespace's alone, its figures the device's.
	c.checkAttribution(ctx, held, time.Time{}, func(p podRef) string { return p.namespace })
	step("exporter: each namespace's tenant holds its pod's GPU, figures conserve")

	// The release's service account may not evict pods until the chart
	// grants it (tuner.rebalanceHook.evictPods).
	c.checkHookForbidden(ctx, held[0])
	step("rebalancing hook with the release's token, no eviction grant: refused (403)")

	// helm upgrade: tenants named by the pods' team label, which only the
	// kubelet's /pods (read with the service account's token) carries; the
	// tuner in enforce with the eviction hook, as docs/deploy.md sets it up,
	// which grants the service account pods/eviction. (This image has no
	// sh, jq or kubectl for the hook, so the tuner only recommends moves;
	// the test runs the hook itself, with the service account's token.)
	h.run(ctx, "upgrade", release, h.chart, "-n", releaseNS, "--reuse-values",
		"--set", "tenants.kubernetesDefault=label:"+teamLabel,
		"--set", "tuner.mode=enforce",
		"--set", "tuner.journal.hostPath="+c.path("tuner-journal"),
		"--set", "tuner.mps.enabled=false",
		"--set", "tuner.rebalanceHook.command=/etc/vgpu_exporter/hooks/kubernetes-evict.sh",
		"--set", "tuner.rebalanceHook.evictPods=true")
	second := c.waitExporterReady(ctx, first)
	step("helm upgrade: new pod " + second + " Ready")
	c.checkAttribution(ctx, held, time.Time{}, func(p podRef) string { return p.team })
	step("exporter: tenants by the pods' team label")

	// The rebalancing hook, with the release's token and RBAC, moves the
	// first pod through the Eviction API: refused under a
	// PodDisruptionBudget, then done; the Deployment recreates the pod and
	// the exporter maps the new one.
	held = c.checkRebalancingHook(ctx, held[0])
	c.checkAttribution(ctx, held, time.Now(), func(p podRef) string { return p.team })
	step(fmt.Sprintf("rebalancing hook: refused under the budget, then evicted; pods now %v", held))

	// helm uninstall leaves nothing of the release.
	h.run(ctx, "uninstall", release, "-n", releaseNS, "--wait", "--timeout", "3m")
	if err := c.client.CoreV1().ConfigMaps(releaseNS).Delete(ctx, scenarioCM, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.checkNothingLeft(ctx)
	step("helm uninstall: nothing left")
}

// createScenarioConfigMap makes the release's namespace and in it the
// ConfigMap holding the scenario file.
func (c *cluster) createScenarioConfigMap(ctx context.Context) {
	t := c.t
	t.Helper()
	sc, err := os.ReadFile(filepath.Join(repoRoot(), "scenarios", scenario+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: scenarioCM, Namespace: releaseNS},
		Data:       map[string]string{scenario + ".yaml": string(sc)},
	}
	if _, err := c.client.CoreV1().ConfigMaps(releaseNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
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
// its Service.
func (c *cluster) scrape(ctx context.Context) []sample {
	c.t.Helper()
	body, err := c.client.CoreV1().Services(releaseNS).ProxyGet("http", release, "metrics", "/metrics", nil).DoRaw(ctx)
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

// createWorkload makes namespace ns and in it a Deployment of one pod,
// labelled team, that asks for one GPU.
func (c *cluster) createWorkload(ctx context.Context, ns, team string) {
	t := c.t
	t.Helper()
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	labels := map[string]string{"app": "worker", teamLabel: team}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: new(bool),
					Containers: []corev1.Container{{
						Name: "worker", Image: pauseImage, ImagePullPolicy: corev1.PullNever,
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{gpuRes: resource.MustParse("1")}},
					}},
				},
			},
		},
	}
	if _, err := c.client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podRef is a pod holding a GPU.
type podRef struct{ namespace, name, team, uuid string }

func (p podRef) String() string { return fmt.Sprintf("%s/%s:%s", p.namespace, p.name, p.uuid) }

// waitGPUsHeld waits until every workload's pod is Running and the
// kubelet's pod-resources API names its GPU, and returns them.
func (c *cluster) waitGPUsHeld(ctx context.Context) []podRef {
	t := c.t
	t.Helper()
	var held []podRef
	if err := poll(3*time.Minute, time.Second, func() (bool, string, error) {
		held = held[:0]
		assigned, err := c.podResources(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, w := range workloads {
			pods, err := c.client.CoreV1().Pods(w.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=worker"})
			if err != nil {
				return false, err.Error(), nil
			}
			if len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning {
				why := fmt.Sprintf("%s: %d pods", w.namespace, len(pods.Items))
				if len(pods.Items) > 0 {
					why = describePod(&pods.Items[0])
				}
				return false, why, nil
			}
			p := pods.Items[0]
			devs := assigned[p.Namespace+"/"+p.Name]
			if len(devs) != 1 {
				return false, fmt.Sprintf("pod-resources: %s/%s holds %v", p.Namespace, p.Name, devs), nil
			}
			held = append(held, podRef{namespace: p.Namespace, name: p.Name, team: p.Labels[teamLabel], uuid: devs[0]})
		}
		return true, "", nil
	}); err != nil {
		t.Fatalf("GPU pods: %v\nevents:\n%s%s", err, c.events(ctx, workloads[0].namespace), c.events(ctx, workloads[1].namespace))
	}
	if held[0].uuid == held[1].uuid {
		t.Fatalf("both pods hold %s", held[0].uuid)
	}
	return held
}

// podResources lists the kubelet's GPU assignments (namespace/pod ->
// device IDs) from its pod-resources API.
func (c *cluster) podResources(ctx context.Context) (map[string][]string, error) {
	conn, err := grpc.NewClient("unix://"+c.path("kubelet", "root", "pod-resources", "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := podresourcesv1.NewPodResourcesListerClient(conn).List(cctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, p := range resp.PodResources {
		for _, ctr := range p.Containers {
			for _, d := range ctr.Devices {
				if d.ResourceName == gpuRes {
					out[p.Namespace+"/"+p.Name] = append(out[p.Namespace+"/"+p.Name], d.DeviceIds...)
				}
			}
		}
	}
	return out, nil
}

// checkAttribution waits until the exporter maps both pods (through the
// pod-resources API and the kubelet's /pods, read with the service
// account's token: a failed read fails the whole mapping) in a mapping
// fetched after since, and then checks,
// in one scrape, that each pod's GPU is its tenant's alone: the tenant
// given by tenantOf has processes there, no other tenant (unassigned
// included) has, and the tenant's SM and DRAM figures are the device's.
func (c *cluster) checkAttribution(ctx context.Context, held []podRef, since time.Time, tenantOf func(podRef) string) {
	t := c.t
	t.Helper()
	var m []sample
	var last string
	err := poll(2*time.Minute, 2*time.Second, func() (bool, string, error) {
		m = c.scrape(ctx)
		up, _ := value(m, "vgpu_kubelet_pod_resources_up", nil)
		mapped, _ := value(m, "vgpu_kubelet_pods_mapped", nil)
		fetched, _ := value(m, "vgpu_kubelet_pod_resources_last_success_timestamp_seconds", nil)
		if up != 1 || mapped != float64(len(held)) || fetched < float64(since.UnixNano())/1e9 {
			return false, fmt.Sprintf("vgpu_kubelet_pod_resources_up %v, vgpu_kubelet_pods_mapped %v, mapping of %v (want after %v)",
				up, mapped, time.Unix(0, int64(fetched*1e9)), since), nil
		}
		for _, p := range held {
			if tenants := tenantsOn(m, p.uuid); !slices.Equal(tenants, []string{tenantOf(p)}) {
				last = fmt.Sprintf("GPU %s of %s: tenants with processes %v, want [%s]", p.uuid, p, tenants, tenantOf(p))
				return false, last, nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatalf("attribution: %v", err)
	}
	for _, p := range held {
		tenant := tenantOf(p)
		if _, ok := value(m, "vgpu_tenant_info", map[string]string{"tenant": tenant}); !ok {
			t.Errorf("vgpu_tenant_info{tenant=%q} missing", tenant)
		}
		for _, fig := range []string{"sm_active_ratio", "dram_active_ratio"} {
			dev, ok := value(m, "vgpu_gpu_"+fig, map[string]string{"uuid": p.uuid})
			if !ok {
				t.Errorf("vgpu_gpu_%s{uuid=%q} missing", fig, p.uuid)
				continue
			}
			sum := 0.0
			for _, s := range series(m, "vgpu_tenant_"+fig, map[string]string{"uuid": p.uuid}) {
				if s.labels["tenant"] != tenant && s.value != 0 {
					t.Errorf("GPU %s of %s: tenant %q has vgpu_tenant_%s %v", p.uuid, p, s.labels["tenant"], fig, s.value)
				}
				sum += s.value
			}
			if math.Abs(sum-dev) > 1e-9 {
				t.Errorf("GPU %s: tenants' vgpu_tenant_%s add up to %v, the device's is %v", p.uuid, fig, sum, dev)
			}
		}
	}
}

// tenantsOn are the tenants with processes on the GPU uuid.
func tenantsOn(m []sample, uuid string) []string {
	var out []string
	for _, s := range series(m, "vgpu_tenant_processes", map[string]string{"uuid": uuid}) {
		if s.value > 0 {
			out = append(out, s.labels["tenant"])
		}
	}
	sort.Strings(out)
	return out
}
