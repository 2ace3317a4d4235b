{{/*
How a worker is sized: GPU or CPU, its KV cache budget, its threads and its
resources. The rules (docs/deploy.md, "Sizing a worker"):
  - GPU mode (gpusPerWorker >= 1, device auto or cuda): KV lives in GPU
    memory; host memory holds the mmapped model and overhead.
  - CPU mode (gpusPerWorker 0, device auto or cpu): model and KV share the
    container's memory, so a memory limit is required and a KV size must be
    below it; a fraction is measured by the worker under the cgroup limit.
*/}}

{{/* GPUs per worker: gpusPerWorker, or one a tensor-parallel rank when it is empty. */}}
{{- define "kvfleet.worker.gpus" -}}
{{- if kindIs "invalid" .Values.worker.gpusPerWorker -}}
{{- int .Values.worker.tensorParallelSize -}}
{{- else -}}
{{- int .Values.worker.gpusPerWorker -}}
{{- end -}}
{{- end -}}

{{/* "gpu" or "cpu". */}}
{{- define "kvfleet.worker.mode" -}}
{{- if gt (int (include "kvfleet.worker.gpus" .)) 0 -}}gpu{{- else -}}cpu{{- end -}}
{{- end -}}

{{/* The --kv-cache-memory value passed to the worker. */}}
{{- define "kvfleet.worker.kvCacheMemory" -}}
{{- $given := toString .Values.worker.kvCacheMemory | trim -}}
{{- if $given -}}
{{- $given -}}
{{- else if eq (include "kvfleet.worker.mode" .) "gpu" -}}
0.9
{{- else -}}
0.8
{{- end -}}
{{- end -}}

{{/* Bytes of a size as the worker reads it (common/byte_size.cc): a number
and an optional unit, case-insensitive; k, m, g, t are binary (= KiB, MiB,
...), kb, mb, gb, tb decimal. Prints a float; fails on anything else. */}}
{{- define "kvfleet.workerSizeToBytes" -}}
{{- $text := lower (trim (toString .)) -}}
{{- $number := regexFind "^[0-9]*\\.?[0-9]+|^[0-9]+\\.?" $text -}}
{{- $unit := trim (trimPrefix $number $text) -}}
{{- $units := dict "" 1.0 "b" 1.0 "k" 1024.0 "kib" 1024.0 "kb" 1e3 "m" 1048576.0 "mib" 1048576.0 "mb" 1e6 "g" 1073741824.0 "gib" 1073741824.0 "gb" 1e9 "t" 1099511627776.0 "tib" 1099511627776.0 "tb" 1e12 -}}
{{- if or (not $number) (not (hasKey $units $unit)) -}}
{{- fail (printf "worker.kvCacheMemory %q is not a size the worker reads: write e.g. 8GiB, 512MiB, 1.5G (G = GiB) or a fraction such as 0.9 (Kubernetes' Gi is not accepted)" .) -}}
{{- end -}}
{{- mulf (float64 $number) (get $units $unit) -}}
{{- end -}}

{{/* Bytes of a Kubernetes memory quantity (16Gi, 16G, 16000Mi, 17179869184,
1e9). Prints a float; fails on a form it does not read. */}}
{{- define "kvfleet.quantityToBytes" -}}
{{- $text := trim (toString .) -}}
{{- $match := regexFind "^[0-9]*\\.?[0-9]+([eE][+]?[0-9]+)?|^[0-9]+\\.?" $text -}}
{{- $suffix := trimPrefix $match $text -}}
{{- $units := dict "" 1.0 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 -}}
{{- if or (not $match) (not (hasKey $units $suffix)) -}}
{{- fail (printf "cannot read the memory quantity %q: write e.g. 16Gi, 16000Mi or a byte count" $text) -}}
{{- end -}}
{{- mulf (float64 $match) (get $units $suffix) -}}
{{- end -}}

{{/* --kv-disk-size: 95% of the disk tier's volume, in bytes (file headers
and the file system's own blocks take the rest). */}}
{{- define "kvfleet.worker.kvDiskBytes" -}}
{{- $bytes := include "kvfleet.quantityToBytes" .Values.worker.kvTiers.disk.size | float64 -}}
{{- printf "%.0f" (mulf $bytes 0.95) -}}
{{- end -}}

{{/* Whole CPUs in a Kubernetes CPU quantity ("4", "4000m", "3.5"), at least 1. */}}
{{- define "kvfleet.quantityToCpus" -}}
{{- $text := trim (toString .) -}}
{{- $cpus := 0 -}}
{{- if hasSuffix "m" $text -}}
{{- $cpus = div (int64 (trimSuffix "m" $text)) 1000 -}}
{{- else -}}
{{- $cpus = int64 (floor (float64 $text)) -}}
{{- end -}}
{{- max 1 $cpus -}}
{{- end -}}

{{/* --threads: worker.threads, else the whole CPUs of limits.cpu, else of
requests.cpu; empty when none is known (the worker then sizes itself from its cgroup CPU quota). */}}
{{- define "kvfleet.worker.threads" -}}
{{- $resources := .Values.worker.resources | default dict -}}
{{- $limits := $resources.limits | default dict -}}
{{- $requests := $resources.requests | default dict -}}
{{- if not (kindIs "invalid" .Values.worker.threads) -}}
{{- .Values.worker.threads | int -}}
{{- else if hasKey $limits "cpu" -}}
{{- include "kvfleet.quantityToCpus" $limits.cpu -}}
{{- else if hasKey $requests "cpu" -}}
{{- include "kvfleet.quantityToCpus" $requests.cpu -}}
{{- end -}}
{{- end -}}

{{/* Worker resources: the user's CPU and memory, plus nvidia.com/gpu with
requests = limits = gpusPerWorker in GPU mode. */}}
{{- define "kvfleet.worker.resources" -}}
{{- $resources := deepCopy (.Values.worker.resources | default dict) -}}
{{- $gpus := int (include "kvfleet.worker.gpus" .) -}}
{{- if gt $gpus 0 -}}
{{- $requests := $resources.requests | default dict -}}
{{- $limits := $resources.limits | default dict -}}
{{- $_ := set $requests "nvidia.com/gpu" $gpus -}}
{{- $_ = set $limits "nvidia.com/gpu" $gpus -}}
{{- $_ = set $resources "requests" $requests -}}
{{- $_ = set $resources "limits" $limits -}}
{{- end -}}
{{- toYaml $resources -}}
{{- end -}}

{{/*
LoRA adapters (worker.lora, laid over by a group's lora). The worker takes
--lora NAME=PATH per adapter, --max-loras (passed when above 0: else the
worker's own default, one per --lora, 1 with only --lora-dir), --max-lora-rank
(while adapters are on at all) and --lora-dir. Paths are as the pod sees
them; worker.lora.volume is mounted read-only at kvfleet.worker.loraDir.
*/}}

{{/* Where worker pods mount worker.lora.volume. */}}
{{- define "kvfleet.worker.loraDir" -}}/adapters{{- end -}}

{{/* "true" while a worker serves LoRA adapters: listed ones, a directory of
them, or slots for adapters loaded at run time; else empty. */}}
{{- define "kvfleet.worker.loraOn" -}}
{{- $lora := .Values.worker.lora -}}
{{- if or $lora.adapters $lora.dir (gt (int $lora.maxLoras) 0) -}}true{{- end -}}
{{- end -}}

{{/* A worker's LoRA flags (list items; empty while adapters are off). */}}
{{- define "kvfleet.worker.loraArgs" -}}
{{- $lora := .Values.worker.lora -}}
{{- if include "kvfleet.worker.loraOn" . }}
{{- range $lora.adapters }}
- --lora
- {{ printf "%s=%s" .name .path | quote }}
{{- end }}
{{- if gt (int $lora.maxLoras) 0 }}
- --max-loras
- {{ $lora.maxLoras | quote }}
{{- end }}
- --max-lora-rank
- {{ $lora.maxRank | quote }}
{{- with $lora.dir }}
- --lora-dir
- {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Startup probe failures allowed: ceil(modelLoadSeconds / periodSeconds),
so the probe's budget is never shorter than the load time. */}}
{{- define "kvfleet.worker.startupFailures" -}}
{{- $startup := .Values.worker.probes.startup -}}
{{- $period := int64 $startup.periodSeconds -}}
{{- max 1 (div (add (int64 $startup.modelLoadSeconds) (sub $period 1)) $period) -}}
{{- end -}}

{{/* Worker terminationGracePeriodSeconds: preStop + drain + margin. */}}
{{- define "kvfleet.worker.gracePeriod" -}}
{{- add (int64 .Values.worker.preStopSeconds) (int64 .Values.worker.drainTimeoutSeconds) (int64 .Values.worker.terminationMarginSeconds) -}}
{{- end -}}

{{/* Router terminationGracePeriodSeconds: preStop + the router's fixed 30 s
in-flight drain + margin. */}}
{{- define "kvfleet.router.gracePeriod" -}}
{{- add (int64 .Values.router.preStopSeconds) 30 (int64 .Values.router.terminationMarginSeconds) -}}
{{- end -}}

{{/*
Worker groups (workerGroups; docs/deploy.md, "Worker groups: prefill and
decode"). Each group is a StatefulSet of its own, with its headless Service,
PodDisruptionBudget and ScaledObject, rendered by kvfleet.worker.eachGroup
with a root of the group's own:
  .Values.worker  worker.* with the group's fields (replicas, resources,
                  keda, lora) laid over it key by key, so what a group
                  leaves out is worker.*'s; a group with a model of its own
                  lays its lora over none (the worker's defaults) instead
                  of worker.lora, whose adapters are model.*'s
  .Values.model   model.*, or the group's own model (routers learn every
                  model from its workers), which takes model.*'s source
                  unless it gives one, and nothing else of it
  .Group          the group's name and role, and ownModel (it has one)
Every helper that reads .Values.worker then reads the group's. A group with
an empty name keeps the names and labels of a chart without groups
("<fullname>-worker"); a named group's objects are
"<fullname>-worker-<name>", and they and its pods carry
kvfleet.io/worker-group (in their selectors, kvfleet.selectorLabels) and
kvfleet.io/worker-role. What takes the release's root sees every group: the
NetworkPolicy, the monitors, and the cachemanager every worker registers
with, through which routers find them all.
*/}}

{{/* Renders the template named "template" once per worker group, each time
with the group's root, and joins the non-empty renders as YAML documents
(or with "separator"). Takes (dict "root" $ "template" NAME ["separator" TEXT]). */}}
{{- define "kvfleet.worker.eachGroup" -}}
{{- $root := .root -}}
{{- $renders := list -}}
{{- range $group := $root.Values.workerGroups -}}
{{- $base := deepCopy $root.Values.worker -}}
{{- /* LoRA adapters belong to one base model: a group with its own takes
none of worker.lora, only its own lora (over the worker's defaults). */ -}}
{{- if hasKey $group "model" -}}
{{- $_ := set $base "lora" (dict "maxLoras" 0 "maxRank" 16 "adapters" (list) "dir" "" "volume" (dict)) -}}
{{- end -}}
{{- $worker := mergeOverwrite $base (deepCopy (omit $group "name" "role" "model")) -}}
{{- /* A group's own model is its own: only model.*'s source (the volume) is
inherited; its id, draft and calibration never belong to another model. */ -}}
{{- $model := deepCopy $root.Values.model -}}
{{- if hasKey $group "model" -}}
{{- $own := dict "id" "" "draftFile" "" "draftHeadsDir" "" "calibration" "" "source" (deepCopy $root.Values.model.source) -}}
{{- $model = mergeOverwrite $own (deepCopy $group.model) -}}
{{- end -}}
{{- $values := set (set (omit $root.Values "worker" "model") "worker" $worker) "model" $model -}}
{{- $groupRoot := set (omit $root "Values") "Values" $values -}}
{{- $_ := set $groupRoot "Group" (merge (pick $group "name" "role") (dict "ownModel" (hasKey $group "model"))) -}}
{{- $text := include $.template $groupRoot -}}
{{- if trim $text -}}
{{- $renders = append $renders $text -}}
{{- end -}}
{{- end -}}
{{- join (default "\n---\n" $.separator) $renders -}}
{{- end -}}
