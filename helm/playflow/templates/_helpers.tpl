{{/* Names */}}
{{- define "playflow.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "playflow.fullname" -}}
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

{{- define "playflow.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels: app.kubernetes.io/* on everything; component selects one part. */}}
{{- define "playflow.labels" -}}
helm.sh/chart: {{ include "playflow.chart" .root }}
app.kubernetes.io/name: {{ include "playflow.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: playflow
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end -}}

{{- define "playflow.selectorLabels" -}}
app.kubernetes.io/name: {{ include "playflow.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "playflow.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "playflow.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (printf "%s-operator" (include "playflow.fullname" .)) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Secret names */}}
{{- define "playflow.encryptionSecret" -}}
{{- default (printf "%s-encryption" (include "playflow.fullname" .)) .Values.encryption.existingSecret -}}
{{- end -}}
{{- define "playflow.tokenSecret" -}}
{{- default (printf "%s-api-token" (include "playflow.fullname" .)) .Values.apiToken.existingSecret -}}
{{- end -}}
{{- define "playflow.databaseSecret" -}}
{{- if .Values.postgresql.enabled -}}
{{- printf "%s-postgresql" (include "playflow.fullname" .) -}}
{{- else -}}
{{- required "postgresql.external.existingSecret is required when postgresql.enabled is false" .Values.postgresql.external.existingSecret -}}
{{- end -}}
{{- end -}}
{{- define "playflow.databaseSecretKey" -}}
{{- if .Values.postgresql.enabled -}}url{{- else -}}{{ .Values.postgresql.external.secretKey }}{{- end -}}
{{- end -}}
{{- define "playflow.serverUrl" -}}
{{- printf "http://%s-server:%v" (include "playflow.fullname" .) .Values.server.service.port -}}
{{- end -}}

{{/* Broker URL as an env entry: in-chart NATS (no credentials) or from a Secret. */}}
{{- define "playflow.brokerEnv" -}}
{{- if .Values.nats.enabled }}
- name: BROKER_URL
  value: {{ printf "nats://%s-nats:4222" (include "playflow.fullname" .) | quote }}
{{- else }}
- name: BROKER_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "nats.external.existingSecret is required when nats.enabled is false" .Values.nats.external.existingSecret }}
      key: {{ .Values.nats.external.secretKey }}
{{- end }}
{{- end -}}

{{- define "playflow.tokenEnv" -}}
{{- if .Values.apiToken.enabled }}
- name: PLAYFLOW_API_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "playflow.tokenSecret" . }}
      key: token
{{- end }}
{{- end -}}

{{- define "playflow.commonEnv" -}}
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: SERVER_API_URL
  value: {{ include "playflow.serverUrl" . | quote }}
{{- include "playflow.tokenEnv" . }}
{{- end -}}

{{- define "playflow.containerSecurityContext" -}}
{{- toYaml .Values.securityContext }}
{{- end -}}
