package helmtest

import (
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/deploy/internal/repo"
)

// repeatableFlag is a flag --help marks as repeatable: "--name=VALUE ...".
var repeatableFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--(?:\[no-\])?([a-z0-9.-]+)\S* \.\.\.`)

// TestExtraArgs: extraArgs follow the chart's flags; a flag the exporter
// takes once (every one --help does not mark repeatable) is refused when
// the chart already gives it or extraArgs repeat it, as the exporter
// would refuse it at start; a repeatable one, given by the chart and
// twice more, renders; a journal or kill switch file of the tuner's must
// be on a volume of extraVolumeMounts.
func TestExtraArgs(t *testing.T) {
	c := loadChart(t)
	out, err := exec.Command(repo.Exporter(t), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	var repeatable []string
	for _, m := range repeatableFlag.FindAllStringSubmatch(string(out), -1) {
		repeatable = append(repeatable, m[1])
	}
	if !slices.Contains(repeatable, "tuner.gpu-mode") {
		t.Fatalf("no repeatable flag found in --help (%q)", repeatable)
	}
	// The tuner's mode, a GPU's and the opt-in knob are the chart's values,
	// whatever extraArgs say: the pod's mounts, privileges and checks
	// follow from them.
	byValue := []string{"tuner.mode", "tuner.gpu-mode", "tuner.enable-knob"}
	// The tuner in enforce with the pause: the chart gives every
	// repeatable flag it can (gpu-mode, autotune-param, enable-knob).
	tuner := map[string]any{"mode": "enforce", "gpuModes": []any{"1=recommend"}, "pause": map[string]any{"enabled": true},
		"autotuneParams": map[string]any{"pause_gain": 0.2}}
	for _, f := range repeatable {
		if slices.Contains(byValue, f) {
			continue // refused below
		}
		extra := []any{"--" + f + "=a", "--" + f + "=b"}
		m := mustRender(t, c, map[string]any{"tuner": tuner, "extraArgs": extra})
		args := container(t, m.daemonSets[0].Spec.Template.Spec.Containers, "exporter").Args
		if got := args[len(args)-2:]; !slices.Equal(got, []string{"--" + f + "=a", "--" + f + "=b"}) {
			t.Errorf("extraArgs %q: args end with %q", extra, got)
		}
	}
	checkCases(t, []valuesCase{
		// What values.yaml once gave as its example.
		{map[string]any{"extraArgs": []any{"--log.level=debug"}}, "the release: extraArgs --log.level=debug: the exporter already gets --log.level=info"},
		{map[string]any{"kubernetes": map[string]any{"podInfo": map[string]any{"enabled": true}}, "extraArgs": []any{"--no-kubernetes.pod-info"}},
			"extraArgs --no-kubernetes.pod-info: the exporter already gets --kubernetes.pod-info"},
		{map[string]any{"extraArgs": []any{"--web.max-requests=10", "--web.max-requests=20"}},
			"extraArgs --web.max-requests=20: the exporter already gets --web.max-requests=10"},
		{map[string]any{"nodePools": []any{map[string]any{"name": "a", "tuner": map[string]any{"mode": "recommend"}}},
			"extraArgs": []any{"--tuner.interval=5s"}}, "nodePools a: extraArgs --tuner.interval=5s"},
		// The tuner switched on, or to enforce, behind the chart's values:
		// no journal, kill switch, grace period or privilege checks.
		{map[string]any{"extraArgs": []any{"--tuner.mode=enforce"}}, "the release: extraArgs --tuner.mode=enforce: set tuner.mode instead"},
		{map[string]any{"extraArgs": []any{"--tuner.gpu-mode=0=enforce"}}, "extraArgs --tuner.gpu-mode=0=enforce: set tuner.gpuModes instead"},
		{map[string]any{"tuner": map[string]any{"mode": "recommend"}, "extraArgs": []any{"--tuner.gpu-mode=0=enforce"}},
			"extraArgs --tuner.gpu-mode=0=enforce: set tuner.gpuModes instead"},
		{map[string]any{"tuner": map[string]any{"mode": "enforce"}, "extraArgs": []any{"--tuner.enable-knob=pause_duty"}},
			"extraArgs --tuner.enable-knob=pause_duty: set tuner.pause.enabled instead"},
		// TLS or basic auth the probes do not know of: 401, or a TLS
		// handshake they do not make, and the pod restarted for ever.
		{map[string]any{"extraArgs": []any{"--web.config.file=/etc/web/web.yml"}},
			"extraArgs --web.config.file=/etc/web/web.yml: set web.config.existingSecret instead"},
		// A second listener on the chart's port: the exporter exits, the
		// address in use.
		{map[string]any{"extraArgs": []any{"--web.listen-address=127.0.0.1:9949"}},
			"extraArgs --web.listen-address=127.0.0.1:9949: the exporter already listens on port 9949"},
		{map[string]any{"port": 9100, "extraArgs": []any{"--web.listen-address=[::1]:9100"}},
			"extraArgs --web.listen-address=[::1]:9100: the exporter already listens on port 9100"},
		// The exporter refuses a knob both enabled and disabled.
		{map[string]any{"nodePools": []any{map[string]any{"name": "a", "tuner": map[string]any{"mode": "recommend", "pause": map[string]any{"enabled": true}}}},
			"extraArgs": []any{"--tuner.disable-knob=pause_duty"}}, "nodePools a: extraArgs --tuner.disable-knob=pause_duty: tuner.pause.enabled"},
		// The journal and the kill switch the chart does not give: on no volume.
		{map[string]any{"tuner": map[string]any{"mode": "recommend", "journal": map[string]any{"hostPath": ""}},
			"extraArgs": []any{"--tuner.journal=/var/lib/j/journal.jsonl"}}, `"/var/lib/j/journal.jsonl" is on no volume of extraVolumeMounts`},
		{map[string]any{"tuner": map[string]any{"mode": "recommend", "journal": map[string]any{"hostPath": ""}},
			"extraVolumeMounts": []any{map[string]any{"name": "j", "mountPath": "/var/lib/j", "readOnly": true}},
			"extraArgs":         []any{"--tuner.journal=/var/lib/j/journal.jsonl"}}, "is on no volume of extraVolumeMounts (writable, for the journal)"},
		{map[string]any{"tuner": map[string]any{"mode": "recommend", "killSwitch": map[string]any{"source": "none"}},
			"extraVolumeMounts": []any{map[string]any{"name": "k", "mountPath": "/etc/k"}},
			"extraArgs":         []any{"--tuner.kill-switch-file=/etc/kill"}}, `"/etc/kill" is on no volume`},
		// The kill switch naming its mounted directory, or a ConfigMap
		// volume's ..data: always there, engaged for good (the exporter
		// refuses it at start, the tuner on or off).
		{killSwitchArg("/etc/k/"), "the release: extraArgs --tuner.kill-switch-file=/etc/k/: names a directory"},
		{killSwitchArg("/etc/k/."), "extraArgs --tuner.kill-switch-file=/etc/k/.: names a directory"},
		{killSwitchArg("/etc/k/.."), "extraArgs --tuner.kill-switch-file=/etc/k/..: names a directory"},
		{killSwitchArg("/etc/k/..data"), "extraArgs --tuner.kill-switch-file=/etc/k/..data: names a directory"},
		{map[string]any{"extraArgs": []any{"--tuner.kill-switch-file=/etc/k/"}}, "extraArgs --tuner.kill-switch-file=/etc/k/: names a directory"},
		// A flag the chart does not give, once; the journal and the kill
		// switch on volumes of extraVolumeMounts (or with the tuner off,
		// unused).
		{map[string]any{"extraArgs": []any{"--web.max-requests=80", "--tuner.interval=5s", "--tuner.journal=/j.jsonl"}}, ""},
		{map[string]any{"tuner": map[string]any{"mode": "enforce"}, "extraArgs": []any{"--web.max-requests=80", "--tuner.disable-knob=pause_duty", "--tuner.disable-knob=locked_clocks"}}, ""},
		{map[string]any{"extraArgs": []any{"--web.max-requests=80", "--web.listen-address=127.0.0.1:9100", "--web.listen-address=vsock://:9949"}}, ""},
		{map[string]any{"tuner": map[string]any{"mode": "recommend", "journal": map[string]any{"hostPath": ""}, "killSwitch": map[string]any{"source": "none"}},
			"extraVolumeMounts": []any{map[string]any{"name": "j", "mountPath": "/var/lib/j/"}, map[string]any{"name": "k", "mountPath": "/etc/k", "readOnly": true}},
			"extraArgs":         []any{"--web.max-requests=80", "--tuner.journal=/var/lib/j/journal.jsonl", "--tuner.kill-switch-file=/etc/k/off"}}, ""},
		{killSwitchArg("/etc/k/.off", "--web.max-requests=80"), ""},
		// An empty kill switch is none, to the exporter: nothing to mount.
		{map[string]any{"extraArgs": []any{"--web.max-requests=80", "--tuner.kill-switch-file="}}, ""},
		{killSwitchArg("", "--web.max-requests=80"), ""},
	}, func(tc valuesCase, m *manifests) {
		if args := container(t, m.daemonSets[0].Spec.Template.Spec.Containers, "exporter").Args; !slices.Contains(args, "--web.max-requests=80") {
			t.Errorf("values %v: args %q lack extraArgs' --web.max-requests=80", tc.vals, args)
		}
	})
}

// killSwitchArg: values of a tuner in recommend with no kill switch of
// the chart's, and file as extraArgs' --tuner.kill-switch-file, on a
// mount of /etc/k, after more extraArgs.
func killSwitchArg(file string, more ...any) map[string]any {
	return map[string]any{"tuner": map[string]any{"mode": "recommend", "killSwitch": map[string]any{"source": "none"}},
		"extraVolumeMounts": []any{map[string]any{"name": "k", "mountPath": "/etc/k", "readOnly": true}},
		"extraArgs":         append(more, "--tuner.kill-switch-file="+file)}
}

// TestTelemetryPath: the ServiceMonitor scrapes, and the install notes
// read, the path the exporter serves its metrics on: /metrics, or the
// --web.telemetry-path of extraArgs.
func TestTelemetryPath(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		extra []any
		want  string
	}{
		{[]any{}, "/metrics"},
		{[]any{"--web.max-requests=80", "--web.telemetry-path=/vgpu/metrics"}, "/vgpu/metrics"},
	} {
		vals := map[string]any{"extraArgs": tc.extra}
		rendered, err := render(c, vals)
		if err != nil {
			t.Fatal(err)
		}
		m, err := decode(rendered)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.serviceMonitors[0].Spec.Endpoints[0].Path; got != tc.want {
			t.Errorf("extraArgs %q: the ServiceMonitor scrapes %s, the exporter serves %s", tc.extra, got, tc.want)
		}
		if notes := rendered["vgpu-exporter/templates/NOTES.txt"]; !strings.Contains(notes, ":metrics/proxy"+tc.want+"\n") {
			t.Errorf("extraArgs %q: the install notes do not read %s:\n%s", tc.extra, tc.want, notes)
		}
	}
}
