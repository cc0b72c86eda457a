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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"sigs.k8s.io/yaml"
)

// Two workloads in two namespaces sharing one simulated GPU, each pod
// running as one of the scenario's processes on it (the scenario's tenant
// of that name): the test writes the pod's UID into that process's cgroup
// (pod_uid), as the kubelet's cgroup would name it.
// workload is a Deployment of one GPU pod: its namespace, its team label
// and the scenario's process it runs as.
type workload struct{ namespace, team, process string }

var workloads = []workload{
	{"research", "alpha", "chat"},
	{"inference", "beta", "train"},
}

// scenarioProcess is a tenant of the scenario file: its process's pod
// UID and its memory.
type scenarioProcess struct {
	Name    string `json:"name"`
	Memory  string `json:"memory"`
	Process struct {
		PodUID string `json:"pod_uid"`
	} `json:"process"`
}

// readScenario returns the scenario file and its tenants by name.
func readScenario(t *testing.T) (string, map[string]scenarioProcess) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "scenarios", scenario+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sc struct {
		Tenants []scenarioProcess `json:"tenants"`
	}
	if err := yaml.Unmarshal(b, &sc); err != nil {
		t.Fatal(err)
	}
	procs := map[string]scenarioProcess{}
	for _, p := range sc.Tenants {
		procs[p.Name] = p
	}
	return string(b), procs
}

// writeScenario creates or updates the ConfigMap holding the scenario
// file, each workload's process in the pod held names (its pod_uid the
// pod's UID; none before the pods exist).
func (c *cluster) writeScenario(ctx context.Context, held []podRef) {
	t := c.t
	t.Helper()
	sc, procs := readScenario(t)
	for _, p := range held {
		old := procs[workloadOf(t, p).process].Process.PodUID
		if old == "" || !strings.Contains(sc, old) {
			t.Fatalf("scenario %s: no pod_uid for process %s", scenario, workloadOf(t, p).process)
		}
		sc = strings.ReplaceAll(sc, old, p.uid)
	}
	cms := c.client.CoreV1().ConfigMaps(releaseNS)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: scenarioCM, Namespace: releaseNS},
		Data:       map[string]string{scenario + ".yaml": sc},
	}
	var err error
	if held == nil {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	} else {
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// workloadOf is the workload of pod p.
func workloadOf(t *testing.T, p podRef) workload {
	for _, w := range workloads {
		if w.namespace == p.namespace {
			return w
		}
	}
	t.Fatalf("pod %s is no workload's", p)
	panic("unreachable")
}

// runProcessesIn points the scenario's processes at the pods held and
// replaces the exporter pod old (the simulator reads its scenario at
// start); it returns the new pod's name.
func (c *cluster) runProcessesIn(ctx context.Context, held []podRef, old string) string {
	c.t.Helper()
	c.writeScenario(ctx, held)
	if err := c.client.CoreV1().Pods(releaseNS).Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
		c.t.Fatal(err)
	}
	return c.waitExporterReady(ctx, old)
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
// uuid is the GPU's, device the ID the device plugin gave (a replica's).
type podRef struct{ namespace, name, uid, team, uuid, device string }

func (p podRef) String() string { return fmt.Sprintf("%s/%s:%s", p.namespace, p.name, p.device) }

// waitPodGone waits until the API server no longer has p (an evicted pod).
func (c *cluster) waitPodGone(ctx context.Context, p podRef) {
	c.t.Helper()
	if err := poll(2*time.Minute, time.Second, func() (bool, string, error) {
		_, err := c.client.CoreV1().Pods(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
		return err != nil, "evicted pod still there", nil
	}); err != nil {
		c.t.Fatalf("evicted pod: %v", err)
	}
}

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
			uuid, _, _ := strings.Cut(devs[0], "::")
			held = append(held, podRef{namespace: p.Namespace, name: p.Name, uid: string(p.UID), team: p.Labels[teamLabel], uuid: uuid, device: devs[0]})
		}
		return true, "", nil
	}); err != nil {
		t.Fatalf("GPU pods: %v\nevents:\n%s%s", err, c.events(ctx, workloads[0].namespace), c.events(ctx, workloads[1].namespace))
	}
	if held[0].uuid != held[1].uuid || held[0].device == held[1].device {
		t.Fatalf("pods hold %v, want two replicas of one GPU", held)
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

// checkAttribution waits until the exporter maps the pods (through the
// pod-resources API and the pod metadata, read with the service account's
// token: a failed read fails the whole mapping) in a mapping fetched after
// since, each GPU serving exactly the tenants tenantOf gives its pods
// (unassigned included in "no other"), and then checks in two scrapes
// that the tenants' figures on each GPU add up to the device's: SM and
// DRAM activity (each tenant's share above zero), energy (the increase of
// the tenants' and the idle counters, that of the GPU's) and memory (each
// tenant's the memory of its pod's process, their sum at most the GPU's
// used memory, which holds the driver's reserve too).
func (c *cluster) checkAttribution(ctx context.Context, held []podRef, since time.Time, tenantOf func(podRef) string) {
	t := c.t
	t.Helper()
	want := map[string][]string{} // GPU UUID -> tenants
	for _, p := range held {
		want[p.uuid] = append(want[p.uuid], tenantOf(p))
	}
	for _, ts := range want {
		sort.Strings(ts)
	}
	var m []sample
	err := poll(2*time.Minute, 2*time.Second, func() (bool, string, error) {
		m = c.scrape(ctx)
		up, _ := value(m, "vgpu_kubelet_pod_resources_up", nil)
		mapped, _ := value(m, "vgpu_kubelet_pods_mapped", nil)
		fetched, _ := value(m, "vgpu_kubelet_pod_resources_last_success_timestamp_seconds", nil)
		if up != 1 || mapped != float64(len(held)) || fetched < float64(since.UnixNano())/1e9 {
			return false, fmt.Sprintf("vgpu_kubelet_pod_resources_up %v, vgpu_kubelet_pods_mapped %v, mapping of %v (want after %v)",
				up, mapped, time.Unix(0, int64(fetched*1e9)), since), nil
		}
		for uuid, ts := range want {
			if got := tenantsOn(m, uuid); !slices.Equal(got, ts) {
				return false, fmt.Sprintf("GPU %s of %v: tenants with processes %v, want %v", uuid, held, got, ts), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatalf("attribution: %v", err)
	}
	// A second scrape of a later sample, for the energy counters.
	var m2 []sample
	if err := poll(time.Minute, time.Second, func() (bool, string, error) {
		m2 = c.scrape(ctx)
		for uuid := range want {
			e1, _ := value(m, "vgpu_gpu_energy_joules_total", map[string]string{"uuid": uuid})
			e2, _ := value(m2, "vgpu_gpu_energy_joules_total", map[string]string{"uuid": uuid})
			if e2 <= e1 {
				return false, fmt.Sprintf("GPU %s energy %v then %v", uuid, e1, e2), nil
			}
		}
		return true, "", nil
	}); err != nil {
		t.Fatalf("energy: %v", err)
	}
	_, procs := readScenario(t)
	for uuid, ts := range want {
		on := map[string]string{"uuid": uuid}
		for _, tenant := range ts {
			if _, ok := value(m, "vgpu_tenant_info", map[string]string{"tenant": tenant}); !ok {
				t.Errorf("vgpu_tenant_info{tenant=%q} missing", tenant)
			}
		}
		for _, fig := range []string{"sm_active_ratio", "dram_active_ratio"} {
			dev, ok := value(m, "vgpu_gpu_"+fig, on)
			if !ok {
				t.Errorf("vgpu_gpu_%s{uuid=%q} missing", fig, uuid)
				continue
			}
			sum := 0.0
			for _, s := range series(m, "vgpu_tenant_"+fig, on) {
				if !slices.Contains(ts, s.labels["tenant"]) && s.value != 0 {
					t.Errorf("GPU %s: tenant %q has vgpu_tenant_%s %v", uuid, s.labels["tenant"], fig, s.value)
				}
				if slices.Contains(ts, s.labels["tenant"]) && fig == "sm_active_ratio" && s.value <= 0 {
					t.Errorf("GPU %s: tenant %q has vgpu_tenant_%s %v", uuid, s.labels["tenant"], fig, s.value)
				}
				sum += s.value
			}
			if math.Abs(sum-dev) > 1e-9 {
				t.Errorf("GPU %s: tenants' vgpu_tenant_%s add up to %v, the device's is %v", uuid, fig, sum, dev)
			}
			t.Logf("GPU %s: vgpu_gpu_%s %v = sum of %v's", uuid, fig, dev, ts)
		}
		increase := func(name string, match map[string]string) float64 {
			sum := 0.0
			for _, s := range series(m2, name, match) {
				s1, _ := value(m, name, s.labels)
				sum += s.value - s1
			}
			return sum
		}
		dev := increase("vgpu_gpu_energy_joules_total", on)
		tenants := increase("vgpu_tenant_energy_joules_total", on)
		idle := increase("vgpu_tenant_idle_energy_joules_total", on)
		if math.Abs(tenants+idle-dev) > 1e-6*dev {
			t.Errorf("GPU %s: energy increase %v J, the tenants' %v J and idle %v J", uuid, dev, tenants, idle)
		}
		for _, tenant := range ts {
			if e := increase("vgpu_tenant_energy_joules_total", map[string]string{"uuid": uuid, "tenant": tenant}); e <= 0 {
				t.Errorf("GPU %s: tenant %q charged %v J", uuid, tenant, e)
			}
		}
		t.Logf("GPU %s: energy increase %v J = tenants' %v J + idle %v J", uuid, dev, tenants, idle)
		devMem, _ := value(m, "vgpu_gpu_memory_used_bytes", on)
		memSum := 0.0
		for _, p := range held {
			if p.uuid != uuid {
				continue
			}
			q, err := resource.ParseQuantity(strings.TrimSuffix(procs[workloadOf(t, p).process].Memory, "B"))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := value(m, "vgpu_tenant_memory_used_bytes", map[string]string{"uuid": uuid, "tenant": tenantOf(p)})
			if got != float64(q.Value()) {
				t.Errorf("GPU %s: tenant %q holds %v bytes, its pod's process %v", uuid, tenantOf(p), got, q.Value())
			}
		}
		for _, s := range series(m, "vgpu_tenant_memory_used_bytes", on) {
			memSum += s.value
		}
		if memSum <= 0 || memSum > devMem {
			t.Errorf("GPU %s: tenants hold %v bytes, the GPU %v", uuid, memSum, devMem)
		}
		t.Logf("GPU %s: tenants hold %v of the GPU's %v used bytes", uuid, memSum, devMem)
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
