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

{{/*
The operator's ServiceAccount, the only one its Roles are bound to. With serviceAccount.create=false
the chart creates no account, and the operator's must be named: falling back to the namespace's
`default` account would hand the operator's rights (Secrets, StatefulSet scale) to every pod that
runs as it — the workers run user code.
*/}}
{{- define "playflow.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- $name := default (printf "%s-operator" (include "playflow.fullname" .)) .Values.serviceAccount.name -}}
{{- range list "server" "worker" "nats" "postgresql" "test" -}}
{{- if eq $name (include "playflow.componentServiceAccountName" (dict "root" $ "component" .)) -}}
{{- fail (printf "serviceAccount.name %q is the %s's own ServiceAccount: the operator's Role must not be bound to an account another pod runs as" $name .) -}}
{{- end -}}
{{- end -}}
{{- if eq $name "default" -}}
{{- fail "serviceAccount.name must not be \"default\": the operator's Role would be bound to the account every other pod of the namespace runs as; create an account for the operator and name it" -}}
{{- end -}}
{{- $name -}}
{{- else -}}
{{- $name := required "serviceAccount.name is required when serviceAccount.create is false: name the operator's own ServiceAccount (its Role is never bound to a shared account such as default)" .Values.serviceAccount.name -}}
{{- if eq $name "default" -}}
{{- fail "serviceAccount.name must not be \"default\": the operator's Role would be bound to the account every other pod of the namespace runs as; create an account for the operator and name it" -}}
{{- end -}}
{{- $name -}}
{{- end -}}
{{- end -}}

{{/*
The ServiceAccount of a pod that needs no Kubernetes API (server, worker, NATS, PostgreSQL, the helm
test pod): its own, with no token mounted (serviceAccount.create), else the namespace's default
one — still with no token mounted (the pod sets automountServiceAccountToken: false).
*/}}
{{- define "playflow.componentServiceAccountName" -}}
{{- if .root.Values.serviceAccount.create -}}
{{- printf "%s-%s" (include "playflow.fullname" .root) .component -}}
{{- else -}}
default
{{- end -}}
{{- end -}}

{{/* A pod's account lines: its own ServiceAccount and no API token in the pod. */}}
{{- define "playflow.componentPodAccount" -}}
serviceAccountName: {{ include "playflow.componentServiceAccountName" . }}
automountServiceAccountToken: false
{{- end -}}

{{/* The ServiceAccount of a component (dict root component hook), when the chart creates accounts. */}}
{{- define "playflow.componentServiceAccount" -}}
{{- if .root.Values.serviceAccount.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "playflow.componentServiceAccountName" . }}
  labels:
    {{- include "playflow.labels" (dict "root" .root "component" .component) | nindent 4 }}
  {{- with .hook }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
# No pod of this component calls the Kubernetes API: no token to steal.
automountServiceAccountToken: false
---
{{- end }}
{{- end -}}

{{/*
Pod template metadata (dict root component values annotations): the chart's labels and
annotations plus the component's podLabels/podAnnotations. The chart's labels win (the selector
depends on them); a user's annotation wins over the chart's.
*/}}
{{- define "playflow.podMetadata" -}}
{{- $labels := include "playflow.labels" (dict "root" .root "component" .component) | fromYaml }}
{{- $labels = merge $labels (.values.podLabels | default dict) }}
labels:
  {{- toYaml $labels | nindent 2 }}
{{- $annotations := merge (deepCopy (.values.podAnnotations | default dict)) (.annotations | default dict) }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Pod scheduling (dict root component values): priorityClassName, topologySpreadConstraints (a
constraint without labelSelector gets the component's selector labels), nodeSelector,
tolerations, affinity.
*/}}
{{- define "playflow.podScheduling" -}}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- if .values.topologySpreadConstraints }}
{{- $selector := include "playflow.selectorLabels" (dict "root" .root "component" .component) | fromYaml }}
topologySpreadConstraints:
{{- range .values.topologySpreadConstraints }}
{{- $c := deepCopy . }}
{{- if not (hasKey $c "labelSelector") }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" $selector) }}
{{- end }}
  - {{ toYaml $c | indent 4 | trim }}
{{- end }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
A PodDisruptionBudget (dict root component values): minAvailable when set (it wins over the
default maxUnavailable, so `--set x.podDisruptionBudget.minAvailable=1` is enough), else
maxUnavailable.
*/}}
{{- define "playflow.podDisruptionBudget" -}}
{{- $pdb := .values.podDisruptionBudget }}
{{- if $pdb.enabled }}
{{- $hasMin := and (hasKey $pdb "minAvailable") (ne (toString $pdb.minAvailable) "") (ne (toString $pdb.minAvailable) "<nil>") }}
{{- $hasMax := and (hasKey $pdb "maxUnavailable") (ne (toString $pdb.maxUnavailable) "") (ne (toString $pdb.maxUnavailable) "<nil>") }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "playflow.fullname" .root }}-{{ .component }}
  labels:
    {{- include "playflow.labels" (dict "root" .root "component" .component) | nindent 4 }}
spec:
  {{- if $hasMin }}
  minAvailable: {{ $pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $hasMax | ternary $pdb.maxUnavailable 1 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "playflow.selectorLabels" (dict "root" .root "component" .component) | nindent 6 }}
{{- end }}
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

{{/*
Namespaces the operator watches, comma-separated: operator.watchNamespaces plus the release
namespace, which holds the chart's own WorkerPool (an operator that did not watch it would
never scale the workers).
*/}}
{{- define "playflow.operatorNamespaces" -}}
{{- append .Values.operator.watchNamespaces .Release.Namespace | uniq | join "," -}}
{{- end -}}

{{/* "true" when the chart's WorkerPool (and so the operator) owns the worker count, else "". */}}
{{- define "playflow.workerPoolEnabled" -}}
{{- if and .Values.worker.pool.enabled .Values.operator.enabled -}}true{{- end -}}
{{- end -}}

{{/*
The Secrets the ensure-secrets Job generates (operator/ensure-secrets.ts), as its --spec JSON;
empty when every secret comes from the user.
*/}}
{{- define "playflow.generatedSecrets" -}}
{{- $labels := dict "app.kubernetes.io/name" (include "playflow.name" .) "app.kubernetes.io/instance" .Release.Name "app.kubernetes.io/part-of" "playflow" "app.kubernetes.io/created-by" "playflow-ensure-secrets" }}
{{- $specs := list }}
{{- if not .Values.encryption.existingSecret }}
{{- $specs = append $specs (dict "name" (include "playflow.encryptionSecret" .) "labels" $labels "keys" (dict "key" (dict "random" "base64" "bytes" 32))) }}
{{- end }}
{{- if and .Values.apiToken.enabled (not .Values.apiToken.existingSecret) (not .Values.apiToken.value) }}
{{- $specs = append $specs (dict "name" (include "playflow.tokenSecret" .) "labels" $labels "keys" (dict "token" (dict "random" "alphanumeric" "length" 40))) }}
{{- end }}
{{- if .Values.postgresql.enabled }}
{{- $url := printf "postgres://%s:{password}@%s-postgresql:5432/%s" .Values.postgresql.username (include "playflow.fullname" .) .Values.postgresql.database }}
{{- $specs = append $specs (dict "name" (include "playflow.databaseSecret" .) "labels" $labels "keys" (dict "password" (dict "random" "alphanumeric" "length" 32) "url" (dict "template" $url))) }}
{{- end }}
{{- if $specs }}{{ toJson $specs }}{{ end }}
{{- end -}}
