{{/* The labels every object carries (the same as deploy/'s). */}}
{{- define "admitter.labels" -}}
app.kubernetes.io/name: admitter
{{- end }}

{{/* The controller's ServiceAccount as the API server names it in requests. */}}
{{- define "admitter.username" -}}
system:serviceaccount:{{ .Release.Namespace }}:admitter
{{- end }}

{{/* One webhook of admitter/webhook/registration.py (`_hook`): dict with name, path, rules
and optional selectors, failurePolicy (Fail unless given) and timeoutSeconds (5 unless given),
plus the root context as "root" and the CA bundle as "ca". */}}
{{- define "admitter.webhook" -}}
- name: {{ .name }}
  clientConfig:
    service:
      name: admitter-webhook
      namespace: {{ .root.Release.Namespace }}
      path: {{ .path }}
      port: 9443
    {{- with .ca }}
    caBundle: {{ . }}
    {{- end }}
  rules:
    {{- toYaml .rules | nindent 4 }}
  {{- with .namespaceSelector }}
  namespaceSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .objectSelector }}
  objectSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: {{ .failurePolicy | default "Fail" }}
  matchPolicy: Equivalent
  {{- if hasPrefix "/mutate" .path }}
  reinvocationPolicy: Never
  {{- end }}
  timeoutSeconds: {{ .timeoutSeconds | default 5 }}
{{- end }}

{{/* The opt-in webhooks' namespaceSelector: the settings' selector, never matching the
control plane's namespaces or admitter's own (UnlabelledWork.webhook_namespace_selector). */}}
{{- define "admitter.unlabelledNamespaceSelector" -}}
{{- $selector := required "settings.unlabelledWork.namespaceSelector is required" .namespaceSelector -}}
{{- if not (or $selector.matchLabels $selector.matchExpressions) -}}
{{- fail (printf "settings.unlabelledWork.namespaceSelector: %s selects every namespace; name the label that opts a namespace in, e.g. matchLabels: {admitter.dev/quota: enforced}" (toJson $selector)) -}}
{{- end -}}
{{- $never := dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" (list "kube-system" "kube-public" "kube-node-lease" "admitter-system") -}}
{{- $out := dict -}}
{{- with $selector.matchLabels }}{{ $_ := set $out "matchLabels" . }}{{ end -}}
{{- $_ := set $out "matchExpressions" (append ($selector.matchExpressions | default list) $never) -}}
{{- toYaml $out -}}
{{- end }}
