package helmtest

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"k8s.io/apimachinery/pkg/util/validation"
)

// nameField is a value of the chart that the API server checks as a name
// or key (or the kubelet as an image): vals sets it to s, api is their
// verdict on s (no error: they take it).
type nameField struct {
	name string
	vals func(s string) map[string]any
	api  func(s string) []string
}

// checkNames renders every field with every one of names and compares the
// rendering's verdict with the API server's.
func checkNames(t *testing.T, fields []nameField, names []string) {
	t.Helper()
	c := loadChart(t)
	for _, f := range fields {
		for _, s := range names {
			apiErrs := f.api(s)
			_, err := render(c, f.vals(s))
			if (err == nil) != (len(apiErrs) == 0) {
				t.Errorf("%s %q (%d bytes): rendering error %v; the API server's (the kubelet's) verdict: %v", f.name, s, len(s), err, apiErrs)
			}
		}
	}
}

// labelKeys are label and annotation keys at the API server's bounds (a name of
// 63 and 64 characters, a prefix of 253 and 254) and with odd characters.
func labelKeys() []string {
	a := strings.Repeat
	// A prefix of labels of 63 characters and dots, n characters long.
	prefix := func(n int) string {
		p := a(a("p", 63)+".", 4)
		return p[:n-1] + "q"
	}
	return []string{
		"a", "A", "1", "a.b", "a_b", "a-b", "a..b", "a__b", "A.B_c-D",
		a("n", 63), a("n", 64), "x/" + a("n", 63), "x/" + a("n", 64),
		a("p", 253) + "/n", a("p", 254) + "/n", prefix(253) + "/n", prefix(254) + "/n", prefix(253) + "/" + a("n", 63),
		"-a", "a-", "_a", "a_", ".a", "a.", "a b", "a\n", "a:b", "a=b", "a@b", "a+b", "a~b", "a%b", "ä", "日本",
		"", "/", "a/", "/a", "a/b/c", "x//a", "x/-a", "x/a_", "x/_a", "x/a.b",
		"example.com/team", "Example.COM/team", "EXAMPLE.com/Team", "a_b.com/c", "a..b/c", "-a.com/c", ".a/b", "a./b", "a-.b/c",
		"kubernetes.io/arch", "node-role.kubernetes.io/gpu", "1.2.3/4",
		// Lowercased, U+0130 is an i and the Kelvin sign a k (what the
		// API server checks of an annotation's key).
		"\u212a", "\u212aey/x", "x/\u0130d", "\u00c5",
	}
}

// TestNamesAsTheAPIServer: a label's key or value, an annotation's key,
// an object's name and a ConfigMap's key are taken where the API server
// (apimachinery's validators) takes them and refused where it refuses
// them. Before, a key's prefix had no bound (one of 254 characters
// rendered, and the install failed at the API server), a ConfigMap key
// beginning with ".." (which no ConfigMap holds) rendered, and the
// tenants' label:KEY took keys the exporter refuses at start.
func TestNamesAsTheAPIServer(t *testing.T) {
	qualified := validation.IsQualifiedName
	annotationKey := func(s string) []string { return validation.IsQualifiedName(strings.ToLower(s)) }
	keyFields := []nameField{
		{"podLabels key", func(s string) map[string]any { return map[string]any{"podLabels": map[string]any{s: "v"}} }, qualified},
		{"nodeSelector key", func(s string) map[string]any { return map[string]any{"nodeSelector": map[string]any{s: "v"}} }, qualified},
		{"nodePools[].nodeSelector key", func(s string) map[string]any {
			return map[string]any{"nodePools": []any{map[string]any{"name": "a", "nodeSelector": map[string]any{s: "v"}}}}
		}, qualified},
		{"dashboards.label", func(s string) map[string]any {
			return map[string]any{"dashboards": map[string]any{"enabled": true, "label": s}}
		}, qualified},
		{"tenants.kubernetesDefault label:", func(s string) map[string]any {
			return map[string]any{"tenants": map[string]any{"kubernetesDefault": "label:" + s}, "kubernetes": map[string]any{"podMetadata": map[string]any{"enabled": true}}}
		}, qualified},
		{"podAnnotations key", func(s string) map[string]any { return map[string]any{"podAnnotations": map[string]any{s: "v"}} }, annotationKey},
		{"dashboards.folderAnnotation", func(s string) map[string]any {
			return map[string]any{"dashboards": map[string]any{"enabled": true, "folder": "GPU", "folderAnnotation": s}}
		}, annotationKey},
	}
	checkNames(t, keyFields, labelKeys())

	labelValues := []nameField{
		{"podLabels value", func(s string) map[string]any { return map[string]any{"podLabels": map[string]any{"k": s}} }, validation.IsValidLabelValue},
		{"nodePools[].nodeSelector value", func(s string) map[string]any {
			return map[string]any{"nodePools": []any{map[string]any{"name": "a", "nodeSelector": map[string]any{"k": s}}}}
		}, validation.IsValidLabelValue},
		{"dashboards.labelValue", func(s string) map[string]any {
			return map[string]any{"dashboards": map[string]any{"enabled": true, "labelValue": s}}
		}, validation.IsValidLabelValue},
	}
	checkNames(t, labelValues, []string{"", "a", "A", "1", "a.b_c-D", strings.Repeat("v", 63), strings.Repeat("v", 64),
		"-a", "a-", "_a", "a_", ".a", "a.", "a b", "a/b", "a:b", "ä", "\u212a", "a\n"})

	subdomain := validation.IsDNS1123Subdomain
	objectNames := []nameField{
		{"priorityClassName", func(s string) map[string]any { return map[string]any{"priorityClassName": s} }, subdomain},
		{"runtimeClassName", func(s string) map[string]any { return map[string]any{"runtimeClassName": s} }, subdomain},
		{"serviceAccount.name", func(s string) map[string]any { return map[string]any{"serviceAccount": map[string]any{"name": s}} }, subdomain},
		{"tenants.existingConfigMap", func(s string) map[string]any {
			return map[string]any{"tenants": map[string]any{"existingConfigMap": s}}
		}, subdomain},
		{"web.config.existingSecret", func(s string) map[string]any {
			return map[string]any{"web": map[string]any{"config": map[string]any{"existingSecret": s}}}
		}, subdomain},
		{"tuner.killSwitch.configMap", func(s string) map[string]any {
			return map[string]any{"tuner": map[string]any{"mode": "recommend", "killSwitch": map[string]any{"configMap": s}}}
		}, subdomain},
		{"kubernetes.podMetadata.kubeletCA.configMap", func(s string) map[string]any {
			return map[string]any{"kubernetes": map[string]any{"podMetadata": map[string]any{"enabled": true, "source": "kubelet",
				"kubeletCA": map[string]any{"configMap": s}}}}
		}, subdomain},
		{"dashboards.namespace", func(s string) map[string]any {
			return map[string]any{"dashboards": map[string]any{"enabled": true, "namespace": s}}
		},
			validation.IsDNS1123Label},
	}
	// Empty is each one's default (none given), not a name.
	checkNames(t, objectNames, []string{"a", "1", "a-b", "a.b", "a-b.c-d", strings.Repeat("a", 63), strings.Repeat("a", 64),
		strings.Repeat("a", 64) + ".b", strings.Repeat("a", 253), strings.Repeat("a", 254),
		"A", "a_b", "-a", "a-", ".a", "a.", "a..b", "a b", "a/b", "ä"})

	configMapKeys := []nameField{
		{"tenants.existingConfigMapKey", func(s string) map[string]any {
			return map[string]any{"tenants": map[string]any{"existingConfigMap": "t", "existingConfigMapKey": s}}
		}, validation.IsConfigMapKey},
		{"web.config.key", func(s string) map[string]any {
			return map[string]any{"web": map[string]any{"config": map[string]any{"existingSecret": "w", "key": s}}}
		}, validation.IsConfigMapKey},
		{"kubernetes.podMetadata.kubeletCA.key", func(s string) map[string]any {
			return map[string]any{"kubernetes": map[string]any{"podMetadata": map[string]any{"enabled": true, "source": "kubelet",
				"kubeletCA": map[string]any{"configMap": "ca", "key": s}}}}
		}, validation.IsConfigMapKey},
	}
	checkNames(t, configMapKeys, []string{"a", "A_b-c.d", ".a", "a.", "a..", "a..b", strings.Repeat("k", 253), strings.Repeat("k", 254),
		"", ".", "..", "..a", "...", "a/b", "a b", "ä"})
}

// TestEnvNamesAsTheAPIServer: an extraEnv entry is taken where the API
// server takes its name (any printable ASCII but '=') and its value (a
// string) and refused where it refuses them; before, any list rendered: a
// name with '=' or a control character, an entry without a name, or a
// number as its value (as --set gives one) failed at the API server.
func TestEnvNamesAsTheAPIServer(t *testing.T) {
	env := func(e map[string]any) map[string]any { return map[string]any{"extraEnv": []any{e}} }
	checkNames(t, []nameField{{"extraEnv[].name", func(s string) map[string]any { return env(map[string]any{"name": s, "value": "v"}) },
		validation.IsRelaxedEnvVarName}},
		[]string{"A", "a_b", "my.env-name", "1A", "..", ".", "A B", " ", "~", "a=b", "=", "", "a\n", "a\t", "\x7f", "ä", "NODE_NAME2"})
	checkCases(t, []valuesCase{
		{env(map[string]any{"value": "v"}), "at '/extraEnv/0': missing property 'name'"},
		{env(map[string]any{"name": "A", "value": 1}), "at '/extraEnv/0/value': got number, want null or string"},
		{map[string]any{"extraEnv": []any{"A=1"}}, "at '/extraEnv/0': got string, want object"},
		{env(map[string]any{"name": "A", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "spec.nodeName"}}}), ""},
		{env(map[string]any{"name": "A", "value": nil}), ""},
		{env(map[string]any{"name": "A", "valueFrom": nil}), ""},
		{env(map[string]any{"name": "A", "value": nil, "valueFrom": nil}), ""},
		{env(map[string]any{"name": nil, "value": "v"}), "at '/extraEnv/0/name': got null, want string"},
		{map[string]any{"extraEnv": []any{nil}}, "at '/extraEnv/0': got null, want object"},
	}, func(tc valuesCase, m *manifests) {
		// A null value is the empty string to the API server (it decodes
		// null into a string's zero), as it is to this decoding.
		for _, e := range container(t, m.daemonSets[0].Spec.Template.Spec.Containers, "exporter").Env {
			if e.Name == "A" && e.Value != "" {
				t.Errorf("values %v: env A %+v", tc.vals, e)
			}
		}
	})
}

// TestVolumeNamesAsTheAPIServer: an extraVolumes or extraVolumeMounts
// entry is taken where the API server takes its volume's name (a DNS
// label) and refused where it refuses it, as is one without a name (or a
// mount without its path); before, any list rendered and failed at the
// API server.
func TestVolumeNamesAsTheAPIServer(t *testing.T) {
	volume := func(s string) map[string]any {
		return map[string]any{"extraVolumes": []any{map[string]any{"name": s, "emptyDir": map[string]any{}}},
			"extraVolumeMounts": []any{map[string]any{"name": s, "mountPath": "/extra"}}}
	}
	checkNames(t, []nameField{{"extraVolumes[].name", volume, validation.IsDNS1123Label}}, []string{"a", "1", "a-b", strings.Repeat("v", 63),
		strings.Repeat("v", 64), "", "A", "a_b", "a.b", "-a", "a-", "a b", "ä"})
	checkCases(t, []valuesCase{
		{map[string]any{"extraVolumes": []any{map[string]any{"emptyDir": map[string]any{}}}}, "at '/extraVolumes/0': missing property 'name'"},
		{map[string]any{"extraVolumeMounts": []any{map[string]any{"name": "x"}}}, "at '/extraVolumeMounts/0': missing property 'mountPath'"},
		{map[string]any{"extraVolumeMounts": []any{map[string]any{"name": "x", "mountPath": ""}}}, "at '/extraVolumeMounts/0/mountPath'"},
	}, nil)
}

// FuzzNamesAsTheAPIServer: the schema's keys and names take what the API
// server takes and refuse what it refuses, whatever the string, at the
// bounds above all (a prefix of 253 characters, a name of 63, a DNS
// subdomain of 253, an extended resource's domain of 244). One exception,
// said in the schema: a page size spelt as a fraction or with an exponent
// (hugepages-1.5Ki, hugepages-2e6) is refused though the API server takes
// it.
func FuzzNamesAsTheAPIServer(f *testing.F) {
	a := strings.Repeat
	for _, s := range append(labelKeys(), "", "a", a("a", 253), a("a", 254), a("a", 62)+"."+a("b", 190), "A=b", "hugepages-2Mi", "hugepages-1G",
		a("p", 244)+"/x", a("p", 245)+"/x", "example.com/"+a("n", 63), "\u0130"+a("p", 252)+"/"+a("\u212a", 63), "..a", "a..", "x y", "~") {
		f.Add(s)
	}
	v := func(k string) func(string) any { return func(s string) any { return map[string]any{s: k} } }
	id := func(s string) any { return s }
	type check struct {
		def    string
		as     func(string) any
		api    func(string) []string
		skip   func(string) bool
		schema *jsonschema.Schema
	}
	checks := []check{
		{def: "labels", as: v("v"), api: validation.IsQualifiedName},
		{def: "labelValue", as: id, api: validation.IsValidLabelValue},
		{def: "annotations", as: v("v"), api: func(s string) []string { return validation.IsQualifiedName(strings.ToLower(s)) }},
		{def: "objectName", as: id, api: func(s string) []string {
			if s == "" {
				return nil // none given
			}
			return validation.IsDNS1123Subdomain(s)
		}},
		{def: "configMapKey", as: id, api: validation.IsConfigMapKey},
		{def: "volumeName", as: id, api: validation.IsDNS1123Label},
		{def: "resourceList", as: v("1"), api: containerResourceName, skip: func(s string) bool {
			size, ok := strings.CutPrefix(s, "hugepages-")
			return ok && strings.ContainsAny(size, ".eE")
		}},
	}
	for i := range checks {
		checks[i].schema = schemaDefinition(f, checks[i].def)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, d := range checks {
			if d.skip != nil && d.skip(s) {
				continue
			}
			if got, want := d.schema.Validate(d.as(s)) == nil, len(d.api(s)) == 0; got != want {
				t.Errorf("%s %q (%d bytes): the schema takes it %v, the API server %v (%v)", d.def, s, len(s), got, want, d.api(s))
			}
		}
	})
}
