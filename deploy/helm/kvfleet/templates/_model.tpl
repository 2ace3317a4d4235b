{{/*
The model volume, shared by router and worker pods: whichever
model.source.type says, the GGUF ends up read-only at /models/<model.file>
(and a draft model's at /models/<model.draftFile>).
*/}}

{{/* The pod volume named "model". */}}
{{- define "kvfleet.model.volume" -}}
{{- $source := .Values.model.source -}}
- name: model
{{- if eq $source.type "pvc" }}
  persistentVolumeClaim:
    claimName: {{ $source.pvc.claimName }}
    readOnly: {{ $source.pvc.readOnly }}
{{- else if eq $source.type "hostPath" }}
  hostPath:
    path: {{ $source.hostPath.path }}
    type: {{ $source.hostPath.type }}
{{- else if eq $source.type "image" }}
  {{- /* Filled by the model-copy init container; node disk, not memory. */}}
  emptyDir:
    {{- with $source.image.sizeLimit }}
    sizeLimit: {{ . }}
    {{- else }} {}
    {{- end }}
{{- end }}
{{- end -}}

{{/* The service container's mount: always read-only. */}}
{{- define "kvfleet.model.volumeMount" -}}
- name: model
  mountPath: /models
  readOnly: true
{{- if and (eq .Values.model.source.type "pvc") .Values.model.source.pvc.subPath }}
  subPath: {{ .Values.model.source.pvc.subPath }}
{{- end }}
{{- end -}}

{{/* With source.type image: an init container copying the GGUF out of the
model image into the emptyDir, before the service starts. */}}
{{- define "kvfleet.model.initContainers" -}}
{{- $image := .Values.model.source.image -}}
{{- if eq .Values.model.source.type "image" }}
- name: model-copy
  image: {{ printf "%s:%s" $image.repository (toString $image.tag) }}
  imagePullPolicy: {{ $image.pullPolicy }}
  command:
    - cp
    - {{ $image.path }}
    - {{ include "kvfleet.modelPath" . }}
  securityContext:
    {{- toYaml .Values.containerSecurityContext | nindent 4 }}
  resources:
    {{- toYaml $image.resources | nindent 4 }}
  volumeMounts:
    - name: model
      mountPath: /models
{{- if .Values.model.draftFile }}
- name: draft-model-copy
  image: {{ printf "%s:%s" $image.repository (toString $image.tag) }}
  imagePullPolicy: {{ $image.pullPolicy }}
  command:
    - cp
    - {{ $image.draftPath }}
    - {{ include "kvfleet.draftModelPath" . }}
  securityContext:
    {{- toYaml .Values.containerSecurityContext | nindent 4 }}
  resources:
    {{- toYaml $image.resources | nindent 4 }}
  volumeMounts:
    - name: model
      mountPath: /models
{{- end }}
{{- if .Values.model.draftHeadsDir }}
- name: draft-heads-copy
  image: {{ printf "%s:%s" $image.repository (toString $image.tag) }}
  imagePullPolicy: {{ $image.pullPolicy }}
  command:
    - cp
    - -r
    - {{ $image.draftHeadsPath }}
    - {{ include "kvfleet.draftHeadsPath" . }}
  securityContext:
    {{- toYaml .Values.containerSecurityContext | nindent 4 }}
  resources:
    {{- toYaml $image.resources | nindent 4 }}
  volumeMounts:
    - name: model
      mountPath: /models
{{- end }}
{{- end }}
{{- end -}}
