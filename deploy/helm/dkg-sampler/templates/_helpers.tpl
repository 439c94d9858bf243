{{/* A DNS-1123 name for the sampler of one topic: <release>-<chart>-<topic>, at most 63 characters. */}}
{{- define "dkg-sampler.name" -}}
{{- $topic := .topic | lower | replace "_" "-" | replace "." "-" -}}
{{- printf "%s-%s-%s" .root.Release.Name .root.Chart.Name $topic | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dkg-sampler.labels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{ include "dkg-sampler.selectorLabels" . }}
{{- end -}}

{{- define "dkg-sampler.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
dkg-topic: {{ .topic | trunc 63 | quote }}
{{- end -}}

{{- define "dkg-sampler.validate" -}}
{{- if not .Values.kafka.bootstrapServers -}}
{{- fail "kafka.bootstrapServers is required" -}}
{{- end -}}
{{- if not .Values.topics -}}
{{- fail "topics is required: the data topics to balance, one sampler each" -}}
{{- end -}}
{{- end -}}
