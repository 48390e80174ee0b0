{{- define "switchyard.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "switchyard.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "switchyard.labels" -}}
app.kubernetes.io/name: {{ include "switchyard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "switchyard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "switchyard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "switchyard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "switchyard.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "switchyard.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The environment every Switchyard container gets: secrets by reference. */}}
{{- define "switchyard.env" -}}
- name: SWITCHYARD_DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ .Values.secrets.databaseUrl.name }}, key: {{ .Values.secrets.databaseUrl.key }}}}
- name: SWITCHYARD_REDIS_URL
  valueFrom: {secretKeyRef: {name: {{ .Values.secrets.redisUrl.name }}, key: {{ .Values.secrets.redisUrl.key }}}}
- name: SWITCHYARD_STATE__KEYS
  valueFrom: {secretKeyRef: {name: {{ .Values.secrets.stateKeys.name }}, key: {{ .Values.secrets.stateKeys.key }}}}
{{- with .Values.secrets.adminToken }}
{{- if .name }}
- name: SWITCHYARD_ADMIN__TOKEN
  valueFrom: {secretKeyRef: {name: {{ .name }}, key: {{ .key }}}}
{{- end }}
{{- end }}
{{- range .Values.secrets.upstreamEnv }}
- name: {{ .env }}
  valueFrom: {secretKeyRef: {name: {{ .name }}, key: {{ .key }}}}
{{- end }}
{{- end -}}

{{- define "switchyard.securityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: ["ALL"]}
seccompProfile: {type: RuntimeDefault}
{{- end -}}
