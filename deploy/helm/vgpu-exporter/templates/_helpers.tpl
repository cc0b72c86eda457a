{{/* Name of the chart, or nameOverride: the value of the label
app.kubernetes.io/name, which the pods are selected by. */}}
{{- define "vgpu-exporter.name" -}}
{{- $name := default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- if not (regexMatch "^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$" $name) -}}
{{- fail (printf "nameOverride=%q gives the label app.kubernetes.io/name=%q, which the API server refuses: letters, digits, '-', '_' and '.', beginning and ending with a letter or digit" .Values.nameOverride $name) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{/* Full name: release and chart name, or fullnameOverride. */}}
{{- define "vgpu-exporter.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Name of the chart's cluster-scoped objects (ClusterRole,
ClusterRoleBinding) and of what it puts in a namespace other than the
release's: the release's namespace, a dot, the full name. A namespace has
no dot, so two releases (of one name in two namespaces, or of two names)
never share one; at most 63+1+63 characters, a valid DNS subdomain. */}}
{{- define "vgpu-exporter.clusterName" -}}
{{- printf "%s.%s" .Release.Namespace (include "vgpu-exporter.fullname" .) -}}
{{- end -}}

{{/* Fails on a key of the labels given as (list ROOT NAME LABELS KEY...)
that the chart sets itself (its labels, and each KEY it sets there too): a
second value of one key in the manifest, which a strict decoder refuses
and another reads as the last; on the Service, a selector label replaced
would keep the ServiceMonitor from finding it, on the pods the
DaemonSet's selector from matching its own template. */}}
{{- define "vgpu-exporter.noOwnLabels" -}}
{{- $own := include "vgpu-exporter.labels" (index . 0) | fromYaml -}}
{{- range slice . 3 -}}
{{- $_ := set $own . "" -}}
{{- end -}}
{{- range $k, $_ := index . 2 -}}
{{- if hasKey $own $k -}}
{{- fail (printf "%s.%s: the chart sets this label itself (and selects by the app.kubernetes.io/ ones): choose another key" (index $ 1) $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Fails where a directory of the node the pod would write, given as
(list NAME PATH), is the node's root or a system directory, lies in a
tree of the system's programs, kernel or node agents (/usr/bin,
/etc/kubernetes, /var/lib/kubelet/pods), or climbs with "..": the pod,
root, could write the whole of it. */}}
{{- define "vgpu-exporter.ownDir" -}}
{{- $name := index . 0 -}}
{{- $path := index . 1 -}}
{{- $system := list "/" "/bin" "/boot" "/dev" "/etc" "/home" "/lib" "/lib64" "/opt" "/proc" "/root" "/run" "/sbin" "/srv" "/sys" "/tmp" "/usr" "/var" "/var/lib" "/var/lib/kubelet" "/var/lib/containerd" "/var/lib/docker" "/var/log" "/var/run" "/run/nvidia" -}}
{{- $trees := list "/bin" "/boot" "/dev" "/lib" "/lib64" "/proc" "/sbin" "/sys" "/usr" "/etc/kubernetes" "/var/lib/containerd" "/var/lib/docker" "/var/lib/etcd" "/var/lib/kubelet" -}}
{{- $inTree := false -}}
{{- range $trees -}}
{{- if or (eq (clean $path) .) (hasPrefix (printf "%s/" .) (clean $path)) -}}
{{- $inTree = true -}}
{{- end -}}
{{- end -}}
{{- if or (has (clean $path) $system) $inTree (has ".." (splitList "/" $path)) -}}
{{- fail (printf "%s=%s: the pod writes this directory of the node as root: give it a directory of its own (as the default is), not the node's root, a system directory, one under /usr, /etc/kubernetes, /var/lib/kubelet and the like, or a path that climbs with '..'" $name $path) -}}
{{- end -}}
{{- end -}}

{{- define "vgpu-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vgpu-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "vgpu-exporter.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "vgpu-exporter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: exporter
{{- end -}}

{{- define "vgpu-exporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "vgpu-exporter.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Whether a tenants file is configured, from values or a ConfigMap. */}}
{{- define "vgpu-exporter.hasTenants" -}}
{{- if or .Values.tenants.config .Values.tenants.existingConfigMap -}}true{{- end -}}
{{- end -}}

{{- define "vgpu-exporter.tenantsConfigMap" -}}
{{- default (printf "%s-tenants" (include "vgpu-exporter.fullname" .)) .Values.tenants.existingConfigMap -}}
{{- end -}}

{{- define "vgpu-exporter.tenantsKey" -}}
{{- if .Values.tenants.existingConfigMap -}}{{ .Values.tenants.existingConfigMapKey }}{{- else -}}tenants.yaml{{- end -}}
{{- end -}}

{{/* The tenants ConfigMap's data, shared by the ConfigMap and its checksum. */}}
{{- define "vgpu-exporter.tenantsData" -}}
tenants.yaml: |
{{ toYaml .Values.tenants.config | indent 2 }}
{{- end -}}

{{/* Groups of every generated rule file in files/alerts/, in file order. */}}
{{- define "vgpu-exporter.ruleGroups" -}}
{{- $groups := list -}}
{{- range $path, $_ := .Files.Glob "files/alerts/*.yaml" -}}
{{- $doc := $.Files.Get $path | fromYaml -}}
{{- if hasKey $doc "Error" -}}
{{- fail (printf "%s: %s" $path (get $doc "Error")) -}}
{{- end -}}
{{- $groups = concat $groups (default list $doc.groups) -}}
{{- end -}}
{{- toYaml $groups -}}
{{- end -}}

{{/*
The DaemonSets to render, as a YAML list: one per node pool (or one for the
whole release when nodePools is empty), each with its name, where (as
its errors name it: "nodePools NAME" or "the release"), its nodeSelector
(the release's, or with backend nvml and none given, GPU feature
discovery's nvidia.com/gpu.present=true, with the pool's keys set, null ones
removed), tolerations, affinity and tuner settings (the release's with
the pool's keys replacing them, maps one level deep); it fails where a
pool's tuner.gpuModes gives a GPU two entries.
*/}}
{{- define "vgpu-exporter.pools" -}}
{{- $pools := list -}}
{{- $given := .Values.nodePools -}}
{{- if not $given -}}
{{- $given = list (dict "name" "") -}}
{{- end -}}
{{- range $p := $given -}}
{{- $sel := deepCopy (default dict $.Values.nodeSelector) -}}
{{- if and (not $sel) (eq $.Values.backend "nvml") -}}
{{- $sel = dict "nvidia.com/gpu.present" "true" -}}
{{- end -}}
{{- range $k, $v := (default dict (get $p "nodeSelector")) -}}
{{- if kindIs "invalid" $v -}}
{{- $_ := unset $sel $k -}}
{{- else -}}
{{- $_ := set $sel $k (toString $v) -}}
{{- end -}}
{{- end -}}
{{- $t := deepCopy $.Values.tuner -}}
{{- range $k, $v := (default dict (get $p "tuner")) -}}
{{- if and (kindIs "map" $v) (kindIs "map" (get $t $k)) -}}
{{- $sub := deepCopy (get $t $k) -}}
{{- range $k2, $v2 := $v -}}
{{- $_ := set $sub $k2 $v2 -}}
{{- end -}}
{{- $_ := set $t $k $sub -}}
{{- else -}}
{{- $_ := set $t $k $v -}}
{{- end -}}
{{- end -}}
{{- $where := ternary (printf "nodePools %s" $p.name) "the release" (ne $p.name "") -}}
{{- $mode := toString (default "off" $t.mode) -}}
{{- $enforce := eq $mode "enforce" -}}
{{- /* One entry a GPU, told apart as the exporter does, by the text before "=". */ -}}
{{- $gpus := dict -}}
{{- range $t.gpuModes -}}
{{- $gpu := first (splitList "=" .) -}}
{{- if hasKey $gpus $gpu -}}
{{- fail (printf "%s: tuner.gpuModes %q: GPU %s is given a mode twice (%q, then %q), which the exporter refuses at start (--tuner.gpu-mode): give each GPU one entry" $where . $gpu (get $gpus $gpu) .) -}}
{{- end -}}
{{- $_ := set $gpus $gpu . -}}
{{- if hasSuffix "=enforce" . -}}{{- $enforce = true -}}{{- end -}}
{{- end -}}
{{- $_ := set $t "mode" $mode -}}
{{- $_ := set $t "active" (or (ne $mode "off") (not (empty $t.gpuModes))) -}}
{{- $_ := set $t "enforce" $enforce -}}
{{- $pools = append $pools (dict
      "name" $p.name
      "where" $where
      "nodeSelector" $sel
      "tolerations" (ternary (get $p "tolerations") $.Values.tolerations (hasKey $p "tolerations"))
      "affinity" (ternary (get $p "affinity") $.Values.affinity (hasKey $p "affinity"))
      "tuner" $t) -}}
{{- end -}}
{{- /* No node may run two exporters: two pools must both select on a label with different values. */ -}}
{{- range $i, $a := $pools -}}
{{- range $j, $b := $pools -}}
{{- if lt $i $j -}}
{{- if eq $a.name $b.name -}}
{{- fail (printf "nodePools: two pools named %q" $a.name) -}}
{{- end -}}
{{- $apart := false -}}
{{- range $k, $v := $a.nodeSelector -}}
{{- if and (hasKey $b.nodeSelector $k) (ne (get $b.nodeSelector $k) $v) -}}{{- $apart = true -}}{{- end -}}
{{- end -}}
{{- if not $apart -}}
{{- fail (printf "nodePools %q and %q may select the same node (their nodeSelectors %v and %v): give both a label key with different values, so that no node runs two exporters" $a.name $b.name $a.nodeSelector $b.nodeSelector) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $pools -}}
{{- end -}}

{{/* The kill-switch ConfigMap's name. */}}
{{- define "vgpu-exporter.killSwitchConfigMap" -}}
{{- default (printf "%s-kill-switch" (include "vgpu-exporter.fullname" .root)) .tuner.killSwitch.configMap -}}
{{- end -}}

{{/* "true" when the pool's tuner locks the node lock, given as a dict
(Values, t: the pool's tuner settings): in enforce, where it acts on the
node's GPUs (the simulator's are the pod's own). */}}
{{- define "vgpu-exporter.nodeLock" -}}
{{- if and .t.enforce (ne .Values.backend "sim") -}}true{{- end -}}
{{- end -}}

{{/* "true" when a pool in enforce runs a rebalancing hook that evicts pods. */}}
{{- define "vgpu-exporter.evictPods" -}}
{{- range include "vgpu-exporter.pools" . | fromYamlArray -}}
{{- if and .tuner.enforce .tuner.rebalanceHook.command .tuner.rebalanceHook.evictPods -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* A duration of the form the schema takes (1m30s, 500ms: ms, s, m, h) in
milliseconds, given as (list NAME VALUE); one longer than a Go duration
holds (2562047h47m16.854s, what the exporter and Prometheus parse) fails
naming NAME, before its milliseconds could overflow. */}}
{{- define "vgpu-exporter.ms" -}}
{{- $name := index . 0 -}}
{{- $v := toString (index . 1) -}}
{{- $units := dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000 -}}
{{- $most := 9223372036854 -}}
{{- $ms := 0 -}}
{{- range regexFindAll "[0-9]+(ms|s|m|h)" $v -1 -}}
{{- $n := regexFind "^[0-9]+" . -}}
{{- $unit := get $units (trimPrefix $n .) -}}
{{- if or (gt (len $n) 13) (gt (atoi $n) (div $most $unit)) -}}
{{- $ms = add $most 1 -}}
{{- else -}}
{{- $ms = add $ms (mul (atoi $n) $unit) -}}
{{- end -}}
{{- if gt $ms $most -}}
{{- fail (printf "%s=%s is longer than a duration can be (at most 2562047h47m16.854s): the exporter and Prometheus refuse it" $name $v) -}}
{{- end -}}
{{- end -}}
{{- $ms -}}
{{- end -}}

{{/* A resource quantity (64Mi, 0.5, 100m), as a number of its units, to
compare two by; empty for one of the exponent form (1e3), left to the API
server. */}}
{{- define "vgpu-exporter.quantity" -}}
{{- $q := toString . -}}
{{- $n := regexFind "^[+]?([0-9]+([.][0-9]*)?|[.][0-9]+)" $q -}}
{{- $units := dict "" 1 "n" 1e-9 "u" 1e-6 "m" 0.001 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "Pi" 1125899906842624 "Ei" 1152921504606846976 -}}
{{- $unit := trimPrefix $n $q -}}
{{- if and $n (hasKey $units $unit) -}}
{{- mulf (float64 (trimPrefix "+" $n)) (get $units $unit) -}}
{{- end -}}
{{- end -}}

{{/* Fails where the resources given as (list NAME RESOURCES) request more
of one than they limit it to, which the API server refuses: values.yaml's
requests stay unless set, so a limit given alone below one of them does. */}}
{{- define "vgpu-exporter.requestsWithinLimits" -}}
{{- $name := index . 0 -}}
{{- $r := default dict (index . 1) -}}
{{- $requests := default dict (get $r "requests") -}}
{{- range $k, $limit := default dict (get $r "limits") -}}
{{- if hasKey $requests $k -}}
{{- $req := include "vgpu-exporter.quantity" (get $requests $k) -}}
{{- $lim := include "vgpu-exporter.quantity" $limit -}}
{{- /* Above by more than rounding (1.1 and 1100m). */ -}}
{{- if and $req $lim (gt (float64 $req) (mulf (float64 $lim) 1.000000001)) -}}
{{- fail (printf "%s.requests.%s=%v is more than %s.limits.%s=%v, which the API server refuses (values.yaml's requests stay unless set): set %s.requests.%s too, at most the limit, or to null" $name $k (get $requests $k) $name $k $limit $name $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The path the exporter serves its metrics on: /metrics, or the
--web.telemetry-path of extraArgs (given once: a second one fails the
rendering). */}}
{{- define "vgpu-exporter.telemetryPath" -}}
{{- $path := "/metrics" -}}
{{- range .Values.extraArgs -}}
{{- if hasPrefix "--web.telemetry-path=" . -}}{{- $path = trimPrefix "--web.telemetry-path=" . -}}{{- end -}}
{{- end -}}
{{- $path -}}
{{- end -}}
