{{/*
Names, labels and the small pieces every component shares. Components are
"router", "worker" and "cachemanager"; helpers that need one take
(dict "root" $ "component" NAME).
*/}}

{{/* The prefix of every object's name: at most 40 characters, so that
"<prefix>-cachemanager" and the StatefulSet's pods stay within 63. */}}
{{- define "kvfleet.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* "<fullname>-<component>": the Deployment, StatefulSet and Service of a component. */}}
{{- define "kvfleet.componentName" -}}
{{- printf "%s-%s" (include "kvfleet.fullname" .root) .component -}}
{{- end -}}

{{- define "kvfleet.router.fullname" -}}
{{- include "kvfleet.componentName" (dict "root" . "component" "router") -}}
{{- end -}}

{{- define "kvfleet.worker.fullname" -}}
{{- include "kvfleet.componentName" (dict "root" . "component" "worker") -}}
{{- end -}}

{{- define "kvfleet.cachemanager.fullname" -}}
{{- include "kvfleet.componentName" (dict "root" . "component" "cachemanager") -}}
{{- end -}}

{{/* The router's metrics-only Service (ClusterIP, whatever router.service.type
is): the client-facing router Service carries gRPC alone, so a NodePort or
LoadBalancer never exposes metrics outside the cluster. */}}
{{- define "kvfleet.router.metricsName" -}}
{{- printf "%s-metrics" (include "kvfleet.router.fullname" .) -}}
{{- end -}}

{{/* A worker group's StatefulSet, PodDisruptionBudget and ScaledObject:
"<fullname>-worker", then "-<name>" for a named group. Takes a root (a
group's, kvfleet.worker.eachGroup; the release's has no group). */}}
{{- define "kvfleet.worker.groupFullname" -}}
{{- include "kvfleet.worker.fullname" . -}}
{{- with (.Group | default dict).name }}-{{ . }}{{ end -}}
{{- end -}}

{{/* A worker group's headless Service: the StatefulSet's serviceName. Takes a root. */}}
{{- define "kvfleet.worker.headlessName" -}}
{{- printf "%s-headless" (include "kvfleet.worker.groupFullname" .) -}}
{{- end -}}

{{- define "kvfleet.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The model id: model.id, else the file name without ".gguf" (what the binaries default to). */}}
{{- define "kvfleet.modelId" -}}
{{- default (trimSuffix ".gguf" .Values.model.file) .Values.model.id -}}
{{- end -}}

{{/* Where router and worker open the model. */}}
{{- define "kvfleet.modelPath" -}}
{{- printf "/models/%s" .Values.model.file -}}
{{- end -}}

{{/* Where workers open the draft heads (model.draftHeadsDir). */}}
{{- define "kvfleet.draftHeadsPath" -}}
{{- printf "/models/%s" .Values.model.draftHeadsDir -}}
{{- end -}}

{{/* Where workers open the draft model (model.draftFile). */}}
{{- define "kvfleet.draftModelPath" -}}
{{- printf "/models/%s" .Values.model.draftFile -}}
{{- end -}}

{{/* Labels that select a component's pods; never change them (selectors are
immutable). The root of a named worker group adds kvfleet.io/worker-group,
so that the group's objects select its own pods alone. */}}
{{- define "kvfleet.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- with (.root.Group | default dict).name }}
kvfleet.io/worker-group: {{ . }}
{{- end }}
{{- end -}}

{{/* Every label of a component's objects and pods. A worker's kvfleet.io/model
(its group's model) feeds the scrape-time "model" label (docs/metrics.md);
routers and the cachemanager serve every model and carry none (the
router's series label their model themselves). A named worker group adds
kvfleet.io/worker-role. */}}
{{- define "kvfleet.labels" -}}
helm.sh/chart: {{ include "kvfleet.chart" .root }}
{{ include "kvfleet.selectorLabels" . }}
app.kubernetes.io/part-of: kvfleet
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- if eq .component "worker" }}
kvfleet.io/model: {{ include "kvfleet.modelId" .root | quote }}
{{- end }}
{{- with .root.Group }}{{ if .name }}
kvfleet.io/worker-role: {{ .role }}
{{- end }}{{ end }}
{{- end -}}

{{/* Labels of objects that belong to no single component (the release as a whole). */}}
{{- define "kvfleet.releaseLabels" -}}
helm.sh/chart: {{ include "kvfleet.chart" . }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: kvfleet
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Pod labels: the user's podLabels, then the chart's (which win). The test
pod has no values of its own, so no podLabels. */}}
{{- define "kvfleet.podLabels" -}}
{{- $values := index .root.Values .component | default dict -}}
{{- $labels := merge (include "kvfleet.labels" . | fromYaml) (deepCopy ($values.podLabels | default dict)) -}}
{{- toYaml $labels -}}
{{- end -}}

{{/* A component's ServiceAccount name. */}}
{{- define "kvfleet.serviceAccountName" -}}
{{- $sa := (index .root.Values .component).serviceAccount -}}
{{- if $sa.create -}}
{{- default (include "kvfleet.componentName" .) $sa.name -}}
{{- else -}}
{{- default "default" $sa.name -}}
{{- end -}}
{{- end -}}

{{/* "repository:tag" of a component's kvfleet image: the CUDA variant for GPU
workers, the CPU variant for everything else, unless the component overrides it. */}}
{{- define "kvfleet.image" -}}
{{- $override := (index .root.Values .component).image -}}
{{- $repository := default .root.Values.image.repository $override.repository -}}
{{- $variant := .root.Values.image.tag -}}
{{- if and (eq .component "worker") (gt (int (include "kvfleet.worker.gpus" .root)) 0) -}}
{{- $variant = .root.Values.image.cudaTag -}}
{{- end -}}
{{- $tag := default $variant $override.tag -}}
{{- printf "%s:%s" $repository (toString $tag) -}}
{{- end -}}

{{/* Pod-level settings every kvfleet pod shares. */}}
{{- define "kvfleet.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}

{{/* Scheduling settings of a component: nodeSelector, tolerations, affinity,
priorityClassName (none for the test pod, which has no values of its own). */}}
{{- define "kvfleet.scheduling" -}}
{{- $values := index .root.Values .component | default dict -}}
{{- with $values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A pod template's metadata: the pod labels and the component's podAnnotations.
Takes (dict "root" $ "component" NAME). */}}
{{- define "kvfleet.podMetadata" -}}
{{- $values := index .root.Values .component | default dict -}}
{{- $annotations := merge (dict) (.annotations | default dict) ($values.podAnnotations | default dict) -}}
labels:
  {{- include "kvfleet.podLabels" . | nindent 2 }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The fields every kvfleet pod spec starts with: the ServiceAccount (the
component's, or that of "serviceAccountOf" when given: the test pod runs as
the router), podCommon and the component's scheduling. Takes
(dict "root" $ "component" NAME ["serviceAccountOf" NAME]). */}}
{{- define "kvfleet.podSpecCommon" -}}
serviceAccountName: {{ include "kvfleet.serviceAccountName" (dict "root" .root "component" (default .component .serviceAccountOf)) }}
{{ include "kvfleet.podCommon" .root | trim }}
{{- with (include "kvfleet.scheduling" . | trim) }}
{{ . }}
{{- end }}
{{- end -}}

{{/* A service container's ports: grpc, metrics and health, the names the
Services' targetPorts and the monitors' endpoints refer to; the router's
http and the workers' kv-transfer when they are on. Takes
(dict "root" $ "component" NAME). */}}
{{- define "kvfleet.containerPorts" -}}
ports:
  - name: grpc
    containerPort: {{ include (printf "kvfleet.port.%sGrpc" .component) .root }}
    protocol: TCP
  - name: metrics
    containerPort: {{ include (printf "kvfleet.port.%sMetrics" .component) .root }}
    protocol: TCP
  - name: health
    containerPort: {{ include "kvfleet.port.health" .root }}
    protocol: TCP
{{- if and (eq .component "router") .root.Values.router.http.enabled }}
  - name: http
    containerPort: {{ include "kvfleet.port.routerHttp" .root }}
    protocol: TCP
{{- end }}
{{- if and (eq .component "worker") .root.Values.worker.kvTransfer.enabled }}
  - name: kv-transfer
    containerPort: {{ include "kvfleet.port.workerKvTransfer" .root }}
    protocol: TCP
{{- end }}
{{- end -}}

{{/* The args every service takes (list items, after its own): the metrics and
health ports, the log level and, with tls.enabled, the TLS flags
(kvfleet.tls.args), then the component's extraArgs, last so that a flag
repeated there wins (the services keep a flag's last value). Takes
(dict "root" $ "component" NAME). */}}
{{- define "kvfleet.commonArgs" -}}
{{- $values := index .root.Values .component -}}
- --metrics-port
- {{ include (printf "kvfleet.port.%sMetrics" .component) .root | quote }}
- --health-port
- {{ include "kvfleet.port.health" .root | quote }}
- --log-level
- {{ $values.logLevel }}
{{- with (include "kvfleet.tls.args" . | trim) }}
{{ . }}
{{- end }}
{{- range $values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/* A service container's env: the downward API (kvfleet.podEnv), then "env"
(the component's own entries, a list), then the component's extraEnv. Takes
(dict "root" $ "component" NAME ["env" LIST]). */}}
{{- define "kvfleet.containerEnv" -}}
{{- $values := index .root.Values .component -}}
env:
  {{- include "kvfleet.podEnv" .root | nindent 2 }}
  {{- with .env }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- with $values.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/* A Service of a component: "name", selecting the component's pods, with
"ports" (a list of "grpc", "metrics", "kv-transfer") at the component's port
numbers (kvfleet.port.<component><Name>), each targeting the container port
of the same name. "spec" holds the rest of
the spec (type, clusterIP, ...), "annotations" the metadata's. A Service with
a metrics port is labelled kvfleet.io/metrics: "true", which is what the
ServiceMonitor selects. Without TLS, gRPC (grpc, kv-transfer) is cleartext
HTTP/2: appProtocol kubernetes.io/h2c is what Gateway implementations need to
speak gRPC to it; with tls.enabled the port speaks TLS, so it claims no h2c
(a Gateway learns to originate TLS from a BackendTLSPolicy instead).
Takes (dict "root" $ "component" NAME "name" NAME "ports" LIST ["spec" DICT]
["annotations" DICT]). */}}
{{- define "kvfleet.service" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "kvfleet.labels" . | nindent 4 }}
    {{- if has "metrics" .ports }}
    kvfleet.io/metrics: "true"
    {{- end }}
  {{- with .annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  {{- with .spec }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  selector:
    {{- include "kvfleet.selectorLabels" . | nindent 4 }}
  ports:
    {{- range $name := .ports }}
    - name: {{ $name }}
      port: {{ include (printf "kvfleet.port.%s%s" $.component ($name | replace "-" " " | title | replace " " "")) $.root }}
      targetPort: {{ $name }}
      protocol: TCP
      {{- if and (has $name (list "grpc" "kv-transfer")) (not $.root.Values.tls.enabled) }}
      appProtocol: kubernetes.io/h2c
      {{- end }}
    {{- end }}
{{- end -}}

{{/* The downward-API environment: $(POD_NAME) and $(POD_IP) in args expand from these. */}}
{{- define "kvfleet.podEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- end -}}

{{/* The three gRPC probes on the plaintext health port. Readiness asks for
service "" (no service field); startup and liveness for "liveness". Takes
(dict "startupPeriod" N "startupFailures" N "probes" VALUES). */}}
{{- define "kvfleet.grpcProbes" -}}
startupProbe:
  grpc:
    port: {{ include "kvfleet.port.health" . }}
    service: liveness
  periodSeconds: {{ .startupPeriod }}
  failureThreshold: {{ .startupFailures }}
  timeoutSeconds: 2
readinessProbe:
  grpc:
    port: {{ include "kvfleet.port.health" . }}
  periodSeconds: {{ .probes.readiness.periodSeconds }}
  failureThreshold: {{ .probes.readiness.failureThreshold }}
  timeoutSeconds: 2
livenessProbe:
  grpc:
    port: {{ include "kvfleet.port.health" . }}
    service: liveness
  periodSeconds: {{ .probes.liveness.periodSeconds }}
  failureThreshold: {{ .probes.liveness.failureThreshold }}
  timeoutSeconds: 2
{{- end -}}

{{/* Ports fixed by the services' contract. */}}
{{- define "kvfleet.port.health" -}}8080{{- end -}}
{{- define "kvfleet.port.routerGrpc" -}}50060{{- end -}}
{{- define "kvfleet.port.routerMetrics" -}}9466{{- end -}}
{{- define "kvfleet.port.routerHttp" -}}8000{{- end -}}
{{- define "kvfleet.port.workerGrpc" -}}50051{{- end -}}
{{- define "kvfleet.port.workerMetrics" -}}9464{{- end -}}
{{- define "kvfleet.port.cachemanagerGrpc" -}}50050{{- end -}}
{{- define "kvfleet.port.cachemanagerMetrics" -}}9465{{- end -}}
{{/* The workers' KV transfer port: worker.kvTransfer.port. */}}
{{- define "kvfleet.port.workerKvTransfer" -}}{{ .Values.worker.kvTransfer.port | int }}{{- end -}}

{{/* Where routers and workers reach the cachemanager. */}}
{{- define "kvfleet.cachemanager.address" -}}
{{- printf "%s:%s" (include "kvfleet.cachemanager.fullname" .) (include "kvfleet.port.cachemanagerGrpc" .) -}}
{{- end -}}

{{/* Where clients inside the cluster reach the router. */}}
{{- define "kvfleet.router.address" -}}
{{- printf "%s:%s" (include "kvfleet.router.fullname" .) (include "kvfleet.port.routerGrpc" .) -}}
{{- end -}}

{{/* One container of the helm test Job: the kvfleet CLI (the router's image)
running "command"; with tls.enabled it mounts the routers' CA (the "tls"
volume of the Job, kvfleet.tls.volume with only ca.crt), with auth.enabled
the test token (the "auth-test-token" volume). Takes
(dict "root" $ "name" NAME "command" LIST). */}}
{{- define "kvfleet.test.container" -}}
- name: {{ .name }}
  image: {{ include "kvfleet.image" (dict "root" .root "component" "router") }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  command:
    {{- range .command }}
    - {{ . | quote }}
    {{- end }}
  securityContext:
    {{- toYaml .root.Values.containerSecurityContext | nindent 4 }}
  resources:
    requests:
      cpu: 50m
      memory: 32Mi
    limits:
      memory: 128Mi
  {{- if or .root.Values.tls.enabled .root.Values.auth.enabled }}
  volumeMounts:
    {{- if .root.Values.tls.enabled }}
    {{- include "kvfleet.tls.volumeMount" .root | nindent 4 }}
    {{- end }}
    {{- if .root.Values.auth.enabled }}
    {{- include "kvfleet.auth.testTokenVolumeMount" .root | nindent 4 }}
    {{- end }}
  {{- end }}
{{- end -}}

{{/*
TLS (tls.enabled; docs/deploy.md, "TLS"). Each component's certificate, key
and CA come from a Secret of type kubernetes.io/tls (tls.crt, tls.key,
ca.crt) that the user or cert-manager creates; the chart renders none. It is
mounted read-only at /etc/kvfleet/tls as a whole volume, never through
subPath, so the kubelet's updates reach the pod and the services, which
re-read the files every 10 s, pick up a renewed certificate without a
restart. The hops:
  clients -> router:          TLS (no client certificate asked)
  router  -> worker:          mutual TLS; the worker admits tls.router.clientName;
                              the router checks tls.worker.serverName (it dials pod IPs)
  router, worker -> cachemanager: mutual TLS; the cachemanager admits
                              tls.router.clientName and tls.worker.clientName
  worker  -> worker (KV transfer port, worker.kvTransfer): mutual TLS; the
                              transfer port admits tls.worker.clientName alone
                              (--kv-transfer-allowed-peers), the puller checks
                              tls.worker.serverName (--kv-transfer-tls-name);
                              rendered in worker-statefulset.yaml
Each service's own certificate is also its client certificate.
*/}}

{{/* Where a pod mounts its Secret. */}}
{{- define "kvfleet.tls.dir" -}}/etc/kvfleet/tls{{- end -}}

{{/* A component's Secret: tls.<component>.secretName, else
"<fullname>-<component>-tls". Takes (dict "root" $ "component" NAME). */}}
{{- define "kvfleet.tls.secretName" -}}
{{- default (printf "%s-tls" (include "kvfleet.componentName" .)) (index .root.Values.tls .component).secretName -}}
{{- end -}}

{{/* The name a component's certificate carries as a client, which the
services it calls admit (router, worker): tls.<component>.clientName, else
"<fullname>-<component>". Takes (dict "root" $ "component" NAME). */}}
{{- define "kvfleet.tls.clientName" -}}
{{- default (include "kvfleet.componentName" .) (index .root.Values.tls .component).clientName -}}
{{- end -}}

{{/* The name routers check on the workers' certificate (--worker-tls-name):
tls.worker.serverName, else "<fullname>-worker". */}}
{{- define "kvfleet.tls.workerServerName" -}}
{{- default (include "kvfleet.worker.fullname" .) .Values.tls.worker.serverName -}}
{{- end -}}

{{/* A component's TLS flags (list items; empty without tls.enabled), all
paths inside kvfleet.tls.dir:
  every service:  --tls-cert tls.crt --tls-key tls.key (its server and client certificate)
  router, worker: --tls-ca ca.crt (the peers they call: workers, the cachemanager)
  worker:         --tls-client-ca ca.crt --tls-allowed-peers <router> (its main port;
                  the KV transfer port's names are in worker-statefulset.yaml)
  cachemanager:   --tls-client-ca ca.crt --tls-allowed-peers <router>,<worker>
  router:         --worker-tls-name <tls.worker.serverName>
Takes (dict "root" $ "component" NAME). */}}
{{- define "kvfleet.tls.args" -}}
{{- if .root.Values.tls.enabled -}}
{{- $dir := include "kvfleet.tls.dir" .root -}}
{{- $router := include "kvfleet.tls.clientName" (dict "root" .root "component" "router") -}}
{{- $worker := include "kvfleet.tls.clientName" (dict "root" .root "component" "worker") -}}
- --tls-cert
- {{ $dir }}/tls.crt
- --tls-key
- {{ $dir }}/tls.key
{{- if ne .component "cachemanager" }}
- --tls-ca
- {{ $dir }}/ca.crt
{{- end }}
{{- if eq .component "router" }}
- --worker-tls-name
- {{ include "kvfleet.tls.workerServerName" .root | quote }}
{{- else }}
- --tls-client-ca
- {{ $dir }}/ca.crt
- --tls-allowed-peers
- {{ ternary (printf "%s,%s" $router $worker) $router (eq .component "cachemanager") | quote }}
{{- end }}
{{- end -}}
{{- end -}}

{{/* The pod volume "tls": a component's Secret, the keys in "keys" (default
all three), mode 0440 (owner root, group the pod's fsGroup, which the
services run with). Takes (dict "root" $ "component" NAME ["keys" LIST]). */}}
{{- define "kvfleet.tls.volume" -}}
- name: tls
  secret:
    secretName: {{ include "kvfleet.tls.secretName" . }}
    # 0440: readable by the pod's fsGroup, not by others.
    defaultMode: 288
    items:
      {{- range (.keys | default (list "tls.crt" "tls.key" "ca.crt")) }}
      - key: {{ . }}
        path: {{ . }}
      {{- end }}
{{- end -}}

{{/* The container's mount of the "tls" volume: read-only, the whole volume
(no subPath, so rotated files arrive). */}}
{{- define "kvfleet.tls.volumeMount" -}}
- name: tls
  mountPath: {{ include "kvfleet.tls.dir" . }}
  readOnly: true
{{- end -}}

{{/*
Authentication (auth.enabled; docs/deploy.md, "Authentication"). The routers
require `authorization: Bearer <token>` on every kvfleet.v1.Inference call
(--auth-tokens): their token file maps the SHA-256 of each token to a tenant
and holds no token. Two Secrets, both the user's (the chart renders none and
takes no token in its values):
  auth.tokensSecret     key "tokens": the token file; mounted by the router
                        pods only, at kvfleet.auth.dir
  auth.testTokenSecret  key "token": one plain token the helm test sends
                        (--token-file); mounted by the test Job only, at
                        kvfleet.auth.testTokenDir
Each is mounted read-only as a whole volume, never through subPath, so the
kubelet's updates reach the pod: the router re-reads its file when it
changes, and tokens are added or revoked without a restart.
*/}}

{{/* Where router pods mount the tokens Secret, and the file --auth-tokens names. */}}
{{- define "kvfleet.auth.dir" -}}/etc/kvfleet/auth{{- end -}}
{{- define "kvfleet.auth.tokensFile" -}}{{ include "kvfleet.auth.dir" . }}/tokens{{- end -}}

{{/* Where the test Job mounts the test token, and the file --token-file names. */}}
{{- define "kvfleet.auth.testTokenDir" -}}/etc/kvfleet/test-token{{- end -}}
{{- define "kvfleet.auth.testTokenFile" -}}{{ include "kvfleet.auth.testTokenDir" . }}/token{{- end -}}

{{/* The Secret holding the routers' token file: auth.tokensSecret, else "<fullname>-auth-tokens". */}}
{{- define "kvfleet.auth.tokensSecret" -}}
{{- default (printf "%s-auth-tokens" (include "kvfleet.fullname" .)) .Values.auth.tokensSecret -}}
{{- end -}}

{{/* The Secret holding the helm test's token: auth.testTokenSecret, else "<fullname>-auth-test-token". */}}
{{- define "kvfleet.auth.testTokenSecret" -}}
{{- default (printf "%s-auth-test-token" (include "kvfleet.fullname" .)) .Values.auth.testTokenSecret -}}
{{- end -}}

{{/* The router's --tenant-* flags for the quotas set above 0 (list items). */}}
{{- define "kvfleet.router.quotaArgs" -}}
{{- $q := .Values.router.tenantQuotas -}}
{{- range $flag, $value := dict "tenant-requests-per-second" $q.requestsPerSecond "tenant-request-burst" $q.requestBurst "tenant-tokens-per-second" $q.tokensPerSecond "tenant-token-burst" $q.tokenBurst "tenant-max-streams" $q.maxStreams }}
{{- if gt (float64 $value) 0.0 }}
- --{{ $flag }}
- {{ $value | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The router's split flags (list items), only while a worker group has
role prefill: --split-min-uncached-tokens router.split.minUncachedTokens (and
--split-stream-first-token with router.split.streamFirstToken), or --no-split
with router.split.enabled false. */}}
{{- define "kvfleet.router.splitArgs" -}}
{{- $prefill := false -}}
{{- range .Values.workerGroups }}{{ if eq .role "prefill" }}{{ $prefill = true }}{{ end }}{{ end -}}
{{- if and $prefill .Values.router.split.enabled -}}
- --split-min-uncached-tokens
- {{ .Values.router.split.minUncachedTokens | quote }}
{{- if .Values.router.split.streamFirstToken }}
- --split-stream-first-token
{{- end }}
{{- else if $prefill -}}
- --no-split
{{- end -}}
{{- end -}}

{{/* The router's auth flag (list items; empty without auth.enabled). */}}
{{- define "kvfleet.auth.routerArgs" -}}
{{- if .Values.auth.enabled -}}
- --auth-tokens
- {{ include "kvfleet.auth.tokensFile" . }}
{{- end -}}
{{- end -}}

{{/* The pod volume "auth-tokens" of the routers: the key "tokens" of the
tokens Secret, mode 0440 (owner root, group the pod's fsGroup). Not
optional: a router without its token file must not start. */}}
{{- define "kvfleet.auth.tokensVolume" -}}
- name: auth-tokens
  secret:
    secretName: {{ include "kvfleet.auth.tokensSecret" . }}
    # 0440: readable by the pod's fsGroup, not by others.
    defaultMode: 288
    items:
      - key: tokens
        path: tokens
{{- end -}}

{{/* The router container's mount of "auth-tokens": read-only, the whole
volume (no subPath, so an updated Secret reaches the router). */}}
{{- define "kvfleet.auth.tokensVolumeMount" -}}
- name: auth-tokens
  mountPath: {{ include "kvfleet.auth.dir" . }}
  readOnly: true
{{- end -}}

{{/* The test Job's volume "auth-test-token": the key "token" of the test
token Secret, mode 0440. */}}
{{- define "kvfleet.auth.testTokenVolume" -}}
- name: auth-test-token
  secret:
    secretName: {{ include "kvfleet.auth.testTokenSecret" . }}
    # 0440: readable by the pod's fsGroup, not by others.
    defaultMode: 288
    items:
      - key: token
        path: token
{{- end -}}

{{/* A test container's mount of "auth-test-token": read-only, no subPath. */}}
{{- define "kvfleet.auth.testTokenVolumeMount" -}}
- name: auth-test-token
  mountPath: {{ include "kvfleet.auth.testTokenDir" . }}
  readOnly: true
{{- end -}}

{{/*
Admins (auth.admin; docs/security.md, "Admin identity"): only they may load
and unload LoRA adapters at run time. Two ways, either or both:
  auth.admin.enabled       --admin-tokens: the admin token file (the tenant
                           token file's format: digests and names, never a
                           token), key "tokens" of auth.admin.tokensSecret,
                           the user's; mounted by the router pods only, at
                           kvfleet.auth.adminDir, read-only as a whole
                           volume (no subPath: the router re-reads the file
                           when it changes)
  auth.admin.peers         --admin-peers: client certificate names that are
                           admins over gRPC with mutual TLS (tls.enabled)
*/}}

{{/* Where router pods mount the admin tokens Secret, and the file --admin-tokens names. */}}
{{- define "kvfleet.auth.adminDir" -}}/etc/kvfleet/admin{{- end -}}
{{- define "kvfleet.auth.adminTokensFile" -}}{{ include "kvfleet.auth.adminDir" . }}/tokens{{- end -}}

{{/* The Secret holding the admin token file: auth.admin.tokensSecret, else "<fullname>-admin-tokens". */}}
{{- define "kvfleet.auth.adminTokensSecret" -}}
{{- default (printf "%s-admin-tokens" (include "kvfleet.fullname" .)) .Values.auth.admin.tokensSecret -}}
{{- end -}}

{{/* The router's admin flags (list items; empty without admins). */}}
{{- define "kvfleet.auth.adminArgs" -}}
{{- if .Values.auth.admin.enabled }}
- --admin-tokens
- {{ include "kvfleet.auth.adminTokensFile" . }}
{{- end }}
{{- with .Values.auth.admin.peers }}
- --admin-peers
- {{ join "," . | quote }}
{{- end }}
{{- end -}}

{{/* The pod volume "admin-tokens" of the routers: the key "tokens" of the
admin tokens Secret, mode 0440 (owner root, group the pod's fsGroup). Not
optional: a router told to take admin tokens must not start without them. */}}
{{- define "kvfleet.auth.adminTokensVolume" -}}
- name: admin-tokens
  secret:
    secretName: {{ include "kvfleet.auth.adminTokensSecret" . }}
    # 0440: readable by the pod's fsGroup, not by others.
    defaultMode: 288
    items:
      - key: tokens
        path: tokens
{{- end -}}

{{/* The router container's mount of "admin-tokens": read-only, the whole
volume (no subPath, so an updated Secret reaches the router). */}}
{{- define "kvfleet.auth.adminTokensVolumeMount" -}}
- name: admin-tokens
  mountPath: {{ include "kvfleet.auth.adminDir" . }}
  readOnly: true
{{- end -}}
