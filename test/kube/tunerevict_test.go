//go:build kube

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The exporter's own tuner moving a pod: its slow loop plans the move of
// the training job off chat's GPU (scenario placement-spare), the executor
// hands the plan to the built-in eviction (on the simulator backend, the
// eviction of the real pod, then the move in the simulation), and the
// Deployment recreates the pod. The tenants file gives chat its SLO and
// latency source and the training job its class; the slow loop's timings
// are shortened by its flags, and the fast loop's knobs on this GPU are
// disabled, so that the slow loop is the only remedy.
const (
	tunerInterval = 5 * time.Second
	slowLoopEvery = 10 * time.Second
	// the cool-down after the refused plan: the window in which a retry
	// loop would show, and the wait for the plan without the budget
	slowLoopCoolDown = 2 * time.Minute
	// how long the refusal is watched for a retry
	refusalWatch = time.Minute
)

// tunerTenants is the tenants file of the step: the scenario's chat and
// train tenants, selected by their pods' namespaces.
func tunerTenants() string {
	ns := map[string]string{}
	for _, w := range workloads {
		ns[w.process] = w.namespace
	}
	cfg := map[string]any{
		"defaults": map[string]any{"scrape_interval": "5s"},
		"tenants": []any{
			map[string]any{"name": "chat", "class": "latency", "priority": 10,
				"selectors":      []any{map[string]any{"kubernetes": map[string]any{"namespace": ns["chat"]}}},
				"slo":            map[string]any{"quantile": 0.99, "target": "8s"},
				"latency_source": map[string]any{"url": "sim://chat", "preset": "vllm-e2e"}},
			map[string]any{"name": "train", "class": "batch", "priority": 1,
				"selectors": []any{map[string]any{"kubernetes": map[string]any{"namespace": ns["train"]}}}},
		},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// createBudget makes a PodDisruptionBudget in ns that allows no
// disruption of its worker pod, waits until the disruption controller says
// so, and returns its deletion.
func (c *cluster) createBudget(ctx context.Context, ns string) func() {
	t := c.t
	t.Helper()
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &one,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "worker"}},
		},
	}
	pdbs := c.client.PolicyV1().PodDisruptionBudgets(ns)
	if _, err := pdbs.Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := poll(time.Minute, time.Second, func() (bool, string, error) {
		got, err := pdbs.Get(ctx, pdb.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		st := got.Status
		return st.ObservedGeneration == got.Generation && st.CurrentHealthy == 1 && st.DisruptionsAllowed == 0,
			fmt.Sprintf("healthy %d, disruptions allowed %d", st.CurrentHealthy, st.DisruptionsAllowed), nil
	}); err != nil {
		t.Fatalf("PodDisruptionBudget: %v", err)
	}
	return func() {
		t.Helper()
		if err := pdbs.Delete(ctx, pdb.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// evictionRequests counts the API server's Eviction requests by HTTP
// code, from its own metrics (apiserver_request_total).
func (c *cluster) evictionRequests(ctx context.Context) map[string]float64 {
	c.t.Helper()
	body, err := c.client.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		c.t.Fatalf("API server /metrics: %v", err)
	}
	out := map[string]float64{}
	for _, s := range series(parseMetrics(string(body)), "apiserver_request_total", map[string]string{"resource": "pods", "subresource": "eviction"}) {
		out[s.labels["code"]] += s.value
	}
	return out
}

// exporterLog is the log of the exporter pod name, and its lines holding
// every one of has.
func (c *cluster) exporterLog(ctx context.Context, name string, has ...string) []string {
	c.t.Helper()
	b, err := c.client.CoreV1().Pods(releaseNS).GetLogs(name, &corev1.PodLogOptions{Container: "exporter"}).DoRaw(ctx)
	if err != nil {
		c.t.Fatalf("log of %s: %v", name, err)
	}
	var out []string
next:
	for line := range strings.Lines(string(b)) {
		for _, h := range has {
			if !strings.Contains(line, h) {
				continue next
			}
		}
		out = append(out, strings.TrimSpace(line))
	}
	return out
}

// journalEvents counts the events of the tuner journal (on the node, at
// the release's tuner.journal.hostPath) of knob's target since since.
func (c *cluster) journalEvents(knob string, since time.Time) map[string]int {
	c.t.Helper()
	b, err := os.ReadFile(c.path("tuner-journal", "tuner-journal.jsonl"))
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]int{}
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), " ", 4) // J1 LEN CRC {json}
		if len(f) != 4 {
			continue
		}
		var r struct {
			Time   time.Time `json:"time"`
			Event  string    `json:"event"`
			Target struct {
				Knob string `json:"knob"`
			} `json:"target"`
		}
		if json.Unmarshal([]byte(f[3]), &r) == nil && r.Target.Knob == knob && !r.Time.Before(since) {
			out[r.Event]++
		}
	}
	return out
}

// placementOutcomes are the exporter's vgpu_tuner_actions_total of the
// placement knob by outcome.
func (c *cluster) placementOutcomes(ctx context.Context) map[string]float64 {
	out := map[string]float64{}
	for _, s := range series(c.scrape(ctx), "vgpu_tuner_actions_total", map[string]string{"knob": "placement"}) {
		out[s.labels["outcome"]] = s.value
	}
	return out
}

// checkTunerEviction has the exporter's tuner move the training job's pod
// (held: the workloads' pods; old: the exporter pod): under a budget that
// allows no disruption, the tuner's eviction is refused, reported once
// (one Eviction request, one decision logged, counted and journaled, no
// retry for refusalWatch) and the pod keeps its UID; without the budget
// the tuner's next plan evicts it and the Deployment recreates it. It
// returns the GPUs held afterwards.
func (c *cluster) checkTunerEviction(ctx context.Context, h *helm, held []podRef, old string) []podRef {
	t := c.t
	t.Helper()
	var p podRef
	for _, q := range held {
		if workloadOf(t, q).process == "train" {
			p = q
		}
	}
	dropBudget := c.createBudget(ctx, p.namespace)
	before, err := c.client.CoreV1().Pods(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	requests := c.evictionRequests(ctx)
	began := time.Now().Add(-time.Second).UTC()
	h.run(ctx, "upgrade", release, h.chart, "-n", releaseNS, "--reuse-values",
		"--set", "tuner.interval="+tunerInterval.String(),
		"--set-json", "tenants.config="+tunerTenants(),
		"--set", "tuner.slowLoop.every="+slowLoopEvery.String(),
		"--set", "tuner.slowLoop.dwell=30s",
		"--set", "tuner.slowLoop.coolDown="+slowLoopCoolDown.String(),
		"--set-json", `extraArgs=["--tuner.disable-knob=mps_active_threads","--tuner.disable-knob=locked_clocks","--tuner.disable-knob=power_limit"]`)
	pod := c.waitExporterReady(ctx, old)
	ready := time.Now()
	for _, l := range c.exporterLog(ctx, pod, "rebalancing hook on the simulator") {
		t.Logf("exporter: %s", l)
	}
	if v, _ := value(c.scrape(ctx), "vgpu_tuner_actuator_info", map[string]string{"knob": "placement", "backend": "rebalance-hook"}); v != 1 {
		t.Fatalf("vgpu_tuner_actuator_info{knob=\"placement\",backend=\"rebalance-hook\"} %v, want 1: the built-in eviction not wired on the simulator", v)
	}

	// Under the budget: the plan is refused once.
	var outcomes map[string]float64
	if err := poll(6*time.Minute, 2*time.Second, func() (bool, string, error) {
		outcomes = c.placementOutcomes(ctx)
		if outcomes["applied"]+outcomes["failed"] > 0 {
			return false, "", fmt.Errorf("placement outcomes %v under the budget", outcomes)
		}
		return outcomes["refused"] > 0, fmt.Sprintf("placement outcomes %v", outcomes), nil
	}); err != nil {
		t.Fatalf("the tuner's eviction under the budget: %v\nexporter log:\n%s", err, strings.Join(c.exporterLog(ctx, pod, "tuner"), "\n"))
	}
	t.Logf("tuner's plan refused %v after the exporter was Ready", time.Since(ready).Round(time.Second))
	time.Sleep(refusalWatch)
	outcomes = c.placementOutcomes(ctx)
	got := c.evictionRequests(ctx)
	decisions := c.exporterLog(ctx, pod, `msg="tuner decision"`, "knob=placement")
	journal := c.journalEvents("placement", began)
	for _, l := range decisions {
		t.Logf("exporter: %s", l)
	}
	t.Logf("after %v: vgpu_tuner_actions_total{knob=placement} %v; API server Eviction requests %v (before %v); journal %v",
		refusalWatch, outcomes, got, requests, journal)
	if outcomes["refused"] != 1 || outcomes["applied"]+outcomes["failed"] != 0 ||
		got["429"]-requests["429"] != 1 || got["201"]+got["200"] != requests["201"]+requests["200"] ||
		len(decisions) != 1 || !strings.Contains(decisions[0], "outcome=refused") || !strings.Contains(decisions[0], "eviction of "+p.namespace+"/"+p.name) ||
		!strings.Contains(decisions[0], "PodDisruptionBudget") || journal["planned"] != 1 || journal["refused"] != 1 {
		t.Fatalf("the tuner's eviction under a budget must be refused and reported once, not retried within %v", refusalWatch)
	}
	after, err := c.client.CoreV1().Pods(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
	if err != nil || after.UID != before.UID || after.DeletionTimestamp != nil {
		t.Fatalf("pod %s/%s was disrupted despite its budget: %v", p.namespace, p.name, err)
	}

	// Without the budget: the next plan, after the cool-down, evicts it.
	dropBudget()
	if err := poll(slowLoopCoolDown+3*time.Minute, 2*time.Second, func() (bool, string, error) {
		outcomes = c.placementOutcomes(ctx)
		return outcomes["applied"] > 0, fmt.Sprintf("placement outcomes %v", outcomes), nil
	}); err != nil {
		t.Fatalf("the tuner's eviction without the budget: %v\nexporter log:\n%s", err, strings.Join(c.exporterLog(ctx, pod, "tuner"), "\n"))
	}
	c.waitPodGone(ctx, p)
	now := c.waitGPUsHeld(ctx)
	got = c.evictionRequests(ctx)
	decisions = c.exporterLog(ctx, pod, `msg="tuner decision"`, "knob=placement")
	evicted := c.exporterLog(ctx, pod, `msg="evicted pod"`)
	journal = c.journalEvents("placement", began)
	for _, l := range append(decisions, evicted...) {
		t.Logf("exporter: %s", l)
	}
	t.Logf("vgpu_tuner_actions_total{knob=placement} %v; API server Eviction requests %v (before %v); journal %v", outcomes, got, requests, journal)
	if outcomes["refused"] != 1 || outcomes["applied"] != 1 || outcomes["failed"] != 0 || got["429"]-requests["429"] != 1 ||
		got["201"]+got["200"]-requests["201"]-requests["200"] != 1 || len(decisions) != 2 || !strings.Contains(decisions[1], "outcome=applied") ||
		len(evicted) != 1 || !strings.Contains(evicted[0], "pod="+p.namespace+"/"+p.name) || journal["applied"] != 1 {
		t.Fatalf("the tuner's eviction without a budget: one Eviction accepted, one applied decision, want them")
	}
	for _, q := range now {
		if q.namespace != p.namespace {
			continue
		}
		np, err := c.client.CoreV1().Pods(q.namespace).Get(ctx, q.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if q.name == p.name || np.UID == before.UID || len(np.OwnerReferences) == 0 || np.OwnerReferences[0].Kind != "ReplicaSet" || np.Status.Phase != corev1.PodRunning {
			t.Fatalf("pod %s (UID %s) is not a new Running pod of the Deployment: %s", q, np.UID, describePod(np))
		}
		t.Logf("pod %s/%s (UID %s) evicted by the tuner; the Deployment's new pod %s (UID %s) Running", p.namespace, p.name, before.UID, q.name, np.UID)
	}
	return now
}
