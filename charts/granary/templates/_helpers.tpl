{{/* Labels every object of the release carries; "component" names the part. */}}
{{- define "granary.labels" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/part-of: granary
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end }}

{{/* The labels that select a component's pods (never change them on upgrade). */}}
{{- define "granary.selector" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}

{{- define "granary.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The Secret holding the shared API token under the key "token". */}}
{{- define "granary.tokenSecret" -}}
{{ .Values.token.existingSecret | default "granary-cache-node-token" }}
{{- end }}

{{/* Where the token and the TLS files are mounted in every container that needs them. */}}
{{- define "granary.tokenDir" -}}/etc/granary/token{{- end }}
{{- define "granary.tlsDir" -}}/etc/granary/tls{{- end }}

{{/* A control-plane container's security context: non-root, read-only root, no privileges. */}}
{{- define "granary.restrictedContainer" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "granary.pullSecrets" -}}
{{- with .Values.image.pullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end }}

{{- /* The node directory a root of file:// origins (cacheNode.fileOriginRoots,
checkpointOriginRoots) lies in, which the cache node mounts: a shared root's own
("shared:/srv/corpus": /srv/corpus), or for a root of namespaces the directory that holds the
namespaces' ("/srv/ckpt/{namespace}": /srv/ckpt). */ -}}
{{- define "granary.rootDirectory" -}}
{{- regexReplaceAll "/\\{namespace\\}(/.*)?$" (trimPrefix "shared:" .) "" -}}
{{- end }}
