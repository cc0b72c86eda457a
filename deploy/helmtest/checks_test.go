package helmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chartutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/vgpu-exporter/vgpu_exporter/deploy/internal/repo"
)

func checkDaemonSet(t *testing.T, ds *appsv1.DaemonSet, v chartutil.Values, p pool, flags map[string]bool) {
	t.Helper()
	pod := ds.Spec.Template.Spec
	backend, _ := v.PathValue("backend")
	sim := backend == "sim"
	if len(pod.NodeSelector) == 0 && !sim {
		t.Error("DaemonSet has no nodeSelector: it would run on every node, GPU or not")
	}
	if len(pod.Tolerations) == 0 {
		t.Error("DaemonSet tolerates no taint: tainted GPU nodes would get no exporter")
	}
	if want, _ := v.PathValue("hostPID"); pod.HostPID != want {
		t.Errorf("hostPID %v, values say %v", pod.HostPID, want)
	}
	volumes := map[string]corev1.Volume{}
	for _, vol := range pod.Volumes {
		volumes[vol.Name] = vol
	}
	exp := container(t, pod.Containers, "exporter")
	if ds.Spec.Selector == nil || ds.Spec.Selector.MatchLabels[poolLabel] != p.name ||
		ds.Spec.Template.Labels[poolLabel] != p.name {
		t.Errorf("DaemonSet %s: selector %v, pod labels %v; want both with %s=%q, so that pools' DaemonSets do not adopt each other's pods",
			ds.Name, ds.Spec.Selector, ds.Spec.Template.Labels, poolLabel, p.name)
	}
	if exp.Resources.Requests.Memory().IsZero() || exp.Resources.Limits.Memory().IsZero() {
		t.Errorf("exporter resources %v: want memory requests and limits", exp.Resources)
	}
	// The tuner's journal, its node lock and the MPS daemon's pipes are
	// written; nothing else, the simulator's built-in scenarios included
	// (read from the binary).
	writable := map[string]bool{"tuner-journal": true, "tuner-node-lock": true, "mps-pipe": true}
	mounts := map[string]corev1.VolumeMount{}
	for _, c := range pod.Containers {
		for _, vm := range c.VolumeMounts {
			if _, ok := volumes[vm.Name]; !ok {
				t.Errorf("container %s mounts volume %q, which the pod does not have", c.Name, vm.Name)
			}
			if !vm.ReadOnly && (c.Name != "exporter" || !writable[vm.Name]) {
				t.Errorf("container %s mounts %s writable", c.Name, vm.MountPath)
			}
			if c.Name == "exporter" {
				mounts[vm.MountPath] = vm
			}
		}
	}
	mounted := func(mountPath string) (corev1.Volume, bool) {
		t.Helper()
		vm, ok := mounts[mountPath]
		if !ok {
			t.Errorf("exporter does not mount %s", mountPath)
		}
		return volumes[vm.Name], ok
	}
	hostMount := func(mountPath, hostPath string) {
		t.Helper()
		if vol, ok := mounted(mountPath); ok && (vol.HostPath == nil || vol.HostPath.Path != hostPath) {
			t.Errorf("%s is mounted from %+v, want hostPath %s", mountPath, vol.VolumeSource, hostPath)
		}
	}
	hostMount("/host/proc", "/proc")
	args := strings.Join(exp.Args, " ")
	if !slices.Contains(exp.Args, "--backend="+fmt.Sprint(backend)) || strings.Count(args, "--backend=") != 1 {
		t.Errorf("exporter args %q: want --backend=%v once", args, backend)
	}
	if vol, ok := mounts["/tmp"]; ok {
		t.Errorf("backend %v: /tmp mounted from %+v; nothing writes there", backend, vol)
	}
	if !strings.Contains(args, "--proc.root=/host/proc") {
		t.Errorf("exporter args %q lack --proc.root=/host/proc", args)
	}
	if on, _ := v.PathValue("kubernetes.podResources.enabled"); on == true {
		hostMount("/var/lib/kubelet/pod-resources", "/var/lib/kubelet/pod-resources")
		if !strings.Contains(args, "--kubernetes.pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock") {
			t.Errorf("exporter args %q lack the pod-resources socket", args)
		}
		if def, _ := v.PathValue("tenants.kubernetesDefault"); !slices.Contains(exp.Args, fmt.Sprint("--tenants.kubernetes-default=", def)) {
			t.Errorf("exporter args %q lack --tenants.kubernetes-default=%v", args, def)
		}
	}
	for _, a := range repo.UnknownFlags(flags, exp.Args) {
		t.Errorf("exporter arg %q is not a flag of vgpu_exporter", a)
	}
	checkTuner(t, ds, exp, p.tuner, mounted, hostMount)
	if l := argsWithPrefix(exp.Args, "--tuner.node-lock="); p.tuner.enforce() && !sim {
		hp, _ := p.tuner.sub("nodeLock")["hostPath"].(string)
		if len(l) != 1 {
			t.Errorf("DaemonSet %s: enforce without --tuner.node-lock", ds.Name)
		} else {
			hostMount(filepath.Dir(strings.TrimPrefix(l[0], "--tuner.node-lock=")), hp)
		}
	} else if len(l) > 0 || volumes["tuner-node-lock"].Name != "" {
		t.Errorf("DaemonSet %s: a node lock %q, yet nothing acts on the node's GPUs", ds.Name, l)
	}
	// Every capability dropped; the exporter gets SYS_ADMIN back only for
	// the profiling counters and for clocks and power in enforce.
	profiling, _ := v.PathValue("profilingCapability")
	sysAdmin := !sim && (profiling == true || p.tuner.enforce() && p.tuner["tuneClocksAndPower"] == true)
	if (sysAdmin || p.tuner.enforce()) && (exp.SecurityContext.RunAsUser == nil || *exp.SecurityContext.RunAsUser != 0) {
		t.Errorf("DaemonSet %s: exporter runs as %v; SYS_ADMIN and the tuner in enforce need uid 0", ds.Name, exp.SecurityContext.RunAsUser)
	}
	for _, c := range pod.Containers {
		var want []corev1.Capability
		if c.Name == "exporter" && sysAdmin {
			want = []corev1.Capability{"SYS_ADMIN"}
		}
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || !slices.Equal(sc.Capabilities.Add, want) {
			t.Errorf("container %s: securityContext %+v, want no privilege escalation, every capability dropped and %v added", c.Name, sc, want)
		}
	}
}

// checkNodeSelector: a values file's nodeSelector is the pods' whole
// nodeSelector (none given: with backend nvml the GPU nodes, as GPU feature
// discovery labels them; with sim every node), with a node pool's keys set
// (null ones removed).
func checkNodeSelector(t *testing.T, ds *appsv1.DaemonSet, vals map[string]any, v chartutil.Values, p pool) {
	t.Helper()
	given, ok := vals["nodeSelector"].(map[string]any)
	if !ok {
		given, _ = v["nodeSelector"].(map[string]any)
	}
	if backend, _ := v.PathValue("backend"); len(given) == 0 && backend == "nvml" {
		given = map[string]any{"nvidia.com/gpu.present": "true"}
	}
	want := map[string]string{}
	for _, sel := range []map[string]any{given, p.nodeSelector} {
		for k, v := range sel {
			if v != nil {
				want[k] = fmt.Sprint(v)
			} else {
				delete(want, k)
			}
		}
	}
	if got := ds.Spec.Template.Spec.NodeSelector; !reflect.DeepEqual(got, want) && len(got)+len(want) > 0 {
		t.Errorf("DaemonSet %s: nodeSelector %v, the values file says %v", ds.Name, got, want)
	}
}

func container(t *testing.T, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

// argsWithPrefix are the args that begin with prefix, in order.
func argsWithPrefix(args []string, prefix string) []string {
	var out []string
	for _, a := range args {
		if strings.HasPrefix(a, prefix) {
			out = append(out, a)
		}
	}
	return out
}

// checkRBAC: no API access unless pod metadata or the eviction hook is
// on, and then only the grants they need.
func checkRBAC(t *testing.T, m *manifests, v chartutil.Values, pools map[string]pool) {
	t.Helper()
	var want []rbacv1.PolicyRule
	if on, _ := v.PathValue("kubernetes.podMetadata.enabled"); on == true {
		source, _ := v.PathValue("kubernetes.podMetadata.source")
		if sub, _ := v.PathValue("kubernetes.podMetadata.kubeletSubresource"); source == "kubelet" && sub == "pods" {
			source = "kubelet pods" // the fine-grained grant, /pods alone
		}
		want = append(want, map[any]rbacv1.PolicyRule{
			"apiserver":    {APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
			"kubelet":      {APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get"}},
			"kubelet pods": {APIGroups: []string{""}, Resources: []string{"nodes/pods"}, Verbs: []string{"get"}},
		}[source])
	}
	evicting := map[string]bool{}
	for name, p := range pools {
		if p.tuner.enforce() && p.tuner.sub("rebalanceHook")["command"] != "" && p.tuner.sub("rebalanceHook")["evictPods"] == true {
			evicting[name] = true
		}
	}
	if len(evicting) > 0 {
		want = append(want, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}})
	}
	meta, _ := v.PathValue("kubernetes.podMetadata.enabled")
	for _, ds := range m.daemonSets {
		pod := ds.Spec.Template.Spec
		token := meta == true || evicting[ds.Labels[poolLabel]]
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken != token {
			t.Errorf("DaemonSet %s: automountServiceAccountToken %v, want %v (only pod metadata and the eviction hook use the token)",
				ds.Name, pod.AutomountServiceAccountToken, token)
		}
		if len(pod.Containers) != 1 && !slices.ContainsFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == "tenants-reloader" }) {
			t.Errorf("DaemonSet %s: containers %d; only the tenants reloader may run beside the exporter", ds.Name, len(pod.Containers))
		}
	}
	if len(want) == 0 {
		if len(m.clusterRoles)+len(m.bindings) > 0 {
			t.Errorf("RBAC rendered though nothing talks to the API server: %d ClusterRoles, %d bindings", len(m.clusterRoles), len(m.bindings))
		}
		return
	}
	if len(m.clusterRoles) != 1 || !reflect.DeepEqual(m.clusterRoles[0].Rules, want) {
		t.Errorf("ClusterRoles %+v, want one with the rules %+v", m.clusterRoles, want)
	}
	sa := m.daemonSets[0].Spec.Template.Spec.ServiceAccountName
	if len(m.bindings) != 1 || m.bindings[0].Subjects[0].Name != sa ||
		m.bindings[0].Subjects[0].Namespace != namespace {
		t.Errorf("ClusterRoleBindings %+v do not bind the pods' service account %s", m.bindings, sa)
	}
}

// poolLabel tells apart the DaemonSets of node pools.
const poolLabel = "vgpu-exporter/node-pool"

// tunerValues are a node pool's tuner settings.
type tunerValues map[string]any

func (tv tunerValues) sub(k string) map[string]any {
	m, _ := tv[k].(map[string]any)
	return m
}

func (tv tunerValues) mode() string {
	if m, ok := tv["mode"].(string); ok {
		return m
	}
	return "off" // unset, or an unquoted YAML off (false)
}

func (tv tunerValues) gpuModes() []string {
	var out []string
	l, _ := tv["gpuModes"].([]any)
	for _, g := range l {
		out = append(out, fmt.Sprint(g))
	}
	return out
}

func (tv tunerValues) active() bool { return tv.mode() != "off" || len(tv.gpuModes()) > 0 }

func (tv tunerValues) enforce() bool {
	return tv.mode() == "enforce" || slices.ContainsFunc(tv.gpuModes(), func(g string) bool { return strings.HasSuffix(g, "=enforce") })
}

// pool is one node pool as the values describe it; "" the release's only
// one when nodePools is empty.
type pool struct {
	name         string
	nodeSelector map[string]any
	tuner        tunerValues
}

// poolsOf reads the node pools, each with the release's tuner settings
// under its own (maps one level deep).
func poolsOf(t *testing.T, v chartutil.Values) map[string]pool {
	t.Helper()
	base, _ := v["tuner"].(map[string]any)
	given, _ := v["nodePools"].([]any)
	if len(given) == 0 {
		given = []any{map[string]any{"name": ""}}
	}
	out := map[string]pool{}
	for _, g := range given {
		gm := g.(map[string]any)
		tv := tunerValues{}
		for k, val := range base {
			tv[k] = val
		}
		over, _ := gm["tuner"].(map[string]any)
		for k, val := range over {
			sub, isMap := val.(map[string]any)
			if baseSub, ok := base[k].(map[string]any); ok && isMap {
				merged := map[string]any{}
				for k2, v2 := range baseSub {
					merged[k2] = v2
				}
				for k2, v2 := range sub {
					merged[k2] = v2
				}
				val = merged
			}
			tv[k] = val
		}
		sel, _ := gm["nodeSelector"].(map[string]any)
		name, _ := gm["name"].(string)
		out[name] = pool{name: name, nodeSelector: sel, tuner: tv}
	}
	return out
}

// checkTuner: the tuner's flags, mounts and environment are those of the
// pool's mode, and nothing of it is there when the tuner is off.
func checkTuner(t *testing.T, ds *appsv1.DaemonSet, exp corev1.Container, tv tunerValues,
	mounted func(string) (corev1.Volume, bool), hostMount func(string, string)) {
	t.Helper()
	arg := func(flag string) (string, bool) {
		for _, a := range exp.Args {
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				return v, true
			}
		}
		return "", false
	}
	env := map[string]string{}
	for _, e := range exp.Env {
		env[e.Name] = e.Value
	}
	vols := map[string]bool{}
	for _, vol := range ds.Spec.Template.Spec.Volumes {
		vols[vol.Name] = true
	}
	if !tv.active() {
		for _, a := range exp.Args {
			if strings.HasPrefix(a, "--tuner.") || strings.HasPrefix(a, "--mps.") || strings.HasPrefix(a, "--nvidia-smi.") {
				t.Errorf("DaemonSet %s: tuner off, yet the arg %q", ds.Name, a)
			}
		}
		for _, n := range []string{"tuner-journal", "tuner-node-lock", "kill-switch", "mps-pipe"} {
			if vols[n] {
				t.Errorf("DaemonSet %s: tuner off, yet the volume %s", ds.Name, n)
			}
		}
		return
	}
	if m, _ := arg("--tuner.mode"); m != tv.mode() {
		t.Errorf("DaemonSet %s: --tuner.mode=%q, the values say %q", ds.Name, m, tv.mode())
	}
	if hp, _ := tv.sub("journal")["hostPath"].(string); hp != "" {
		j, _ := arg("--tuner.journal")
		hostMount(filepath.Dir(j), hp)
	} else if tv.enforce() {
		t.Errorf("DaemonSet %s: enforce without a journal on the node", ds.Name)
	}
	ks := tv.sub("killSwitch")
	if f, ok := arg("--tuner.kill-switch-file"); ks["source"] != "none" {
		if filepath.Base(f) != ks["file"] {
			t.Errorf("DaemonSet %s: --tuner.kill-switch-file=%q, want the file %v", ds.Name, f, ks["file"])
		}
		switch ks["source"] {
		case "hostPath":
			hostMount(filepath.Dir(f), ks["hostPath"].(string))
		case "configMap":
			if vol, ok := mounted(filepath.Dir(f)); ok && (vol.ConfigMap == nil || vol.ConfigMap.Optional == nil || !*vol.ConfigMap.Optional) {
				t.Errorf("DaemonSet %s: kill switch from %+v, want an optional ConfigMap (created to engage it)", ds.Name, vol.VolumeSource)
			}
		}
	} else if ok {
		t.Errorf("DaemonSet %s: kill switch none, yet --tuner.kill-switch-file=%s", ds.Name, f)
	}
	mps := tv.sub("mps")
	if bin, _ := arg("--mps.control-binary"); mps["enabled"] == true {
		pipe := mps["pipeDirectory"].(string)
		hostMount(pipe, pipe)
		if d, _ := arg("--mps.pipe-directory"); d != pipe || bin == "" {
			t.Errorf("DaemonSet %s: --mps.pipe-directory=%q --mps.control-binary=%q, want %s and a binary", ds.Name, d, bin, pipe)
		}
		if !strings.Contains(env["NVIDIA_DRIVER_CAPABILITIES"], "compute") {
			t.Errorf("DaemonSet %s: NVIDIA_DRIVER_CAPABILITIES=%q lacks compute (which injects nvidia-cuda-mps-control)", ds.Name, env["NVIDIA_DRIVER_CAPABILITIES"])
		}
	} else if bin != "" || vols["mps-pipe"] {
		t.Errorf("DaemonSet %s: MPS off, yet --mps.control-binary=%q (empty disables it) or the pipe mounted", ds.Name, bin)
	}
}

func checkMonitoring(t *testing.T, m *manifests, v chartutil.Values) {
	t.Helper()
	if len(m.services) != 1 {
		t.Fatalf("%d Services, want 1", len(m.services))
	}
	if len(m.serviceMonitors) != 1 {
		t.Fatalf("%d ServiceMonitors, want 1", len(m.serviceMonitors))
	}
	sm := m.serviceMonitors[0]
	if !reflect.DeepEqual(sm.Spec.Selector.MatchLabels, m.services[0].Spec.Selector) {
		t.Errorf("ServiceMonitor selects %v; the Service's pods are %v", sm.Spec.Selector.MatchLabels, m.services[0].Spec.Selector)
	}
	for k, want := range m.services[0].Spec.Selector {
		if m.services[0].Labels[k] != want {
			t.Errorf("Service lacks the label %s=%s its ServiceMonitor selects", k, want)
		}
	}
	ep := sm.Spec.Endpoints[0]
	interval, _ := v.PathValue("serviceMonitor.interval")
	timeout, _ := v.PathValue("serviceMonitor.scrapeTimeout")
	if string(ep.Interval) != interval || string(ep.ScrapeTimeout) != timeout {
		t.Errorf("ServiceMonitor interval %s, timeout %s; values say %v, %v", ep.Interval, ep.ScrapeTimeout, interval, timeout)
	}
	if ep.Port != m.services[0].Spec.Ports[0].Name {
		t.Errorf("ServiceMonitor scrapes port %q; the Service's is %q", ep.Port, m.services[0].Spec.Ports[0].Name)
	}
	checkJob(t, m, ep.RelabelConfigs)
}

// jobSelector is a job matcher in a rule's or a panel's PromQL.
var jobSelector = regexp.MustCompile(`job\s*=~?\s*\\?"([^"\\]*)\\?"`)

// checkJob: the job label the ServiceMonitor's relabelings leave on the
// series (the Prometheus Operator's own is the Service's name) is the one
// every rule and dashboard of the chart selects.
func checkJob(t *testing.T, m *manifests, relabel []monitoringv1.RelabelConfig) {
	t.Helper()
	job := "" // the Operator's, unless a relabeling sets it
	for _, r := range relabel {
		if r.TargetLabel == "job" && len(r.SourceLabels) == 0 && r.Replacement != nil {
			job = *r.Replacement
		}
	}
	var docs []string
	for _, r := range m.rules {
		for _, g := range r.Spec.Groups {
			for _, rule := range g.Rules {
				docs = append(docs, rule.Expr.String())
			}
		}
	}
	for _, cm := range m.configMaps {
		for _, d := range cm.Data {
			docs = append(docs, d)
		}
	}
	selected := 0
	for _, d := range docs {
		for _, sel := range jobSelector.FindAllStringSubmatch(d, -1) {
			if strings.HasPrefix(sel[1], "$") {
				continue // a dashboard's variable, itself read with the job matcher
			}
			selected++
			if sel[1] != job {
				t.Errorf("a rule or dashboard selects job=%q; the ServiceMonitor's series have job=%q (a relabeling of its own, or the Service's name): %.120s", sel[1], job, d)
				return
			}
		}
	}
	if len(m.rules) > 0 && selected == 0 {
		t.Error("no rule selects the exporter's job: checkJob found nothing to check")
	}
}

// checkTenants runs the exporter's own check on the rendered tenants file.
func checkTenants(t *testing.T, m *manifests) {
	t.Helper()
	for _, cm := range m.configMaps {
		content, ok := cm.Data["tenants.yaml"]
		if !ok {
			continue
		}
		f := filepath.Join(t.TempDir(), "tenants.yaml")
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(repo.Exporter(t), "--config.check="+f).CombinedOutput(); err != nil {
			t.Errorf("rendered tenants file fails --config.check: %v\n%s\n%s", err, out, content)
		}
	}
}
