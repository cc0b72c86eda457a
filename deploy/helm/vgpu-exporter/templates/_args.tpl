{{/*
The exporter's arguments, as a YAML list: those the values set, then
extraArgs. The exporter refuses a flag given twice unless it is repeatable,
so an extraArgs flag the chart already gives (log.level, ...), or that
extraArgs repeat, fails the rendering; so do --tuner.mode, --tuner.gpu-mode,
--tuner.enable-knob and --web.config.file, which values set (the pod
follows from them), a --tuner.disable-knob=pause_duty against tuner.pause,
and a second --web.listen-address on the chart's port. . is a dict:
Values, and the daemonset template's variables of the pool (where, t, sim,
meta, kubeletCA, saDir, hasTenants, web, mps, pause, pauseHost).
*/}}
{{- define "vgpu-exporter.args" -}}
{{- $args := include "vgpu-exporter.chartArgs" . | fromYamlArray }}
{{- /* The exporter's repeatable flags (--help marks them with "..."). */}}
{{- $repeatable := list "web.listen-address" "tuner.gpu-mode" "tuner.disable-knob" "tuner.autotune-param" "tuner.enable-knob" }}
{{- /* The flags whose values decide the pod's mounts, privileges, probes and checks: the chart's values only. */}}
{{- $tunerWhy := "the chart gives the pod the journal, kill switch, grace period, mounts and privileges the tuner's modes and knobs need from its values, which an extraArgs flag would bypass" }}
{{- $byValue := dict "tuner.mode" (list "tuner.mode" $tunerWhy) "tuner.gpu-mode" (list "tuner.gpuModes" $tunerWhy) "tuner.enable-knob" (list "tuner.pause.enabled" $tunerWhy) "tuner.node-lock" (list "tuner.nodeLock.hostPath" "every tuner in enforce on a node must lock the same file, which the chart mounts from the node")
      "web.config.file" (list "web.config.existingSecret" "with it the chart mounts the Secret and probes the port alone; the probes' plain HTTP requests would fail TLS or basic auth, and the kubelet restart the exporter for ever") }}
{{- range $a := .Values.extraArgs }}
{{- $name := regexReplaceAll "^--(no-)?([^=]*).*$" $a "${2}" }}
{{- with get $byValue $name }}
{{- fail (printf "%s: extraArgs %s: set %s instead: %s" $.where $a (index . 0) (index . 1)) }}
{{- end }}
{{- $value := regexReplaceAll "^[^=]*=?" $a "" }}
{{- /* Another TCP listener on the chart's port: the exporter would exit, the address in use. */}}
{{- if and (eq $name "web.listen-address") (not (hasPrefix "vsock://" $value)) (eq (regexReplaceAll "^.*:" $value "") (toString (int $.Values.port))) }}
{{- fail (printf "%s: extraArgs %s: the exporter already listens on port %d (--web.listen-address=:%d, from the value port), and would exit with the address in use: give another port, or set port" $.where $a (int $.Values.port) (int $.Values.port)) }}
{{- end }}
{{- if and $.pause (eq $name "tuner.disable-knob") (eq $value "pause_duty") }}
{{- fail (printf "%s: extraArgs %s: tuner.pause.enabled gives --tuner.enable-knob=pause_duty, and the exporter refuses a knob both enabled and disabled: set tuner.pause.enabled to false instead" $.where $a) }}
{{- end }}
{{- if not (has $name $repeatable) }}
{{- range $args }}
{{- if eq $name (regexReplaceAll "^--(no-)?([^=]*).*$" . "${2}") }}
{{- fail (printf "%s: extraArgs %s: the exporter already gets %s (from the chart's values, or extraArgs), and it refuses a flag given twice: set the chart's value for it instead (values.yaml)" $.where $a .) }}
{{- end }}
{{- end }}
{{- end }}
{{- /* A kill switch naming a directory (a ConfigMap volume's ..data one), always there: engaged for good; the exporter refuses it at start, tuner on or off. An empty one is none. */}}
{{- $noKillSwitch := and (eq $name "tuner.kill-switch-file") (contains "=" $a) (eq $value "") }}
{{- if and (eq $name "tuner.kill-switch-file") (contains "=" $a) (ne $value "") }}
{{- $base := regexReplaceAll "^.*/" $value "" }}
{{- if or (eq $base "") (eq $base ".") (hasPrefix ".." $base) }}
{{- fail (printf "%s: extraArgs %s: names a directory (or a ConfigMap volume's own ..data), which is always there: the kill switch would be engaged for good, and the exporter refuses it; give a file's path, its last element not '.', not beginning with '..', no '/' at its end" $.where $a) }}
{{- end }}
{{- end }}
{{- /* The journal written, the kill switch read: on a volume, the root filesystem being read-only and the image's. */}}
{{- if and $.t.active (has $name (list "tuner.journal" "tuner.kill-switch-file")) (not $noKillSwitch) }}
{{- $path := regexReplaceAll "^[^=]*=?" $a "" }}
{{- $on := false }}
{{- range $.Values.extraVolumeMounts }}
{{- $dir := printf "%s/" (trimSuffix "/" (toString (get . "mountPath"))) }}
{{- if and (hasPrefix $dir $path) (ne $dir "/") (or (eq $name "tuner.kill-switch-file") (not (get . "readOnly"))) }}{{ $on = true }}{{ end }}
{{- end }}
{{- if not $on }}
{{- fail (printf "%s: extraArgs %s: %q is on no volume of extraVolumeMounts (writable, for the journal), so the tuner could not write its journal or its kill switch could never be engaged: set tuner.journal.hostPath or tuner.killSwitch instead, or mount the file's directory" $.where $a $path) }}
{{- end }}
{{- end }}
{{- $args = append $args $a }}
{{- end }}
{{- toYaml $args }}
{{- end -}}

{{- /* The arguments the values set (vgpu-exporter.args). */}}
{{- define "vgpu-exporter.chartArgs" -}}
{{- $t := .t }}
{{- $sim := .sim }}
{{- $meta := .meta }}
{{- $kubeletCA := .kubeletCA }}
{{- $saDir := .saDir }}
{{- $hasTenants := .hasTenants }}
{{- $web := .web }}
{{- $mps := .mps }}
{{- $pause := .pause }}
{{- $pauseHost := .pauseHost }}
- --backend={{ $.Values.backend }}
{{- if $sim }}
{{- with $.Values.sim.scenario }}
- --sim.scenario={{ . }}
{{- end }}
{{- with $.Values.sim.seed }}
- --sim.seed={{ int64 . }}
{{- end }}
{{- end }}
- --web.listen-address=:{{ $.Values.port }}
- --sample.interval={{ $.Values.sampleInterval }}
- --log.level={{ $.Values.log.level }}
- --log.format={{ $.Values.log.format }}
- --proc.root=/host/proc
{{- if $.Values.kubernetes.podResources.enabled }}
- --kubernetes.pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock
- --tenants.kubernetes-default={{ $.Values.tenants.kubernetesDefault }}
{{- end }}
{{- if $.Values.kubernetes.podInfo.enabled }}
- --kubernetes.pod-info
- --kubernetes.pod-info.max-series={{ int $.Values.kubernetes.podInfo.maxSeries }}
{{- end }}
{{- if $meta.enabled }}
{{- if eq $meta.source "kubelet" }}
{{- /* The exporter joins the node's IP (IPv4 or IPv6) and port 10250
     into the URL: "https://$(NODE_IP):10250/pods" is no URL on an IPv6
     node, and brackets are no IPv4 address. */}}
- --kubernetes.pod-metadata=kubelet
- --kubernetes.pod-metadata.kubelet-address=$(NODE_IP)
{{- if $kubeletCA }}
- --kubernetes.pod-metadata.ca-file=/etc/vgpu_exporter/kubelet-ca/{{ $meta.kubeletCA.key }}
{{- else }}
- --kubernetes.pod-metadata.ca-file={{ $saDir }}/ca.crt
{{- end }}
{{- else }}
- --kubernetes.pod-metadata={{ trimSuffix "/" $.Values.kubernetes.apiServer }}/api/v1/pods?fieldSelector=spec.nodeName%3D$(NODE_NAME)
- --kubernetes.pod-metadata.ca-file={{ $saDir }}/ca.crt
{{- end }}
- --kubernetes.pod-metadata.bearer-token-file={{ $saDir }}/token
{{- end }}
{{- if $hasTenants }}
- --tenants.config=/etc/vgpu_exporter/tenants/{{ include "vgpu-exporter.tenantsKey" $ }}
{{- end }}
{{- if $web }}
- --web.config.file=/etc/vgpu_exporter/web/{{ $.Values.web.config.key }}
{{- end }}
{{- if $t.active }}
- --tuner.mode={{ $t.mode }}
- --tuner.interval={{ $t.interval }}
- --tuner.restore-timeout={{ $t.restoreTimeout }}
{{- range $t.gpuModes }}
- --tuner.gpu-mode={{ . }}
{{- end }}
{{- if and $t.enforce (not $t.tuneClocksAndPower) }}
{{- /* Whatever else gives SYS_ADMIN (profilingCapability): the knobs off, not left to fail. */}}
- --tuner.disable-knob=locked_clocks
- --tuner.disable-knob=power_limit
{{- end }}
{{- if $t.journal.hostPath }}
- --tuner.journal=/var/lib/vgpu_exporter/tuner-journal.jsonl
{{- end }}
{{- if include "vgpu-exporter.nodeLock" $ }}
- --tuner.node-lock=/run/vgpu-exporter/tuner.lock
{{- end }}
{{- if ne $t.killSwitch.source "none" }}
- --tuner.kill-switch-file=/etc/vgpu_exporter/kill-switch/{{ $t.killSwitch.file }}
{{- end }}
{{- if $mps }}
- --mps.control-binary={{ $t.mps.controlBinary }}
- --mps.pipe-directory={{ $t.mps.pipeDirectory }}
{{- with $t.mps.restartHook }}
- --mps.restart-hook={{ . }}
{{- end }}
{{- else }}
- --mps.control-binary=
{{- end }}
- --nvidia-smi.path={{ $t.nvidiaSMI.path }}
{{- with $t.rebalanceHook.command }}
- --tuner.rebalance-hook={{ . }}
{{- if eq . "builtin:kubernetes-evict" }}
- --tuner.rebalance-hook.kubernetes-api-server={{ trimSuffix "/" $.Values.kubernetes.apiServer }}
{{- end }}
{{- end }}
{{- with $t.slowLoop.every }}
- --tuner.slow-loop.every={{ . }}
{{- end }}
{{- with $t.slowLoop.dwell }}
- --tuner.slow-loop.dwell={{ . }}
{{- end }}
{{- with $t.slowLoop.coolDown }}
- --tuner.slow-loop.cool-down={{ . }}
{{- end }}
{{- with $t.slowLoop.hold }}
- --tuner.slow-loop.hold={{ . }}
{{- end }}
{{- range $k, $v := $t.autotuneParams }}
- {{ printf "--tuner.autotune-param=%s=%v" $k $v | quote }}
{{- end }}
{{- if $pause }}
- --tuner.enable-knob=pause_duty
- --pause.period={{ $t.pause.period }}
- --pause.max={{ $t.pause.max }}
{{- end }}
- --pause.cgroup-root={{ if $pauseHost }}/host/sys/fs/cgroup{{ end }}
{{- if $pauseHost }}
- --pause.supervise
{{- end }}
{{- end }}
{{- end -}}
