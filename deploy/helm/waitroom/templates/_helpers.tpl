{{/* The release's name for every object, within DNS's 63 characters. */}}
{{- define "waitroom.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "waitroom.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "waitroom.selectorLabels" -}}
app.kubernetes.io/name: {{ include "waitroom.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "waitroom.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "waitroom.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The Secret the pods read: the operator's, or the chart's. */}}
{{- define "waitroom.secretName" -}}
{{- default (include "waitroom.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/*
A config value as the flag reads it: a list joined by commas, a whole
number without the exponent YAML's float64 would print (1e+06), anything
else as written. Empty for "" and null.
*/}}
{{- define "waitroom.flagValue" -}}
{{- if kindIs "slice" . }}
{{- $items := list }}
{{- range . }}{{ $items = append $items (include "waitroom.flagValue" .) }}{{ end }}
{{- join "," $items }}
{{- else if kindIs "float64" . }}
{{- if eq . (floor .) }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- else if not (kindIs "invalid" .) }}
{{- toString . }}
{{- end }}
{{- end }}

{{/*
--instances: what config says, else the most pods that may run, so that
failing open the pods together never let through more than the share.
*/}}
{{- define "waitroom.instances" -}}
{{- $given := include "waitroom.flagValue" (index .Values.config "instances") }}
{{- if $given }}{{ $given }}
{{- else if .Values.autoscaling.enabled }}{{ .Values.autoscaling.maxReplicas }}
{{- else }}{{ .Values.replicaCount }}
{{- end }}
{{- end }}

{{/*
Refuses values the chart would deploy wrongly or ignore; each message says
which value to change.
*/}}
{{- define "waitroom.validate" -}}
{{- $v := .Values }}
{{- if $v.autoscaling.enabled }}
{{- if lt (int $v.autoscaling.minReplicas) 2 }}
{{- fail "autoscaling.minReplicas must be at least 2: one pod is a single point of failure, and the PodDisruptionBudget could never let it drain" }}
{{- end }}
{{- if lt (int $v.autoscaling.maxReplicas) (int $v.autoscaling.minReplicas) }}
{{- fail "autoscaling.maxReplicas must be at least autoscaling.minReplicas" }}
{{- end }}
{{- else if lt (int $v.replicaCount) 2 }}
{{- fail "replicaCount must be at least 2: one pod is a single point of failure, and the PodDisruptionBudget could never let it drain" }}
{{- end }}
{{- if and $v.redis.existingSecret $v.redis.url }}
{{- fail "redis.existingSecret is set: the URL comes from that Secret, so leave redis.url empty" }}
{{- end }}
{{- if not (or $v.redis.existingSecret $v.redis.url) }}
{{- fail "redis.url is required (or redis.existingSecret): without Redis each pod would keep a queue of its own" }}
{{- end }}
{{- if and $v.redis.url (not (regexMatch "^(redis|rediss|redis\\+sentinel|redis\\+cluster)://" $v.redis.url)) }}
{{- fail "redis.url must be a redis://, rediss://, redis+sentinel:// or redis+cluster:// URL" }}
{{- end }}
{{- $s := $v.secrets }}
{{- if $s.existingSecret }}
{{- range $key := list "cookieSecret" "adminToken" "settleSecret" "databaseUrl" "amqpUrl" "webhookSecret" "smtpUrl" }}
{{- if index $s $key }}
{{- fail (printf "secrets.existingSecret is set: put secrets.%s into that Secret and leave it empty here" $key) }}
{{- end }}
{{- end }}
{{- else }}
{{- if and $s.cookieSecret (lt (len $s.cookieSecret) 32) }}
{{- fail "secrets.cookieSecret must be at least 32 bytes" }}
{{- end }}
{{- if and $s.webhookSecret (not (regexMatch "^whsec_[A-Za-z0-9+/=]+(,whsec_[A-Za-z0-9+/=]+)*$" $s.webhookSecret)) }}
{{- fail "secrets.webhookSecret must be whsec_ and base64 (new,old during a rotation)" }}
{{- end }}
{{- if and $s.settleSecret (lt (len $s.settleSecret) 32) }}
{{- fail "secrets.settleSecret must be at least 32 bytes" }}
{{- end }}
{{- if and $s.adminToken (or (lt (len $s.adminToken) 16) (regexMatch "\\s" $s.adminToken)) }}
{{- fail "secrets.adminToken must be at least 16 characters without spaces" }}
{{- end }}
{{- if and (gt (int $v.admin.port) 0) (not $s.adminToken) }}
{{- fail "admin.port serves the admin API, which is off without secrets.adminToken (or secrets.existingSecret)" }}
{{- end }}
{{- if and (gt (int $v.shop.port) 0) (not (and $s.databaseUrl $s.amqpUrl)) }}
{{- fail "shop.port serves the built-in shop, which needs secrets.databaseUrl and secrets.amqpUrl (or secrets.existingSecret)" }}
{{- end }}
{{- end }}
{{- if and $v.metrics.serviceMonitor.enabled (not $v.metrics.enabled) }}
{{- fail "metrics.serviceMonitor.enabled needs metrics.enabled: the ServiceMonitor scrapes the metrics port" }}
{{- end }}
{{- $ports := dict }}
{{- range $name, $port := dict "ports.http" $v.ports.http "metrics.port" (ternary $v.metrics.port 0 $v.metrics.enabled) "admin.port" $v.admin.port "shop.port" $v.shop.port }}
{{- if gt (int $port) 0 }}
{{- if hasKey $ports (toString $port) }}
{{- fail (printf "%s and %s are both port %v: each listener needs a port of its own" (get $ports (toString $port)) $name $port) }}
{{- end }}
{{- $_ := set $ports (toString $port) $name }}
{{- end }}
{{- end }}
{{- end }}
