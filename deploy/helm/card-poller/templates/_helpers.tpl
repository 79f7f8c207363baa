{{/* Release-scoped name, at most 63 characters (DNS label). */}}
{{- define "card-poller.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "card-poller.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector of one component (api, worker-card, …): args (dict "root" $ "component" "api"). */}}
{{- define "card-poller.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "card-poller.image" -}}
{{ printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end -}}

{{- define "card-poller.secretName" -}}
{{- default (printf "%s-env" (include "card-poller.fullname" .)) .Values.existingSecret -}}
{{- end -}}

{{/* DATABASE_URL: postgresql.url, or composed from its fields (user and password URL-escaped). */}}
{{- define "card-poller.databaseUrl" -}}
{{- if .Values.postgresql.url -}}
{{- .Values.postgresql.url -}}
{{- else -}}
{{- $auth := urlquery .Values.postgresql.user -}}
{{- if .Values.postgresql.password }}{{ $auth = printf "%s:%s" $auth (urlquery .Values.postgresql.password) }}{{ end -}}
{{- printf "postgres://%s@%s:%v/%s" $auth .Values.postgresql.host .Values.postgresql.port .Values.postgresql.database -}}
{{- end -}}
{{- end -}}

{{/* The API token, required unless existingSecret provides it. */}}
{{- define "card-poller.apiToken" -}}
{{- $token := required "api.token is required (at least 8 characters): the API listens off loopback, where it refuses the development token; or set existingSecret" .Values.api.token -}}
{{- if lt (len $token) 8 }}{{ fail "api.token must be at least 8 characters" }}{{ end -}}
{{- if eq $token "dev-token-change-me" }}{{ fail "api.token must not be the development token" }}{{ end -}}
{{- $token -}}
{{- end -}}

{{/* Pod-level settings shared by every component. */}}
{{- define "card-poller.podCommon" -}}
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Environment of every app container: the ConfigMap, then the Secret. */}}
{{- define "card-poller.envFrom" -}}
envFrom:
  - configMapRef:
      name: {{ include "card-poller.fullname" . }}-env
  - secretRef:
      name: {{ include "card-poller.secretName" . }}
{{- end -}}

{{/* Rolls the pods when the configuration changes. */}}
{{- define "card-poller.configChecksum" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end -}}
