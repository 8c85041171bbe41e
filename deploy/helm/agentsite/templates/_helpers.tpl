{{/* Names and labels. */}}
{{- define "agentsite.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "agentsite.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The pods of one component (server, postgresql, redis, migrate): the Service and the PDB select
     the server's alone. Call with (dict "root" $ "component" "server"). */}}
{{- define "agentsite.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "agentsite.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "agentsite.secretName" -}}
{{ .Values.existingSecret | default (include "agentsite.fullname" .) }}
{{- end -}}

{{/* A generated secret value, read back from the release's Secret when it exists (kept across
     upgrades); `helm template` has no cluster, so it makes a new one each time. */}}
{{- define "agentsite.kept" -}}
{{- $existing := lookup "v1" "Secret" .root.Release.Namespace (include "agentsite.fullname" .root) -}}
{{- if and $existing $existing.data (hasKey $existing.data .key) -}}
{{- index $existing.data .key | b64dec -}}
{{- else -}}
{{- randAlphaNum .length -}}
{{- end -}}
{{- end -}}

{{/* The Pod Security "restricted" profile for a container, with a read-only root filesystem. */}}
{{- define "agentsite.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The app's pods: the image's numeric user, /data writable for its group. */}}
{{- define "agentsite.podSecurity" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* ConfigMap and Secret are read by the migrate Job, which runs before the release's other
     resources exist: they are hooks of lower weight, made again at each install or upgrade. */}}
{{- define "agentsite.settingsHook" -}}
helm.sh/hook: pre-install,pre-upgrade
helm.sh/hook-weight: "-10"
helm.sh/hook-delete-policy: before-hook-creation
{{- end -}}
