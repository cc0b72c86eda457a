package helmtest

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// release is a release's name and namespace.
type release struct{ name, ns string }

// renderAs renders vals as the release r, decoded.
func renderAs(t *testing.T, vals map[string]any, r release) *manifests {
	t.Helper()
	rendered, err := renderRelease(loadChart(t), vals, capabilities(true), r.name, r.ns)
	if err != nil {
		t.Fatalf("release %s in %s: %v", r.name, r.ns, err)
	}
	m, err := decode(rendered)
	if err != nil {
		t.Fatalf("release %s in %s: %v", r.name, r.ns, err)
	}
	return m
}

// TestReleasesApart: two releases in one cluster (of one name in two
// namespaces, of the longest names Helm and Kubernetes take, of names
// whose dash-joined namespace and name would read alike) name their
// cluster-scoped objects apart, each a valid name, and each binding grants
// its own role to its own release's service account; before, the
// ClusterRole and its binding were named after the release alone, and a
// second release of that name in another namespace failed to install on
// them (or took them over).
func TestReleasesApart(t *testing.T) {
	vals := map[string]any{"kubernetes": map[string]any{"podMetadata": map[string]any{"enabled": true}}}
	long := strings.Repeat("r", 53) // Helm's longest release name
	for _, pair := range [][2]release{
		{{"vgpu-exporter", "team-a"}, {"vgpu-exporter", "team-b"}},
		{{"gpu", "monitoring"}, {"gpu", "monitoring-2"}},
		{{"vgpu-exporter", "a-b"}, {"vgpu-exporter-a", "b"}},
		{{long, strings.Repeat("n", 63)}, {long, strings.Repeat("n", 62) + "m"}},
		{{long[:52] + "a", "x"}, {long[:52] + "b", "x"}},
	} {
		seen := map[string]release{}
		for _, r := range pair {
			m := renderAs(t, vals, r)
			if len(m.clusterRoles) != 1 || len(m.bindings) != 1 || len(m.serviceAccounts) != 1 {
				t.Fatalf("release %s in %s: %d ClusterRoles, %d bindings, %d service accounts, want one each",
					r.name, r.ns, len(m.clusterRoles), len(m.bindings), len(m.serviceAccounts))
			}
			role, b, sa := m.clusterRoles[0], m.bindings[0], m.serviceAccounts[0]
			for kind, name := range map[string]string{"ClusterRole": role.Name, "ClusterRoleBinding": b.Name} {
				if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
					t.Errorf("release %s in %s: %s %q: %v", r.name, r.ns, kind, name, errs)
				}
				if other, ok := seen[kind+"/"+name]; ok {
					t.Errorf("%s %q of release %s in %s is also release %s in %s's", kind, name, r.name, r.ns, other.name, other.ns)
				}
				seen[kind+"/"+name] = r
			}
			if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != role.Name {
				t.Errorf("release %s in %s: binding's roleRef %+v, want ClusterRole %s", r.name, r.ns, b.RoleRef, role.Name)
			}
			if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != sa.Name ||
				b.Subjects[0].Namespace != r.ns || sa.Namespace != r.ns {
				t.Errorf("release %s in %s: binding's subjects %+v, want the service account %s/%s", r.name, r.ns, b.Subjects, sa.Namespace, sa.Name)
			}
			if got := m.daemonSets[0].Spec.Template.Spec.ServiceAccountName; got != sa.Name {
				t.Errorf("release %s in %s: pods run as %s, the binding grants %s", r.name, r.ns, got, sa.Name)
			}
		}
	}
}

// TestDashboardNamesApart: the dashboards' ConfigMaps are named apart from
// one another under the longest release names, and from another release's
// in a dashboards.namespace they share; before, a release name of 50
// characters cut every name to the same 63, and two releases of one name
// in two namespaces wrote the same ConfigMaps into dashboards.namespace.
func TestDashboardNamesApart(t *testing.T) {
	long := strings.Repeat("r", 50)
	for _, tc := range []struct {
		dashNS   string
		releases []release
	}{
		{"", []release{{long, "monitoring"}}},
		{"", []release{{long + "xyz", "monitoring"}}},
		{"grafana", []release{{"vgpu-exporter", "team-a"}, {"vgpu-exporter", "team-b"}}},
		{"grafana", []release{{long + "xyz", strings.Repeat("n", 63)}, {long + "xyz", strings.Repeat("n", 62) + "m"}}},
	} {
		vals := map[string]any{"dashboards": map[string]any{"namespace": tc.dashNS}}
		seen := map[string]release{}
		for _, r := range tc.releases {
			m := renderAs(t, vals, r)
			if len(m.configMaps) == 0 {
				t.Fatalf("release %s in %s: no dashboard ConfigMap", r.name, r.ns)
			}
			for _, cm := range m.configMaps {
				want := tc.dashNS
				if want == "" {
					want = r.ns
				}
				if cm.Namespace != want {
					t.Errorf("release %s in %s: ConfigMap %s in namespace %q, want %q", r.name, r.ns, cm.Name, cm.Namespace, want)
				}
				if errs := validation.IsDNS1123Subdomain(cm.Name); len(errs) > 0 {
					t.Errorf("release %s in %s: ConfigMap %q: %v", r.name, r.ns, cm.Name, errs)
				}
				key := cm.Namespace + "/" + cm.Name
				if other, ok := seen[key]; ok {
					t.Errorf("ConfigMap %s of release %s in %s is also release %s in %s's", key, r.name, r.ns, other.name, other.ns)
				}
				seen[key] = r
				// the sidecar writes each key as a file of one folder, and
				// removes a deleted ConfigMap's keys' files: in a shared
				// namespace no two releases' keys are one; in the release's
				// own the file keeps the dashboard's name
				for file := range cm.Data {
					if tc.dashNS == "" && !strings.HasPrefix(file, "vgpu-") {
						t.Errorf("release %s in %s: ConfigMap %s's file %q, want the dashboard's name", r.name, r.ns, cm.Name, file)
					}
					if errs := validation.IsConfigMapKey(file); len(errs) > 0 {
						t.Errorf("release %s in %s: file %q: %v", r.name, r.ns, file, errs)
					}
					fk := cm.Namespace + "/file/" + file
					if other, ok := seen[fk]; ok {
						t.Errorf("file %s of release %s in %s is also release %s in %s's", fk, r.name, r.ns, other.name, other.ns)
					}
					seen[fk] = r
				}
			}
		}
	}
}

// TestOneJournalPerNode: the tuners of any two releases keep their journal
// in the same directory of the node, whose lock lets one of them run on a
// node (docs/deploy.md, "Two releases in one cluster"): a directory per
// release would let two tuners enforce on the same GPUs.
func TestOneJournalPerNode(t *testing.T) {
	vals := map[string]any{"tuner": map[string]any{"mode": "enforce"}}
	type journal struct{ hostPath, flag string }
	var first *journal
	for _, r := range []release{{"vgpu-exporter", "monitoring"}, {"gpu-team-b", "team-b"}, {strings.Repeat("r", 53), strings.Repeat("n", 63)}} {
		m := renderAs(t, vals, r)
		pod := m.daemonSets[0].Spec.Template.Spec
		var got journal
		for _, v := range pod.Volumes {
			if v.Name == "tuner-journal" && v.HostPath != nil {
				got.hostPath = v.HostPath.Path
			}
		}
		if flags := argsWithPrefix(pod.Containers[0].Args, "--tuner.journal="); len(flags) == 1 {
			got.flag = flags[0]
		}
		if got.hostPath == "" || got.flag == "" {
			t.Fatalf("release %s in %s: journal %+v, want a hostPath and a --tuner.journal", r.name, r.ns, got)
		}
		if first == nil {
			first = &got
		} else if got != *first {
			t.Errorf("release %s in %s: journal %+v, another release's %+v: two tuners on a node would not exclude each other", r.name, r.ns, got, *first)
		}
	}
}

// TestNotesSayOneTunerPerNode: with a tuner on (a pool's included), the
// install notes say that one tuner runs per node and what the pod of a
// second one logs; before, a second release's tuner restarting on the
// journal's lock was explained nowhere the installer looks. In enforce
// they say the node lock's path and the message of a pod it keeps out.
func TestNotesSayOneTunerPerNode(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		vals map[string]any
		want string // empty: no such note
	}{
		{map[string]any{}, ""},
		{map[string]any{"tuner": map[string]any{"mode": "recommend"}}, "locks its journal in /var/lib/vgpu-exporter\non the node"},
		{map[string]any{"nodePools": []any{
			map[string]any{"name": "a", "nodeSelector": map[string]any{"pool": "a"}},
			map[string]any{"name": "b", "nodeSelector": map[string]any{"pool": "b"},
				"tuner": map[string]any{"mode": "enforce", "journal": map[string]any{"hostPath": "/var/lib/vgpu-b"}}}}},
			"locks its journal in /var/lib/vgpu-b\non the node"},
	} {
		rendered, err := render(c, tc.vals)
		if err != nil {
			t.Fatal(err)
		}
		notes := rendered["vgpu-exporter/templates/NOTES.txt"]
		if tc.want == "" {
			if strings.Contains(notes, "One tuner per node") {
				t.Errorf("values %v: notes speak of the tuner, which is off:\n%s", tc.vals, notes)
			}
		} else if !strings.Contains(notes, tc.want) || !strings.Contains(notes, `"--tuner.journal: ... is in use by another`) {
			t.Errorf("values %v: notes\n%s\nwant %q and the lock's message", tc.vals, notes, tc.want)
		}
		enforce := strings.Contains(fmt.Sprint(tc.vals), "enforce")
		if got := strings.Contains(notes, "locks tuner.lock in /run/vgpu-exporter on the node") && strings.Contains(notes, `"--tuner.node-lock: ... is held by"`); got != enforce {
			t.Errorf("values %v: notes\n%s\nspeak of the node lock: %v, want %v", tc.vals, notes, got, enforce)
		}
	}
}
