// Package helmtest renders the vgpu-exporter Helm chart with Helm's own
// library and decodes every manifest strictly into the Kubernetes and
// Prometheus Operator API types.
package helmtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/vgpu-exporter/vgpu_exporter/deploy/internal/repo"
)

const namespace = "monitoring"

func chartDir() string { return filepath.Join(repo.Root(), "deploy", "helm", "vgpu-exporter") }

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.LoadDir(chartDir())
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return c
}

// schemaDefinition is the schema's definitions/def, compiled as Helm
// compiles the chart's schema.
func schemaDefinition(t testing.TB, def string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	if err := c.AddResource("values.json", map[string]any{"$schema": "http://json-schema.org/draft-07/schema#",
		"definitions": schemaNode(t, "definitions"), "$ref": "#/definitions/" + def}); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("values.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// schemaNode is the part of values.schema.json at path (keys, from the top).
func schemaNode(t testing.TB, path ...string) any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir(), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var node any
	if err := json.Unmarshal(raw, &node); err != nil {
		t.Fatal(err)
	}
	for _, k := range path {
		m, _ := node.(map[string]any)
		if node = m[k]; node == nil {
			t.Fatalf("values.schema.json has no %s", strings.Join(path, "."))
		}
	}
	return node
}

// render renders the chart as `helm install` would into a cluster with the
// Prometheus Operator's CRDs, schema validation included, with templates
// that refer to a missing value failing.
func render(c *chart.Chart, vals map[string]any) (map[string]string, error) {
	return renderOn(c, vals, capabilities(true))
}

// capabilities are those of a cluster serving the Prometheus Operator's
// API (monitoring.coreos.com/v1) or not.
func capabilities(monitoring bool) *chartutil.Capabilities {
	caps := *chartutil.DefaultCapabilities
	caps.APIVersions = slices.Clone(caps.APIVersions)
	if monitoring {
		caps.APIVersions = append(caps.APIVersions, "monitoring.coreos.com/v1",
			"monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule")
	}
	return &caps
}

// renderOn is render on a cluster with caps.
func renderOn(c *chart.Chart, vals map[string]any, caps *chartutil.Capabilities) (map[string]string, error) {
	return renderRelease(c, vals, caps, "vgpu-exporter", namespace)
}

// renderRelease is renderOn for the release name in namespace ns.
func renderRelease(c *chart.Chart, vals map[string]any, caps *chartutil.Capabilities, name, ns string) (map[string]string, error) {
	rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{
		Name: name, Namespace: ns, Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		return nil, err
	}
	return engine.Engine{Strict: true}.Render(c, rv)
}

// mustRender renders and decodes, failing the test on an error.
func mustRender(t *testing.T, c *chart.Chart, vals map[string]any) *manifests {
	t.Helper()
	rendered, err := render(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decode(rendered)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// manifests is what a rendering produced, decoded.
type manifests struct {
	daemonSets      []*appsv1.DaemonSet
	services        []*corev1.Service
	serviceAccounts []*corev1.ServiceAccount
	configMaps      []*corev1.ConfigMap
	clusterRoles    []*rbacv1.ClusterRole
	bindings        []*rbacv1.ClusterRoleBinding
	serviceMonitors []*monitoringv1.ServiceMonitor
	rules           []*monitoringv1.PrometheusRule
}

// strict decodes one manifest into out; a field out's type does not have is
// an error.
func strict[T any](name string, doc []byte, out *T) (*T, error) {
	if err := yaml.UnmarshalStrict(doc, out); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// decode splits every rendered template into documents and decodes each
// strictly into the API type of its kind.
func decode(rendered map[string]string) (*manifests, error) {
	m := &manifests{}
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		r := k8syaml.NewYAMLReader(bufio.NewReader(strings.NewReader(rendered[name])))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if err := m.add(name, tm, doc); err != nil {
				return nil, err
			}
		}
	}
	if len(m.daemonSets) == 0 {
		return nil, errors.New("no DaemonSet rendered")
	}
	return m, nil
}

func (m *manifests) add(name string, tm metav1.TypeMeta, doc []byte) error {
	var err error
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 DaemonSet":
		err = appendStrict(name, doc, &m.daemonSets)
	case "v1 Service":
		err = appendStrict(name, doc, &m.services)
	case "v1 ServiceAccount":
		err = appendStrict(name, doc, &m.serviceAccounts)
	case "v1 ConfigMap":
		err = appendStrict(name, doc, &m.configMaps)
	case "rbac.authorization.k8s.io/v1 ClusterRole":
		err = appendStrict(name, doc, &m.clusterRoles)
	case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
		err = appendStrict(name, doc, &m.bindings)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		err = appendStrict(name, doc, &m.serviceMonitors)
	case "monitoring.coreos.com/v1 PrometheusRule":
		err = appendStrict(name, doc, &m.rules)
	default:
		return fmt.Errorf("%s: unexpected kind %q of apiVersion %q", name, tm.Kind, tm.APIVersion)
	}
	return err
}

func appendStrict[T any](name string, doc []byte, list *[]*T) error {
	v, err := strict(name, doc, new(T))
	if err == nil {
		*list = append(*list, v)
	}
	return err
}

var commentLine = regexp.MustCompile(`(?m)^\s*#.*$`)

func stripComments(doc []byte) []byte { return commentLine.ReplaceAll(doc, nil) }

// examples are the documented values files: the chart's defaults and
// every file of examples/.
func examples(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir(), "examples", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("examples/*.yaml: %v, %d files (want at least 3)", err, len(files))
	}
	out := map[string]map[string]any{"defaults": nil}
	for _, f := range files {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out["examples/"+filepath.Base(f)] = v
	}
	return out
}

func TestRenderExamples(t *testing.T) {
	c := loadChart(t)
	flags := exporterFlags(t)
	for name, vals := range examples(t) {
		t.Run(name, func(t *testing.T) {
			rendered, err := render(c, vals)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			m, err := decode(rendered)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			v, err := chartutil.CoalesceValues(c, vals)
			if err != nil {
				t.Fatal(err)
			}
			pools := poolsOf(t, v)
			if len(m.daemonSets) != len(pools) {
				t.Fatalf("%d DaemonSets for %d node pools", len(m.daemonSets), len(pools))
			}
			for _, ds := range m.daemonSets {
				p, ok := pools[ds.Labels[poolLabel]]
				if !ok {
					t.Fatalf("DaemonSet %s is of no node pool (label %s=%q)", ds.Name, poolLabel, ds.Labels[poolLabel])
				}
				checkDaemonSet(t, ds, v, p, flags)
				checkNodeSelector(t, ds, vals, v, p)
			}
			checkRBAC(t, m, v, pools)
			checkMonitoring(t, m, v)
			checkTenants(t, m)
		})
	}
}

func TestTenantsReload(t *testing.T) {
	c := loadChart(t)
	checksum := func(tenant string, reload string) string {
		t.Helper()
		m := mustRender(t, c, map[string]any{"tenants": map[string]any{
			"reload": reload,
			"config": map[string]any{"tenants": []any{map[string]any{"name": tenant, "selectors": []any{map[string]any{"uid": 1000}}}}},
		}})
		names := []string{}
		for _, c := range m.daemonSets[0].Spec.Template.Spec.Containers {
			names = append(names, c.Name)
		}
		if got := slices.Contains(names, "tenants-reloader"); got != (reload == "sidecar") {
			t.Errorf("reload %s: containers %v", reload, names)
		}
		return m.daemonSets[0].Spec.Template.Annotations["checksum/tenants"]
	}
	a, b, a2 := checksum("a", "rollout"), checksum("b", "rollout"), checksum("a", "rollout")
	if a == "" || a == b || a != a2 {
		t.Errorf("checksum/tenants: %q for a, %q for b, %q for a again; want it set, changing with the file only", a, b, a2)
	}
	if s := checksum("a", "sidecar"); s != "" {
		t.Errorf("reload sidecar also rolls the pods (checksum %q)", s)
	}
}

func TestSchemaRejectsMisspeltKeys(t *testing.T) {
	checkCases(t, []valuesCase{
		{map[string]any{"serviceMonitr": map[string]any{"enabled": true}}, "serviceMonitr"},
		{map[string]any{"serviceMonitor": map[string]any{"intervl": "15s"}}, "intervl"},
		{map[string]any{"hostPid": true}, "hostPid"},
		{map[string]any{"kubernetes": map[string]any{"podMetadata": map[string]any{"sorce": "kubelet"}}}, "sorce"},
		{map[string]any{"tenants": map[string]any{"reload": "watch"}}, "reload"},
		{map[string]any{"tuner": map[string]any{"journl": map[string]any{"hostPath": "/var/lib/x"}}}, "journl"},
		{map[string]any{"tuner": map[string]any{"mode": "enforced"}}, "mode"},
		{map[string]any{"tuner": map[string]any{"killSwitch": map[string]any{"fle": "x"}}}, "fle"},
		{map[string]any{"nodePools": []any{map[string]any{"name": "a", "nodeSelecter": map[string]any{"a": "b"}}}}, "nodeSelecter"},
		{map[string]any{"nodePools": []any{map[string]any{"name": "a", "tuner": map[string]any{"mods": "enforce"}}}}, "mods"},
		{map[string]any{"kubernetes": map[string]any{"podMetadata": map[string]any{"proxyPort": 8001}}}, "proxyPort"},
		{map[string]any{"backend": "auto"}, "backend"},
		{map[string]any{"sim": map[string]any{"scenaro": "h200-mig"}}, "scenaro"},
		{map[string]any{"tenants": map[string]any{"kubernetesDefault": "pod"}}, "kubernetesDefault"},
		{map[string]any{"tuner": map[string]any{"slowLoop": map[string]any{"cooldown": "5m"}}}, "cooldown"},
		{map[string]any{"tuner": map[string]any{"slowLoop": map[string]any{"dwell": "soon"}}}, "dwell"},
	}, nil)
}

// ruleGroups reads the groups of Prometheus rule files.
func ruleGroups(t *testing.T, files map[string][]byte) []monitoringv1.RuleGroup {
	t.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var groups []monitoringv1.RuleGroup
	for _, n := range names {
		var f struct {
			Groups []monitoringv1.RuleGroup `json:"groups"`
		}
		if err := yaml.UnmarshalStrict(files[n], &f); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		groups = append(groups, f.Groups...)
	}
	return groups
}

// repoFiles reads dir/*.ext of the repository, by base name.
func repoFiles(t *testing.T, dir, pattern string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// TestChartFilesMatchRepo: the chart's copies of the generated rules and
// dashboards are the repository's (make chart refreshes them).
func TestChartFilesMatchRepo(t *testing.T) {
	for _, d := range []struct{ dir, pattern string }{{"alerts", "*.yaml"}, {"dashboards", "*.json"}} {
		repo := repoFiles(t, filepath.Join(repo.Root(), d.dir), d.pattern)
		inChart := repoFiles(t, filepath.Join(chartDir(), "files", d.dir), d.pattern)
		if !reflect.DeepEqual(repo, inChart) {
			t.Errorf("the chart's files/%s differ from the repository's %s/ (run make chart): chart has %v, repository %v",
				d.dir, d.dir, keys(inChart), keys(repo))
		}
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestPrometheusRuleEqualsAlerts renders the PrometheusRule from the chart's
// files/alerts/ and, so that the template is checked before the mixin's files
// exist, from fixtures put in their place; its groups must be those files'.
func TestPrometheusRuleEqualsAlerts(t *testing.T) {
	fixture := map[string][]byte{
		"a.yaml": []byte("groups:\n  - name: vgpu-a\n    rules:\n      - alert: VGPUDown\n        expr: vgpu_gpu_up == 0\n        for: 5m\n        labels: {severity: critical}\n        annotations: {summary: 'GPU {{ $labels.gpu }} down'}\n"),
		"b.yaml": []byte("groups:\n  - name: vgpu-b.rules\n    interval: 30s\n    rules:\n      - record: tenant:vgpu_x:sum\n        expr: sum by (tenant) (vgpu_x)\n  - name: vgpu-b2\n    rules: []\n"),
	}
	dash := []byte(`{"title": "vGPU tenants", "panels": []}`)
	for _, tc := range []struct {
		name   string
		alerts map[string][]byte
	}{
		{"chart files", repoFiles(t, filepath.Join(chartDir(), "files", "alerts"), "*.yaml")},
		{"fixtures", fixture},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadChart(t)
			if tc.name == "fixtures" {
				c.Files = slices.DeleteFunc(c.Files, func(f *chart.File) bool { return strings.HasPrefix(f.Name, "files/") })
				for n, b := range tc.alerts {
					c.Files = append(c.Files, &chart.File{Name: "files/alerts/" + n, Data: b})
				}
				c.Files = append(c.Files, &chart.File{Name: "files/dashboards/vgpu_tenants.json", Data: dash})
			}
			m := mustRender(t, c, nil)
			if len(tc.alerts) == 0 {
				if len(m.rules) != 0 {
					t.Errorf("no rule files, yet %d PrometheusRules", len(m.rules))
				}
				return
			}
			if len(m.rules) != 1 {
				t.Fatalf("%d PrometheusRules, want 1", len(m.rules))
			}
			if got, want := m.rules[0].Spec.Groups, ruleGroups(t, tc.alerts); !reflect.DeepEqual(got, want) {
				t.Errorf("PrometheusRule groups\n%+v\nwant those of files/alerts/\n%+v", got, want)
			}
			if tc.name == "fixtures" {
				checkDashboard(t, m, dash)
			}
		})
	}
}

func checkDashboard(t *testing.T, m *manifests, want []byte) {
	t.Helper()
	var found int
	for _, cm := range m.configMaps {
		if d, ok := cm.Data["vgpu_tenants.json"]; ok {
			found++
			if d != string(want) {
				t.Errorf("dashboard ConfigMap holds %q, want %q", d, want)
			}
			if cm.Labels["grafana_dashboard"] != "1" {
				t.Errorf("dashboard ConfigMap labels %v lack grafana_dashboard: \"1\"", cm.Labels)
			}
		}
	}
	if found != 1 {
		t.Errorf("%d ConfigMaps hold the dashboard, want 1", found)
	}
}

// exporterFlags lists the flags vgpu_exporter --help shows.
func exporterFlags(t *testing.T) map[string]bool {
	t.Helper()
	flags, err := repo.ExporterFlags(repo.Exporter(t))
	if err != nil {
		t.Fatal(err)
	}
	return flags
}

func TestMain(m *testing.M) {
	code := m.Run()
	repo.Cleanup()
	os.Exit(code)
}

// TestRejectsBadCombinations: values that would deploy an exporter that
// cannot work fail the rendering with a message that says why.
func TestRejectsBadCombinations(t *testing.T) {
	checkCases(t, []valuesCase{
		{map[string]any{"securityContext": map[string]any{"runAsUser": 65532}}, "profilingCapability"},
		{map[string]any{"web": map[string]any{"config": map[string]any{"existingSecret": "w"}},
			"tenants": map[string]any{"reload": "sidecar", "existingConfigMap": "t"}}, "tenants.reload=sidecar"},
		{map[string]any{"kubernetes": map[string]any{"podResources": map[string]any{"enabled": false},
			"podMetadata": map[string]any{"enabled": true}}}, "kubernetes.podMetadata needs kubernetes.podResources"},
		{map[string]any{"kubernetes": map[string]any{"podResources": map[string]any{"enabled": false},
			"podInfo": map[string]any{"enabled": true}}}, "kubernetes.podInfo needs kubernetes.podResources"},
		{map[string]any{"profilingCapability": false, "securityContext": map[string]any{"runAsUser": 65532},
			"nodePools": []any{map[string]any{"name": "a", "tuner": map[string]any{"mode": "enforce"}}}}, "nodePools a: profilingCapability and the tuner"},
		{map[string]any{"tuner": map[string]any{"mode": "enforce", "journal": map[string]any{"hostPath": ""}}}, "needs tuner.journal.hostPath"},
		{map[string]any{"nodePools": []any{
			map[string]any{"name": "a", "nodeSelector": map[string]any{"pool": "a"}},
			map[string]any{"name": "b", "nodeSelector": map[string]any{"zone": "b"}}}}, `nodePools "a" and "b" may select the same node`},
		{map[string]any{"nodePools": []any{
			map[string]any{"name": "a", "nodeSelector": map[string]any{"pool": "a"}},
			map[string]any{"name": "a", "nodeSelector": map[string]any{"pool": "b"}}}}, `two pools named "a"`},
		{map[string]any{"tenants": map[string]any{"kubernetesDefault": "label:team"}}, "tenants.kubernetesDefault=label:team needs kubernetes.podMetadata.enabled"},
		{map[string]any{"tuner": map[string]any{"mode": "enforce", "rebalanceHook": map[string]any{"command": "builtin:kubernetes-evict"}}},
			"set tuner.rebalanceHook.evictPods=true"},
		// Who the exporter runs as: the kubelet refuses a non-root policy
		// for uid 0; the image's user (65532) gets no capability and
		// cannot reach the kubelet's socket.
		{map[string]any{"securityContext": map[string]any{"runAsNonRoot": true}}, "the release: securityContext.runAsNonRoot"},
		{map[string]any{"podSecurityContext": map[string]any{"runAsNonRoot": true}, "securityContext": map[string]any{"runAsNonRoot": nil}},
			"securityContext.runAsNonRoot (or podSecurityContext's) is true while the exporter runs as uid 0"},
		{map[string]any{"securityContext": map[string]any{"runAsUser": nil}}, "profilingCapability"},
		{map[string]any{"podSecurityContext": map[string]any{"runAsUser": 1000}, "securityContext": map[string]any{"runAsUser": nil}}, "profilingCapability"},
		{map[string]any{"profilingCapability": false, "securityContext": map[string]any{"runAsUser": 65532}},
			"kubernetes.podResources connects to the kubelet's pod-resources socket"},
		{map[string]any{"profilingCapability": false, "kubernetes": map[string]any{"podResources": map[string]any{"enabled": false}},
			"securityContext": map[string]any{"runAsUser": 65532}, "tuner": map[string]any{"mode": "recommend"}},
			"the release: the tuner writes its journal in tuner.journal.hostPath"},
		// RBAC for the namespace's default service account: for every pod
		// of the namespace that names none.
		{map[string]any{"serviceAccount": map[string]any{"create": false}, "kubernetes": map[string]any{"podMetadata": map[string]any{"enabled": true}}},
			"serviceAccount.create=false without serviceAccount.name"},
		// Durations the exporter (or the Prometheus Operator) refuses.
		{map[string]any{"sampleInterval": "50ms"}, "sampleInterval=50ms: the exporter samples at most every 100ms"},
		{map[string]any{"sampleInterval": "0s"}, "sampleInterval=0s"},
		{map[string]any{"tuner": map[string]any{"mode": "recommend", "interval": "0m0s"}}, "the release: tuner.interval=0m0s: the exporter needs a positive"},
		{map[string]any{"tuner": map[string]any{"mode": "enforce", "restoreTimeout": "0s"}}, "the release: tuner.restoreTimeout=0s: the exporter needs a positive --tuner.restore-timeout"},
		{map[string]any{"tuner": map[string]any{"mode": "recommend", "interval": "99ms"}}, "the release: tuner.interval=99ms: the exporter needs a --tuner.interval of at least 100ms"},
		{map[string]any{"tuner": map[string]any{"mode": "recommend", "restoreTimeout": "999ms"}}, "the release: tuner.restoreTimeout=999ms: the exporter needs a --tuner.restore-timeout of at least 1s"},
		{map[string]any{"nodePools": []any{map[string]any{"name": "a", "tuner": map[string]any{"mode": "recommend",
			"pause": map[string]any{"enabled": true, "period": "0ms"}}}}}, "nodePools a: tuner.pause.period=0ms: the exporter needs --pause.period of at least 50ms"},
		{map[string]any{"tuner": map[string]any{"mode": "recommend", "pause": map[string]any{"enabled": true, "period": "49ms"}}},
			"the release: tuner.pause.period=49ms: the exporter needs --pause.period of at least 50ms"},
		{map[string]any{"tuner": map[string]any{"mode": "recommend", "pause": map[string]any{"enabled": true, "max": "1s"}}},
			"tuner.pause.max=1s is longer than tuner.pause.period=500ms"},
		{map[string]any{"tuner": map[string]any{"mode": "recommend", "pause": map[string]any{"enabled": true, "max": "9ms"}}},
			"the release: tuner.pause.max=9ms: the exporter needs --pause.max of 0s or between 10ms and --pause.period"},
		{map[string]any{"serviceMonitor": map[string]any{"interval": "5s"}},
			"serviceMonitor.scrapeTimeout=10s is longer than serviceMonitor.interval=5s: the Prometheus Operator rejects"},
	}, nil)
}

// TestAppVersion: the chart deploys the version the repository builds.
func TestAppVersion(t *testing.T) {
	v, err := os.ReadFile(filepath.Join(repo.Root(), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := loadChart(t).Metadata.AppVersion, strings.TrimSpace(string(v)); got != want {
		t.Errorf("Chart.yaml appVersion %q, VERSION says %q", got, want)
	}
}

// TestTunerPools renders the tuner example: its enforcing pool gets root,
// SYS_ADMIN, the journal, the kill switch ConfigMap and the MPS pipes; its
// recommending pool no capability, and without MPS no pipe directory; the
// same values with the tuner off everywhere give neither.
func TestTunerPools(t *testing.T) {
	c := loadChart(t)
	vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir(), "examples", "tuner-pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := render(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decode(rendered)
	if err != nil {
		t.Fatal(err)
	}
	for _, ds := range []string{"vgpu-exporter-inference", "vgpu-exporter-training"} {
		if notes := rendered["vgpu-exporter/templates/NOTES.txt"]; !strings.Contains(notes, "rollout status daemonset/"+ds+"\n") {
			t.Errorf("install notes do not wait for %s:\n%s", ds, notes)
		}
	}
	type want struct {
		mode, killSwitch string
		caps             []corev1.Capability
		mps              bool
	}
	wants := map[string]want{
		"vgpu-exporter-inference": {"enforce", "configMap", []corev1.Capability{"SYS_ADMIN"}, true},
		"vgpu-exporter-training":  {"recommend", "hostPath", nil, false},
	}
	if len(m.daemonSets) != len(wants) {
		t.Fatalf("%d DaemonSets, want %d", len(m.daemonSets), len(wants))
	}
	for _, ds := range m.daemonSets {
		w, ok := wants[ds.Name]
		if !ok {
			t.Fatalf("unexpected DaemonSet %s", ds.Name)
		}
		pod := ds.Spec.Template.Spec
		exp := container(t, pod.Containers, "exporter")
		args := strings.Join(exp.Args, " ")
		if !strings.Contains(args, "--tuner.mode="+w.mode) || strings.Contains(args, "--mps.pipe-directory="+devicePluginPipe) != w.mps {
			t.Errorf("%s: args %q, want --tuner.mode=%s, the MPS pipe directory %v", ds.Name, args, w.mode, w.mps)
		}
		if got := exp.SecurityContext.Capabilities.Add; !slices.Equal(got, w.caps) {
			t.Errorf("%s: capabilities added %v, want %v", ds.Name, got, w.caps)
		}
		var ks *corev1.Volume
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == "kill-switch" {
				ks = &pod.Volumes[i]
			}
		}
		switch {
		case ks == nil:
			t.Errorf("%s: no kill switch volume", ds.Name)
		case w.killSwitch == "configMap" && (ks.ConfigMap == nil || ks.ConfigMap.Name != "vgpu-exporter-kill-switch"):
			t.Errorf("%s: kill switch %+v, want the optional ConfigMap vgpu-exporter-kill-switch", ds.Name, ks.VolumeSource)
		case w.killSwitch == "hostPath" && (ks.HostPath == nil || ks.HostPath.Path != "/etc/vgpu-exporter"):
			t.Errorf("%s: kill switch %+v, want the node's /etc/vgpu-exporter", ds.Name, ks.VolumeSource)
		}
	}

	// The tuner off on both pools: no tuner flag, no SYS_ADMIN.
	for _, p := range vals["nodePools"].([]any) {
		p.(map[string]any)["tuner"].(map[string]any)["mode"] = false // an unquoted YAML off
	}
	for _, ds := range mustRender(t, c, vals).daemonSets {
		exp := container(t, ds.Spec.Template.Spec.Containers, "exporter")
		if args := strings.Join(exp.Args, " "); strings.Contains(args, "--tuner.") || len(exp.SecurityContext.Capabilities.Add) > 0 {
			t.Errorf("%s with the tuner off: args %q, capabilities %v", ds.Name, args, exp.SecurityContext.Capabilities.Add)
		}
	}
}
