{{/*
The ServiceMonitor and the PodMonitor: which targets are scraped, and the
labels every scrape adds from pod metadata (docs/metrics.md: no metric
carries them itself; dashboards and alerts group by them).
*/}}

{{/* What a monitor selects: this release's router, worker and cachemanager
pods (PodMonitor; not the test pod), or their Services that carry a metrics
port (ServiceMonitor: the workers' headless Service, the cachemanager's and
the router's metrics-only one, labelled kvfleet.io/metrics by
kvfleet.service; not the client-facing router Service). Takes
(dict "root" $ "kind" KIND). */}}
{{- define "kvfleet.monitoring.selector" -}}
matchLabels:
  app.kubernetes.io/name: {{ .root.Chart.Name }}
  app.kubernetes.io/instance: {{ .root.Release.Name }}
  {{- if eq .kind "ServiceMonitor" }}
  kvfleet.io/metrics: "true"
  {{- end }}
matchExpressions:
  - key: app.kubernetes.io/component
    operator: In
    values:
      - router
      - worker
      - cachemanager
{{- end -}}

{{- define "kvfleet.monitoring.relabelings" -}}
- sourceLabels: [__meta_kubernetes_namespace]
  targetLabel: namespace
- sourceLabels: [__meta_kubernetes_pod_name]
  targetLabel: pod
- sourceLabels: [__meta_kubernetes_pod_label_app_kubernetes_io_component]
  targetLabel: component
- sourceLabels: [__meta_kubernetes_pod_label_kvfleet_io_model]
  targetLabel: model
{{- end -}}

{{/* A ServiceMonitor or a PodMonitor ("kind"), configured by "values"
(metrics.serviceMonitor or metrics.podMonitor): both scrape the port named
"metrics"; they differ in what they select and in the key of their
endpoints. Takes (dict "root" $ "kind" KIND "values" VALUES). */}}
{{- define "kvfleet.monitor" -}}
{{- $root := .root -}}
apiVersion: monitoring.coreos.com/v1
kind: {{ .kind }}
metadata:
  name: {{ include "kvfleet.fullname" $root }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "kvfleet.releaseLabels" $root | nindent 4 }}
    {{- with .values.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  namespaceSelector:
    matchNames:
      - {{ $root.Release.Namespace }}
  selector:
    {{- include "kvfleet.monitoring.selector" . | nindent 4 }}
  {{ ternary "endpoints" "podMetricsEndpoints" (eq .kind "ServiceMonitor") }}:
    - port: metrics
      path: /metrics
      scheme: http
      interval: {{ .values.interval }}
      scrapeTimeout: {{ .values.scrapeTimeout }}
      relabelings:
        {{- include "kvfleet.monitoring.relabelings" $root | nindent 8 }}
{{- end -}}
