{{- define "pyexec.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "pyexec.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "pyexec.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "pyexec.storeSecret" -}}
{{- default (printf "%s-store" (include "pyexec.fullname" .)) .Values.store.existingSecret -}}
{{- end -}}

{{- define "pyexec.tokenSecret" -}}
{{- default (printf "%s-token" (include "pyexec.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}
