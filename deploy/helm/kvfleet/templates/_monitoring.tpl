{{/*
Shared by the ServiceMonitor and the PodMonitor: which pods are scraped, and
the labels every scrape adds from pod metadata (docs/metrics.md: no metric
carries them itself; dashboards and alerts group by them).
*/}}

{{- define "kvfleet.monitoring.selector" -}}
matchLabels:
  app.kubernetes.io/name: {{ .Chart.Name }}
  app.kubernetes.io/instance: {{ .Release.Name }}
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
