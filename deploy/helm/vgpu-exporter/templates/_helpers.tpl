{{/* Name of the chart, or nameOverride. */}}
{{- define "vgpu-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
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
