package helmtest

import (
	"strings"
	"testing"
)

// TestRefusedBeforeTheAPIServer: values and release names the API server
// would refuse partway through an install (after some of the release's
// objects were created) fail the rendering with a message that says what
// to change; before, the rendering passed: a release named with a dot or
// beginning with a digit gave its Service a name that is not a DNS label,
// and imagePullSecrets given as names, not {name: NAME}, a pod spec that
// does not decode.
func TestRefusedBeforeTheAPIServer(t *testing.T) {
	for _, tc := range []struct {
		r     release
		cases []valuesCase
	}{
		{release{"gpu.prod", "monitoring"}, []valuesCase{{nil, `the full name "gpu.prod-vgpu-exporter" (the release's name "gpu.prod"`}}},
		{release{"1gpu", "monitoring"}, []valuesCase{
			{nil, "beginning with a letter"},
			{map[string]any{"fullnameOverride": "gpu"}, ""}}},
		{release{"gpu", "monitoring"}, []valuesCase{
			{map[string]any{"fullnameOverride": "GPU"}, `the full name "GPU"`},
			{map[string]any{"imagePullSecrets": []any{"regcred"}}, "imagePullSecrets"},
			{map[string]any{"imagePullSecrets": []any{map[string]any{"name": "regcred"}}}, ""}}},
	} {
		checkCasesAs(t, tc.r, tc.cases, nil)
	}
}

// TestPodAnnotationsAndLabels: podAnnotations and podLabels reach every
// pool's pods (a mesh's opt-out, a team's label), beside the chart's
// tenants checksum and out of the DaemonSet's selector; a key the chart
// sets itself is refused, since replacing a selected label would leave the
// DaemonSet's selector matching no pod of its template. Before, the chart
// had neither value and the schema refused them.
func TestPodAnnotationsAndLabels(t *testing.T) {
	c := loadChart(t)
	base := func() map[string]any {
		return map[string]any{
			"podAnnotations": map[string]any{"sidecar.istio.io/inject": "false"},
			"podLabels":      map[string]any{"team": "gpu-platform"},
			"tenants":        map[string]any{"config": map[string]any{"tenants": []any{}}},
			"nodePools": []any{
				map[string]any{"name": "a", "nodeSelector": map[string]any{"pool": "a"}},
				map[string]any{"name": "b", "nodeSelector": map[string]any{"pool": "b"}}},
		}
	}
	m := mustRender(t, c, base())
	if len(m.daemonSets) != 2 {
		t.Fatalf("%d DaemonSets, want 2", len(m.daemonSets))
	}
	for _, ds := range m.daemonSets {
		meta := ds.Spec.Template.ObjectMeta
		if meta.Annotations["sidecar.istio.io/inject"] != "false" || meta.Annotations["checksum/tenants"] == "" {
			t.Errorf("DaemonSet %s: pod annotations %v, want podAnnotations' and the tenants checksum", ds.Name, meta.Annotations)
		}
		if meta.Labels["team"] != "gpu-platform" {
			t.Errorf("DaemonSet %s: pod labels %v, want podLabels'", ds.Name, meta.Labels)
		}
		if _, ok := ds.Spec.Selector.MatchLabels["team"]; ok {
			t.Errorf("DaemonSet %s: selector %v selects by a podLabels key", ds.Name, ds.Spec.Selector.MatchLabels)
		}
		for k, v := range ds.Spec.Selector.MatchLabels {
			if meta.Labels[k] != v {
				t.Errorf("DaemonSet %s: selector %s=%s, pod label %q", ds.Name, k, v, meta.Labels[k])
			}
		}
	}
	for key, want := range map[string]string{
		"app.kubernetes.io/instance": "podLabels.app.kubernetes.io/instance: the chart sets this label",
		"vgpu-exporter/node-pool":    "podLabels.vgpu-exporter/node-pool: the chart sets this label",
	} {
		vals := base()
		vals["podLabels"] = map[string]any{key: "x"}
		if _, err := render(c, vals); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("podLabels %s: error %v, want one saying %q", key, err, want)
		}
	}
	vals := base()
	vals["podAnnotations"] = map[string]any{"checksum/tenants": "x"}
	if _, err := render(c, vals); err == nil || !strings.Contains(err.Error(), "podAnnotations.checksum/tenants: the chart sets this annotation") {
		t.Errorf("podAnnotations checksum/tenants: error %v", err)
	}
}

// TestNoSecondValueOfOwnLabels: a label of service.labels or the
// ServiceMonitor's and PrometheusRule's additionalLabels that the chart
// sets itself is refused; before, the manifest held the key twice, which a
// strict decoder refuses and Kubernetes' reads as the last, and on the
// Service a replaced app.kubernetes.io/name kept the ServiceMonitor, which
// selects the Service by it, from scraping anything.
func TestNoSecondValueOfOwnLabels(t *testing.T) {
	checkCases(t, []valuesCase{
		{map[string]any{"service": map[string]any{"labels": map[string]any{"app.kubernetes.io/name": "gpu"}}},
			"service.labels.app.kubernetes.io/name: the chart sets this label itself"},
		{map[string]any{"serviceMonitor": map[string]any{"additionalLabels": map[string]any{"release": "kps", "app.kubernetes.io/instance": "x"}}},
			"serviceMonitor.additionalLabels.app.kubernetes.io/instance: the chart sets this label itself"},
		{map[string]any{"prometheusRule": map[string]any{"additionalLabels": map[string]any{"helm.sh/chart": "x"}}},
			"prometheusRule.additionalLabels.helm.sh/chart: the chart sets this label itself"},
		{map[string]any{"service": map[string]any{"labels": map[string]any{"team": "gpu"}},
			"serviceMonitor": map[string]any{"additionalLabels": map[string]any{"release": "kps"}},
			"prometheusRule": map[string]any{"additionalLabels": map[string]any{"release": "kps"}}}, ""},
	}, nil)
}

// TestWrittenHostDirsOwn: a directory of the node that the pod writes as
// root (the tuner's journal, the MPS pipe directory) is refused where it
// is the node's root, a system directory or climbs with "..": before, the
// chart mounted "/var/lib" (the kubelet's and the runtime's state
// included) or "/" writable into the exporter.
func TestWrittenHostDirsOwn(t *testing.T) {
	journal := func(mode, path string) map[string]any {
		return map[string]any{"tuner": map[string]any{"mode": mode, "journal": map[string]any{"hostPath": path}}}
	}
	checkCases(t, []valuesCase{
		{journal("enforce", "/"), "the release: tuner.journal.hostPath=/: the pod writes this directory of the node as root"},
		{journal("recommend", "/var/lib"), "tuner.journal.hostPath=/var/lib:"},
		{journal("enforce", "/var/lib/"), "tuner.journal.hostPath=/var/lib/:"},
		{journal("enforce", "/etc"), "tuner.journal.hostPath=/etc:"},
		{journal("enforce", "/var/lib/kubelet"), "tuner.journal.hostPath=/var/lib/kubelet:"},
		{journal("enforce", "/var/lib/vgpu-exporter/../../../etc"), "a path that climbs with '..'"},
		{map[string]any{"tuner": map[string]any{"mode": "enforce", "mps": map[string]any{"pipeDirectory": "/run"}}}, "tuner.mps.pipeDirectory=/run:"},
		{map[string]any{"nodePools": []any{map[string]any{"name": "a", "tuner": map[string]any{"mode": "enforce",
			"mps": map[string]any{"pipeDirectory": "/run/nvidia"}}}}}, "nodePools a: tuner.mps.pipeDirectory=/run/nvidia:"},
		// in a tree of the system's programs, kernel or node agents
		{journal("enforce", "/usr/bin"), "tuner.journal.hostPath=/usr/bin:"},
		{journal("enforce", "/usr/local/sbin/"), "tuner.journal.hostPath=/usr/local/sbin/:"},
		{journal("enforce", "/etc/kubernetes/manifests"), "tuner.journal.hostPath=/etc/kubernetes/manifests:"},
		{journal("enforce", "/var/lib/kubelet/pods"), "tuner.journal.hostPath=/var/lib/kubelet/pods:"},
		{journal("enforce", "/var/lib/etcd"), "tuner.journal.hostPath=/var/lib/etcd:"},
		{journal("enforce", "/proc/sys/kernel"), "tuner.journal.hostPath=/proc/sys/kernel:"},
		{map[string]any{"tuner": map[string]any{"mode": "enforce", "mps": map[string]any{"pipeDirectory": "/sys/fs/cgroup"}}}, "tuner.mps.pipeDirectory=/sys/fs/cgroup:"},
		{journal("enforce", "/var/lib/vgpu-exporter-b"), ""},
		{journal("enforce", "/etc/vgpu-exporter/journal"), ""},
		{journal("enforce", "/usrdata/vgpu"), ""},
		{journal("off", "/"), ""}, // no tuner: nothing mounted
		{map[string]any{"tuner": map[string]any{"mode": "enforce", "mps": map[string]any{"pipeDirectory": "/run/nvidia/mps/nvidia.com/gpu.shared/pipe"}}}, ""},
	}, nil)
}

// TestPodResourcesNotTheRoot: kubernetes.podResources.hostPath, mounted
// into the pod, is refused naming the value where it is the node's root
// (however spelt), climbs with "..", or is not absolute; before, "/"
// rendered, and the pod mounted the node's whole filesystem (its
// secrets, the kubelet's and other pods' files), read-only.
func TestPodResourcesNotTheRoot(t *testing.T) {
	path := func(p string, enabled bool) map[string]any {
		return map[string]any{"kubernetes": map[string]any{"podResources": map[string]any{"hostPath": p, "enabled": enabled}}}
	}
	checkCases(t, []valuesCase{
		{path("/", true), "kubernetes.podResources.hostPath=/: the pod mounts this directory of the node"},
		{path("//", true), "kubernetes.podResources.hostPath=//:"},
		{path("/var/..", true), "kubernetes.podResources.hostPath=/var/..:"},
		{path("/var/lib/kubelet/../../../etc", true), "kubernetes.podResources.hostPath=/var/lib/kubelet/../../../etc:"},
		{path("var/lib/kubelet/pod-resources", true), "at '/kubernetes/podResources/hostPath'"},
		{path("", true), "at '/kubernetes/podResources/hostPath'"},
		{path("/var/lib/kubelet/pod-resources/", true), ""},
		{path("/data/kubelet/pod-resources", true), ""},
		{map[string]any{"kubernetes": map[string]any{"podResources": map[string]any{"hostPath": "/", "enabled": false},
			"podMetadata": map[string]any{"enabled": false}, "podInfo": map[string]any{"enabled": false}}}, ""}, // not mounted
	}, nil)
}

// TestKillSwitchFileIsAFile: tuner.killSwitch.file of "." or ".." (or
// beginning with "..", as a ConfigMap volume's own ..data) is refused
// naming the value; before, it rendered, and --tuner.kill-switch-file
// named the kill switch's mounted directory, always there: the kill
// switch was engaged for good, with no error. Other names, and any with
// no kill switch or no tuner, render.
func TestKillSwitchFileIsAFile(t *testing.T) {
	ks := func(source, file string) map[string]any {
		return map[string]any{"tuner": map[string]any{"mode": "recommend", "killSwitch": map[string]any{"source": source, "file": file}}}
	}
	checkCases(t, []valuesCase{
		{ks("configMap", "."), "the release: tuner.killSwitch.file=. would name the kill switch's directory"},
		{ks("configMap", ".."), "tuner.killSwitch.file=.. would name"},
		{ks("configMap", "..data"), "tuner.killSwitch.file=..data would name"},
		{ks("hostPath", ".."), "tuner.killSwitch.file=.. would name"},
		{map[string]any{"nodePools": []any{map[string]any{"name": "a", "nodeSelector": map[string]any{"pool": "a"},
			"tuner": map[string]any{"mode": "recommend", "killSwitch": map[string]any{"source": "hostPath", "file": "."}}}}},
			"nodePools a: tuner.killSwitch.file=. would name"},
		{ks("configMap", "a/b"), "at '/tuner/killSwitch/file'"},
		{ks("configMap", "tuner-disabled"), ""},
		{ks("hostPath", ".off"), ""},
		{ks("hostPath", "a..b"), ""},
		{ks("none", "."), ""}, // not mounted, no flag
		{map[string]any{"tuner": map[string]any{"mode": "off", "killSwitch": map[string]any{"file": "."}}}, ""}, // no tuner
	}, func(tc valuesCase, m *manifests) {
		tuner := tc.vals["tuner"].(map[string]any)
		want := tuner["killSwitch"].(map[string]any)
		for _, ds := range m.daemonSets {
			args := strings.Join(container(t, ds.Spec.Template.Spec.Containers, "exporter").Args, " ")
			flag := "--tuner.kill-switch-file=/etc/vgpu_exporter/kill-switch/" + want["file"].(string)
			if strings.Contains(args, flag) == (want["source"] == "none" || tuner["mode"] == "off") {
				t.Errorf("values %v: args %q, want %s only with a kill switch", tc.vals, args, flag)
			}
		}
	})
}

// TestRefusedNamesAndLabels: a label, annotation or object name the API
// server would refuse (a number or boolean where a string must be, as
// --set gives one; a key with a space; a value of 64 characters; a name
// with capitals), a key no file of a ConfigMap can have, or the
// reloader's image without a tag ("repository:") fails the rendering
// naming the value; before, the chart rendered it, and the install failed
// partway at the API server (or the pod never pulled its image). What it
// takes still renders.
func TestRefusedNamesAndLabels(t *testing.T) {
	long := strings.Repeat("v", 64)
	checkCases(t, []valuesCase{
		{map[string]any{"service": map[string]any{"labels": map[string]any{"version": 2}}}, "at '/service/labels/version': got number, want string"},
		{map[string]any{"service": map[string]any{"annotations": map[string]any{"a": 1}}}, "at '/service/annotations/a': got number, want string"},
		{map[string]any{"serviceAccount": map[string]any{"annotations": map[string]any{"a": true}}}, "at '/serviceAccount/annotations/a': got boolean"},
		{map[string]any{"serviceMonitor": map[string]any{"additionalLabels": map[string]any{"release": 1}}}, "at '/serviceMonitor/additionalLabels/release'"},
		{map[string]any{"prometheusRule": map[string]any{"additionalLabels": map[string]any{"release": 1}}}, "at '/prometheusRule/additionalLabels/release'"},
		{map[string]any{"podLabels": map[string]any{"bad key": "x"}}, "at '/podLabels': additional properties 'bad key' not allowed"},
		{map[string]any{"podLabels": map[string]any{"k": long}}, "at '/podLabels/k': maxLength"},
		{map[string]any{"podAnnotations": map[string]any{"a/b/c": "x"}}, "at '/podAnnotations': additional properties 'a/b/c'"},
		{map[string]any{"nodeSelector": map[string]any{"pool": "a b"}}, "at '/nodeSelector/pool'"},
		{map[string]any{"nodePools": []any{map[string]any{"name": "a", "nodeSelector": map[string]any{"-a": "x"}}}}, "at '/nodePools/0/nodeSelector': additional properties '-a'"},
		{map[string]any{"serviceAccount": map[string]any{"name": "My SA"}}, "at '/serviceAccount/name': 'My SA' does not match"},
		{map[string]any{"priorityClassName": "Bad Name"}, "at '/priorityClassName'"},
		{map[string]any{"runtimeClassName": "nvidia_rt"}, "at '/runtimeClassName'"},
		{map[string]any{"tenants": map[string]any{"existingConfigMap": "Tenants"}}, "at '/tenants/existingConfigMap'"},
		{map[string]any{"tenants": map[string]any{"existingConfigMap": "t", "existingConfigMapKey": "a/b"}}, "at '/tenants/existingConfigMapKey': 'a/b'"},
		{map[string]any{"tenants": map[string]any{"existingConfigMap": "t", "existingConfigMapKey": ".."}}, "at '/tenants/existingConfigMapKey'"},
		{map[string]any{"tenants": map[string]any{"reloader": map[string]any{"image": map[string]any{"tag": ""}}}}, "at '/tenants/reloader/image/tag': minLength"},
		{map[string]any{"web": map[string]any{"config": map[string]any{"existingSecret": "Web"}}}, "at '/web/config/existingSecret'"},
		{map[string]any{"tuner": map[string]any{"mode": "recommend", "killSwitch": map[string]any{"configMap": "Off"}}}, "at '/tuner/killSwitch/configMap'"},
		{map[string]any{"dashboards": map[string]any{"label": "grafana dashboard"}}, "at '/dashboards/label'"},
		{map[string]any{"dashboards": map[string]any{"labelValue": "a b"}}, "at '/dashboards/labelValue'"},
		{map[string]any{"dashboards": map[string]any{"namespace": "Grafana"}}, "at '/dashboards/namespace'"},
		// What the API server takes.
		{map[string]any{"podLabels": map[string]any{"example.com/team": "gpu_a.b", "empty": ""}, "podAnnotations": map[string]any{"Example.COM/x": "any thing"},
			"service": map[string]any{"labels": map[string]any{"version": "2"}}, "nodeSelector": map[string]any{"kubernetes.io/arch": "amd64"},
			"priorityClassName": "system-node-critical", "serviceAccount": map[string]any{"name": "gpu.exporter"},
			"tenants": map[string]any{"existingConfigMap": "t", "existingConfigMapKey": "tenants_v2.yaml"}, "dashboards": map[string]any{"labelValue": ""}}, ""},
		{map[string]any{"nodePools": []any{map[string]any{"name": "a", "nodeSelector": map[string]any{"nvidia.com/gpu.present": nil, "pool": "a"}}}}, ""},
	}, nil)
}

// TestRequestsWithinLimits: a limit given alone below the request
// values.yaml keeps (--set resources.limits.memory=32Mi), which the API
// server refuses, fails the rendering naming both; before, the chart
// rendered it and the install failed at the DaemonSet. Equal amounts in
// other units, and requests set to null, render.
func TestRequestsWithinLimits(t *testing.T) {
	res := func(r map[string]any) map[string]any { return map[string]any{"resources": r} }
	checkCases(t, []valuesCase{
		{res(map[string]any{"limits": map[string]any{"memory": "32Mi"}}),
			"resources.requests.memory=64Mi is more than resources.limits.memory=32Mi, which the API server refuses"},
		{res(map[string]any{"limits": map[string]any{"cpu": "0.01"}}), "resources.requests.cpu=50m is more than resources.limits.cpu=0.01"},
		{res(map[string]any{"requests": map[string]any{"cpu": 2}, "limits": map[string]any{"cpu": "1500m"}}), "resources.requests.cpu=2 is more than"},
		{map[string]any{"tenants": map[string]any{"config": map[string]any{"tenants": []any{}}, "reload": "sidecar",
			"reloader": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "8Mi"}}}}},
			"tenants.reloader.resources.requests.memory=16Mi is more than tenants.reloader.resources.limits.memory=8Mi"},
		{res(map[string]any{"limits": map[string]any{"cpu": "abc"}}), "at '/resources/limits/cpu': 'abc' does not match"},
		{res(map[string]any{"limits": map[string]any{"cpu": -1}}), "at '/resources/limits/cpu': minimum"},
		{res(map[string]any{"requests": map[string]any{"cpu": "1.1", "memory": "1Gi"}, "limits": map[string]any{"cpu": "1100m", "memory": "1024Mi"}}), ""},
		{res(map[string]any{"requests": nil, "limits": map[string]any{"memory": "32Mi"}}), ""},
		{res(map[string]any{"limits": map[string]any{"memory": "1Gi", "nvidia.com/gpu": 1}}), ""},
	}, nil)
}

// TestNoClashWithTheChart: an extra volume named as one of the chart's,
// an extra mount (or the MPS pipe directory) where the exporter mounts one
// of its own, a nameOverride that is no label value, or a dashboards.label
// the chart sets itself fails the rendering naming the value; before, the
// chart rendered a pod with two volumes of a name or two mounts at a path
// (the API server refuses both), an app.kubernetes.io/name label it
// refuses, or a dashboard ConfigMap with one label key twice.
func TestNoClashWithTheChart(t *testing.T) {
	extra := func(path string) map[string]any {
		return map[string]any{"extraVolumes": []any{map[string]any{"name": "x", "emptyDir": map[string]any{}}},
			"extraVolumeMounts": []any{map[string]any{"name": "x", "mountPath": path}}}
	}
	checkCases(t, []valuesCase{
		{map[string]any{"extraVolumes": []any{map[string]any{"name": "proc", "emptyDir": map[string]any{}}}}, "extraVolumes: a volume named proc: the chart names one of its own so"},
		{extra("/host/proc"), "extraVolumeMounts: mountPath /host/proc: the chart mounts a volume of its own there"},
		{extra("/var/lib/vgpu_exporter/"), "extraVolumeMounts: mountPath /var/lib/vgpu_exporter/:"},
		{map[string]any{"tuner": map[string]any{"mode": "enforce", "mps": map[string]any{"pipeDirectory": "/run/vgpu-exporter"}}},
			"the release: tuner.mps.pipeDirectory=/run/vgpu-exporter: the exporter has a volume of its own there"},
		{map[string]any{"fullnameOverride": "gpu", "nameOverride": "my gpu"}, `nameOverride="my gpu" gives the label app.kubernetes.io/name="my gpu", which the API server refuses`},
		{map[string]any{"nameOverride": "-x-"}, `nameOverride="-x-" gives the label app.kubernetes.io/name="-x"`},
		{map[string]any{"dashboards": map[string]any{"label": "app.kubernetes.io/name"}}, "dashboards.label.app.kubernetes.io/name: the chart sets this label itself"},
		{extra("/host/proc/x"), ""},
		{map[string]any{"fullnameOverride": "gpu", "nameOverride": "Gpu_X"}, ""},
		{map[string]any{"dashboards": map[string]any{"label": "example.com/dashboard"}}, ""},
	}, nil)
}
