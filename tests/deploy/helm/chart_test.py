#!/usr/bin/env python3
"""Renders the kvfleet Helm chart for every value set and checks what comes out.

    python3 tests/deploy/helm/chart_test.py --chart deploy/helm/kvfleet [--values DIR]

Needs an interpreter with helm_python (helm-python-sdk: Helm's own renderer,
linter and schema validation, no helm binary) and kubernetes_validate (the
Kubernetes API's JSON schemas); exits 77 when either is missing.

For each value set in tests/deploy/helm/values/*.yaml: lint, render, validate
every built-in object against two Kubernetes versions (strict: unknown fields
are errors), check the documented required fields of the CRD objects
(ServiceMonitor, PodMonitor, PrometheusRule, ScaledObject, GRPCRoute), then
the chart's own promises (GPU requests = limits, /dev/shm, gRPC probes and
their budgets, grace periods, rollout strategies, selectors matching the pods
they are meant for, references resolving, worker identity from the downward
API, security contexts, the TTFT threshold, the runbook URLs, metrics only
on ClusterIP Services, the args every service shares, the workers' KV
transfer port: its flags (with TLS also the worker name it admits and
checks peers for), container port, Service port and a NetworkPolicy
rule admitting this release's workers alone, or none of them; the TLS wiring: each
service mounts its own Secret and is given the flags of its hops, with
paths inside that mount and exactly the peers it must admit, and nothing
else changes, probes included; the auth wiring: the routers alone mount
the tokens Secret, whole, and --auth-tokens names the file in it, the test
Job mounts the test token alone and passes --token-file to both steps,
nothing else changes, and with auth off nothing of it renders; the chart
renders no Secret; the LoRA wiring: each worker group's --lora NAME=PATH per
adapter, --max-loras, --max-lora-rank and --lora-dir from its lora (none of
worker.lora for a group with a model of its own), the adapters volume
mounted read-only at /adapters, and nothing of it anywhere else; the admin
wiring: the routers alone mount the admin tokens Secret, whole, --admin-tokens
names the file in it, --admin-peers lists auth.admin.peers; the worker groups: per group a StatefulSet, headless
Service, PodDisruptionBudget and ScaledObject whose selectors pick its own
pods alone, named as before groups for the default group, its replicas,
resources, keda and lora laid over worker.*, --role and --kv-lease-seconds by
role, the router's split flags exactly while a group is prefill, and
NetworkPolicies covering every group). The same for a few value sets
written inline (INLINE_VALUE_SETS). Then a group's fallback to worker.*,
and values the chart must refuse. Prints what each
value set renders; exits 1 naming the value set, the object and the check
of every failure.
"""

from __future__ import annotations

import argparse
import hashlib
import collections
import copy
import json
import logging
import os
import re
import sys

try:
    import helm_python
    import kubernetes_validate
    import yaml
except ImportError as missing:  # pragma: no cover - depends on the interpreter
    print(f"chart_test: SKIP: this interpreter lacks {missing.name} (needs helm_python, "
          "kubernetes_validate and PyYAML: pip install helm-python-sdk kubernetes-validate pyyaml)",
          file=sys.stderr)
    sys.exit(77)

KUBE_VERSIONS = ["1.32.0", "1.35.0"]
RELEASE = "kvf"
NAMESPACE = "llm"
HEALTH_PORT = 8080
ROUTER_DRAIN_SECONDS = 30  # the router's fixed in-flight drain on SIGTERM
CUSTOM_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule", "ScaledObject", "GRPCRoute"}
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "Job"}
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
TTFT_ALERT = "KvfleetRouterTtftP99High"
TLS_DIR = "/etc/kvfleet/tls"
# The services' TLS flags that name a file, and the kubernetes.io/tls key each must be.
TLS_FILE_FLAGS = {"--tls-cert": "tls.crt", "--tls-key": "tls.key", "--tls-ca": "ca.crt", "--tls-client-ca": "ca.crt"}
# With worker.kvTransfer on, workers authenticate each other on the transfer port: it admits
# tls.worker.clientName alone, and a puller checks a peer for tls.worker.serverName.
KV_TRANSFER_TLS_FLAGS = {"--kv-transfer-allowed-peers", "--kv-transfer-tls-name"}
TLS_FLAGS = set(TLS_FILE_FLAGS) | {"--tls-allowed-peers", "--worker-tls-name"} | KV_TRANSFER_TLS_FLAGS
# What each service is given with tls.enabled (docs/deploy.md, "TLS"): the router serves
# its clients TLS without asking for certificates and checks workers and the cachemanager;
# workers and the cachemanager require client certificates naming the peers that call them.
TLS_FLAGS_OF = {
    "router": {"--tls-cert", "--tls-key", "--tls-ca", "--worker-tls-name"},
    "worker": {"--tls-cert", "--tls-key", "--tls-ca", "--tls-client-ca", "--tls-allowed-peers"},
    "cachemanager": {"--tls-cert", "--tls-key", "--tls-client-ca", "--tls-allowed-peers"},
}
# auth.enabled (docs/deploy.md, "Authentication"): routers read the token file from the
# tokens Secret mounted here; the helm test reads its token from the test token Secret.
AUTH_DIR = "/etc/kvfleet/auth"
AUTH_TEST_TOKEN_DIR = "/etc/kvfleet/test-token"
AUTH_FLAGS = {"--auth-tokens", "--token-file"}
# worker.lora: the workers' LoRA flags and where worker.lora.volume is mounted.
LORA_FLAGS = {"--lora", "--max-loras", "--max-lora-rank", "--lora-dir"}
LORA_DIR = "/adapters"
# auth.admin: routers read the admin token file from the admin tokens Secret mounted here.
ADMIN_DIR = "/etc/kvfleet/admin"
ADMIN_FLAGS = {"--admin-tokens", "--admin-peers"}
# worker.kvTransfer: the workers' KV transfer port and its flags (KV_TRANSFER_TLS_FLAGS on top
# with tls.enabled).
KV_TRANSFER_FLAGS = {"--kv-transfer-listen", "--kv-transfer-deadline", "--kv-transfer-max-pulls"}


class Failures:
    """Collects failures; each names the value set, the object and the check."""

    def __init__(self):
        self.items: list[str] = []
        self.checks = 0

    def check(self, ok: bool, value_set: str, obj: str, check: str, detail: str = "") -> bool:
        self.checks += 1
        if not ok:
            self.items.append(f"[{value_set}] {obj}: {check}" + (f": {detail}" if detail else ""))
        return ok


def name_of(obj: dict) -> str:
    return f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"


def render(chart, values: dict) -> list[dict]:
    """The rendered objects (NOTES.txt left out), each tagged with its template."""
    objects = []
    for template, text in sorted(chart.render(values, name=RELEASE, namespace=NAMESPACE).items()):
        if template.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                doc["__template__"] = template
                objects.append(doc)
    return objects


def clean(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k != "__template__"}


def selector_matches(selector: dict | None, labels: dict) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions) against labels."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and labels.get(key) in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def pod_template(obj: dict) -> dict | None:
    if obj["kind"] in WORKLOAD_KINDS:
        return obj["spec"]["template"]
    return None


def component_of(obj: dict) -> str | None:
    return obj.get("metadata", {}).get("labels", {}).get("app.kubernetes.io/component")


def string_leaves(value) -> set[str]:
    """Every string anywhere in the values: user-supplied names must be among them."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(string_leaves(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(string_leaves(v) for v in value)) if value else set()
    return set()


def quantity_bytes(text: str) -> float:
    """Bytes of a Kubernetes quantity such as 50Gi or 1e9."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return float(text[:-len(suffix)]) * factor
    return float(text)


def arg_after(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


def fullname(values: dict) -> str:
    return values.get("fullnameOverride") or f"{RELEASE}-kvfleet"


def tls_names(values: dict) -> dict:
    """Each component's TLS Secret and the certificate names peers are checked against,
    the chart's documented defaults filled in where the values leave them empty."""
    tls, prefix = values["tls"], fullname(values)
    return {
        "secret": {c: tls[c]["secretName"] or f"{prefix}-{c}-tls" for c in ("router", "worker", "cachemanager")},
        "router_client": tls["router"]["clientName"] or f"{prefix}-router",
        "worker_client": tls["worker"]["clientName"] or f"{prefix}-worker",
        "worker_server": tls["worker"]["serverName"] or f"{prefix}-worker",
    }


def auth_names(values: dict) -> dict:
    """The two auth Secrets, the chart's documented defaults filled in where the values leave them empty."""
    auth, prefix = values["auth"], fullname(values)
    return {"tokens": auth["tokensSecret"] or f"{prefix}-auth-tokens",
            "test": auth["testTokenSecret"] or f"{prefix}-auth-test-token"}


def admin_secret(values: dict) -> str:
    """The admin tokens Secret, the chart's documented default filled in where the values leave it empty."""
    return values["auth"]["admin"]["tokensSecret"] or f"{fullname(values)}-admin-tokens"


# What a worker group with a model of its own starts from instead of worker.lora (the worker's defaults).
LORA_OFF = {"maxLoras": 0, "maxRank": 16, "adapters": [], "dir": "", "volume": {}}


def laid_over(base, over):
    """`over` laid over `base` key by key, at every depth (how a worker group's fields fall back to worker.*)."""
    if not (isinstance(base, dict) and isinstance(over, dict)):
        return copy.deepcopy(over)
    merged = copy.deepcopy(base)
    for key, value in over.items():
        merged[key] = laid_over(base.get(key), value)
    return merged


def worker_groups(values: dict) -> list[dict]:
    """Each of workerGroups: its name, role, StatefulSet name ("<fullname>-worker", "-<name>" for a named
    group) and worker values (its replicas, resources, keda and lora laid over worker.*; a group with a
    model of its own lays its lora over the worker's defaults instead of worker.lora)."""
    groups = []
    for group in values["workerGroups"]:
        own = {k: v for k, v in group.items() if k not in ("name", "role")}
        base = values["worker"] if "model" not in group else {**values["worker"], "lora": LORA_OFF}
        groups.append({"name": group["name"], "role": group["role"], "worker": laid_over(base, own),
                       "statefulset": f"{fullname(values)}-worker" + (f"-{group['name']}" if group["name"] else "")})
    return groups


# --- the checks, one function per promise -------------------------------------------------------

def check_kubernetes_schemas(f: Failures, vs: str, objects: list[dict]) -> None:
    for obj in objects:
        if obj["kind"] in CUSTOM_KINDS:
            continue
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(clean(obj), version, strict=True)
                f.check(True, vs, name_of(obj), f"Kubernetes {version} schema")
            except kubernetes_validate.ValidationError as error:
                path = "/".join(str(p) for p in error.path)
                f.check(False, vs, name_of(obj), f"Kubernetes {version} schema (strict)", f"{path}: {error.message}")
            except kubernetes_validate.SchemaNotFoundError as error:
                f.check(False, vs, name_of(obj), f"Kubernetes {version} schema", error.message)


def check_custom_resources(f: Failures, vs: str, objects: list[dict]) -> None:
    """The fields each CRD documents as required (and the ones its controller cannot do without)."""
    for obj in objects:
        kind, spec, who = obj["kind"], obj.get("spec") or {}, name_of(obj)
        if kind not in CUSTOM_KINDS:
            continue
        f.check(obj.get("apiVersion") == {"ServiceMonitor": "monitoring.coreos.com/v1",
                                          "PodMonitor": "monitoring.coreos.com/v1",
                                          "PrometheusRule": "monitoring.coreos.com/v1",
                                          "ScaledObject": "keda.sh/v1alpha1",
                                          "GRPCRoute": "gateway.networking.k8s.io/v1"}[kind],
                vs, who, "apiVersion", str(obj.get("apiVersion")))
        if kind in ("ServiceMonitor", "PodMonitor"):
            endpoints = spec.get("endpoints" if kind == "ServiceMonitor" else "podMetricsEndpoints") or []
            f.check(isinstance(spec.get("selector"), dict), vs, who, "spec.selector is required")
            f.check(len(endpoints) > 0, vs, who, "at least one scrape endpoint")
            for endpoint in endpoints:
                f.check(bool(endpoint.get("port")), vs, who, "endpoint names its port")
                for relabel in endpoint.get("relabelings") or []:
                    f.check(isinstance(relabel.get("sourceLabels"), list) and bool(relabel.get("targetLabel")),
                            vs, who, "relabeling has sourceLabels and targetLabel", str(relabel))
        elif kind == "PrometheusRule":
            groups = spec.get("groups") or []
            f.check(len(groups) > 0, vs, who, "spec.groups is not empty")
            for group in groups:
                f.check(bool(group.get("name")), vs, who, "every group has a name")
                for rule in group.get("rules") or []:
                    label = rule.get("alert") or rule.get("record")
                    f.check(("alert" in rule) != ("record" in rule), vs, who, "rule is exactly one of alert/record", str(label))
                    f.check(isinstance(rule.get("expr"), str) and rule["expr"].strip() != "", vs, who, "rule has an expr", str(label))
                    for field in ("labels", "annotations"):
                        f.check(all(isinstance(v, str) for v in (rule.get(field) or {}).values()),
                                vs, who, f"rule {field} are strings", str(label))
        elif kind == "ScaledObject":
            target = spec.get("scaleTargetRef") or {}
            f.check(bool(target.get("name")), vs, who, "spec.scaleTargetRef.name is required")
            triggers = spec.get("triggers") or []
            f.check(len(triggers) > 0, vs, who, "spec.triggers is required")
            for trigger in triggers:
                metadata = trigger.get("metadata") or {}
                f.check(bool(trigger.get("type")), vs, who, "trigger has a type")
                f.check(all(isinstance(v, str) for v in metadata.values()), vs, who, "trigger metadata values are strings")
                if trigger.get("type") == "prometheus":
                    for field in ("serverAddress", "query", "threshold"):
                        f.check(bool(metadata.get(field)), vs, who, f"prometheus trigger needs metadata.{field}")
            f.check(spec.get("minReplicaCount", 0) <= spec.get("maxReplicaCount", 100), vs, who, "minReplicaCount <= maxReplicaCount")
        elif kind == "GRPCRoute":
            f.check(len(spec.get("parentRefs") or []) > 0, vs, who, "spec.parentRefs is not empty")
            for ref in spec.get("parentRefs") or []:
                f.check(bool(ref.get("name")), vs, who, "parentRef has a name")
            for rule in spec.get("rules") or []:
                for ref in rule.get("backendRefs") or []:
                    f.check(bool(ref.get("name")) and isinstance(ref.get("port"), int), vs, who, "backendRef has name and port")


def check_names_and_labels(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    for obj in objects:
        who, metadata = name_of(obj), obj.get("metadata", {})
        f.check(bool(DNS_SUBDOMAIN.match(metadata.get("name", ""))) and len(metadata["name"]) <= 63,
                vs, who, "name is a DNS label of at most 63 characters")
        dashboard = obj["kind"] == "ConfigMap" and values["dashboards"]["label"] in (metadata.get("labels") or {})
        expected = (values["dashboards"]["namespace"] or NAMESPACE) if dashboard else NAMESPACE
        f.check(metadata.get("namespace") == expected, vs, who, "namespace is the release's (dashboards: dashboards.namespace)",
                str(metadata.get("namespace")))
        labels = metadata.get("labels") or {}
        f.check(labels.get("app.kubernetes.io/name") == "kvfleet" and labels.get("app.kubernetes.io/instance") == RELEASE,
                vs, who, "carries app.kubernetes.io/name and /instance")
        for key, value in labels.items():
            f.check(isinstance(value, str) and bool(LABEL_VALUE.match(value)) and len(value) <= 63,
                    vs, who, f"label {key} is a valid label value", repr(value))
        template = pod_template(obj)
        if template:
            pod_labels = template["metadata"].get("labels") or {}
            for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component"):
                f.check(key in pod_labels, vs, who, f"pod label {key} (scrape-time labels come from it)")
            # A worker's model labels its series at scrape time; routers and the
            # cachemanager serve every model (the router labels its own series).
            worker = component_of(obj) == "worker"
            f.check(("kvfleet.io/model" in pod_labels) == worker, vs, who,
                    f"pod label kvfleet.io/model {'present' if worker else 'absent'}", str(pod_labels.get("kvfleet.io/model")))


def containers_of(template: dict, init: bool = False) -> list[dict]:
    spec = template["spec"]
    return list(spec.get("containers") or []) + (list(spec.get("initContainers") or []) if init else [])


def worker_gpus(w: dict) -> int:
    """GPUs a worker of these values holds: gpusPerWorker, or one a
    tensor-parallel rank when it is empty (null)."""
    return w["tensorParallelSize"] if w.get("gpusPerWorker") is None else w["gpusPerWorker"]


def check_gpu(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    gpus = worker_gpus(values["worker"])
    for obj in objects:
        template = pod_template(obj)
        if not template:
            continue
        for container in containers_of(template, init=True):
            who = f"{name_of(obj)} container {container['name']}"
            resources = container.get("resources") or {}
            requested = (resources.get("requests") or {}).get("nvidia.com/gpu")
            limited = (resources.get("limits") or {}).get("nvidia.com/gpu")
            f.check(requested == limited, vs, who, "nvidia.com/gpu requests == limits", f"{requested} vs {limited}")
            if component_of(obj) == "worker" and container["name"] == "worker":
                if gpus > 0:
                    f.check(limited == gpus, vs, who, "nvidia.com/gpu == worker.gpusPerWorker", f"{limited} vs {gpus}")
                else:
                    f.check(limited is None, vs, who, "no nvidia.com/gpu for CPU workers", str(limited))
            elif limited is not None:
                f.check(False, vs, who, "only workers hold GPUs", str(limited))


def check_shm(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    for obj in objects:
        template = pod_template(obj)
        if not template:
            continue
        volumes = template["spec"].get("volumes") or []
        memory_volumes = [v["name"] for v in volumes if (v.get("emptyDir") or {}).get("medium") == "Memory"]
        for volume in volumes:
            if (volume.get("emptyDir") or {}).get("medium") == "Memory":
                f.check(bool(volume["emptyDir"].get("sizeLimit")), vs, name_of(obj),
                        f"memory-backed emptyDir {volume['name']} has a sizeLimit")
        for name in memory_volumes:
            mounts = [m for c in containers_of(template) for m in c.get("volumeMounts") or [] if m["name"] == name]
            f.check(any(m["mountPath"] == "/dev/shm" for m in mounts), vs, name_of(obj),
                    f"memory-backed emptyDir {name} is mounted at /dev/shm", str(mounts))
        if component_of(obj) == "worker" and obj["kind"] == "StatefulSet":
            worker = next(c for c in containers_of(template) if c["name"] == "worker")
            shm_mounts = [m for m in worker.get("volumeMounts") or [] if m["mountPath"] == "/dev/shm"]
            f.check(bool(shm_mounts) == bool(values["worker"]["shm"]["enabled"]), vs, name_of(obj),
                    "worker container mounts /dev/shm iff worker.shm.enabled")


def check_probes(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    for obj in objects:
        template = pod_template(obj)
        if not template or obj["kind"] == "Job":
            continue
        for container in containers_of(template):
            who = f"{name_of(obj)} container {container['name']}"
            health_ports = [p["containerPort"] for p in container.get("ports") or [] if p.get("name") == "health"]
            f.check(health_ports == [HEALTH_PORT], vs, who, f"declares the health port {HEALTH_PORT}", str(health_ports))
            args = container.get("args") or []
            f.check(arg_after(args, "--health-port") == str(HEALTH_PORT), vs, who, "passes --health-port 8080")
            for kind, service in (("startupProbe", "liveness"), ("readinessProbe", None), ("livenessProbe", "liveness")):
                probe = container.get(kind)
                if not f.check(probe is not None, vs, who, f"has a {kind}"):
                    continue
                handlers = [h for h in ("grpc", "httpGet", "tcpSocket", "exec") if h in probe]
                f.check(handlers == ["grpc"], vs, who, f"{kind} is a gRPC probe", str(handlers))
                grpc = probe.get("grpc") or {}
                f.check(grpc.get("port") == HEALTH_PORT, vs, who, f"{kind} on the health port", str(grpc.get("port")))
                f.check(grpc.get("service") == service, vs, who, f"{kind} asks for service {service!r}", repr(grpc.get("service")))
            if component_of(obj) == "worker":
                startup = container["startupProbe"]
                budget = startup["periodSeconds"] * startup["failureThreshold"]
                load = values["worker"]["probes"]["startup"]["modelLoadSeconds"]
                f.check(budget >= load, vs, who, "startup probe budget >= worker.probes.startup.modelLoadSeconds",
                        f"{startup['periodSeconds']} s x {startup['failureThreshold']} = {budget} s < {load} s")


def prestop_seconds(container: dict) -> int | None:
    command = (((container.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command") or []
    return int(command[1]) if len(command) == 2 and command[0] == "sleep" else None


def check_grace(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    for obj in objects:
        template, component = pod_template(obj), component_of(obj)
        if not template or component not in ("router", "worker"):
            continue
        spec = template["spec"]
        container = next(c for c in containers_of(template) if c["name"] == component)
        who = name_of(obj)
        pre_stop = prestop_seconds(container)
        expected = values[component]["preStopSeconds"]
        f.check(pre_stop == expected, vs, who, f"preStop is `sleep {component}.preStopSeconds`", f"{pre_stop} vs {expected}")
        drain = values["worker"]["drainTimeoutSeconds"] if component == "worker" else ROUTER_DRAIN_SECONDS
        if component == "worker":
            f.check(arg_after(container["args"], "--drain-timeout") == str(drain), vs, who, "passes --drain-timeout")
        grace = spec.get("terminationGracePeriodSeconds", 30)
        f.check(grace >= (pre_stop or 0) + drain, vs, who, "terminationGracePeriodSeconds >= preStop + drain",
                f"{grace} < {pre_stop} + {drain}")


def check_rollout(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    by_component = {(o["kind"], component_of(o)): o for o in objects if o["kind"] in ("Deployment", "StatefulSet")}
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    statefulsets = {o["metadata"]["name"]: o for o in objects if o["kind"] == "StatefulSet"}
    for group in worker_groups(values):
        worker = statefulsets.get(group["statefulset"])
        if not f.check(worker is not None, vs, f"StatefulSet {group['statefulset']}", "exists"):
            continue
        who, spec = name_of(worker), worker["spec"]
        strategy = spec.get("updateStrategy") or {}
        f.check(strategy.get("type") == "RollingUpdate", vs, who, "updateStrategy RollingUpdate")
        f.check((strategy.get("rollingUpdate") or {}).get("maxUnavailable") == 1, vs, who, "rollingUpdate.maxUnavailable 1")
        f.check(spec.get("podManagementPolicy") == "Parallel", vs, who, "podManagementPolicy Parallel")
        headless = services.get(spec.get("serviceName"))
        f.check(headless is not None and headless["spec"].get("clusterIP") == "None", vs, who,
                "serviceName is a headless Service in the render", str(spec.get("serviceName")))
        f.check(("replicas" in spec) != group["worker"]["keda"]["enabled"], vs, who, "replicas left to KEDA exactly when it is on")
    cachemanager = by_component.get(("Deployment", "cachemanager"))
    if f.check(cachemanager is not None, vs, "Deployment cachemanager", "exists"):
        f.check(cachemanager["spec"].get("strategy", {}).get("type") == "Recreate", vs, name_of(cachemanager), "strategy Recreate")
        f.check(cachemanager["spec"].get("replicas") == 1, vs, name_of(cachemanager), "exactly one replica")
    router = by_component.get(("Deployment", "router"))
    if f.check(router is not None, vs, "Deployment router", "exists"):
        spec = router["spec"]
        f.check(spec.get("strategy", {}).get("type") == "RollingUpdate", vs, name_of(router), "strategy RollingUpdate")
        if values["router"]["autoscaling"]["enabled"]:
            f.check("replicas" not in spec, vs, name_of(router), "replicas left to the HPA")
        else:
            f.check(spec.get("replicas", 1) >= 2, vs, name_of(router), "at least two routers", str(spec.get("replicas")))
        constraints = spec["template"]["spec"].get("topologySpreadConstraints") or []
        if values["router"]["topologySpread"]["enabled"]:
            f.check(len(constraints) == 1 and selector_matches(constraints[0].get("labelSelector"), spec["template"]["metadata"]["labels"]),
                    vs, name_of(router), "topologySpreadConstraints select the router's own pods")


def pods_by_component(objects: list[dict]) -> dict[str, list[tuple[dict, dict]]]:
    """component -> [(workload, pod labels)]."""
    pods = collections.defaultdict(list)
    for obj in objects:
        template = pod_template(obj)
        if template:
            pods[template["metadata"]["labels"].get("app.kubernetes.io/component")].append((obj, template["metadata"]["labels"]))
    return pods


def check_selectors(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    pods = pods_by_component(objects)
    all_pods = [(component, labels) for component, entries in pods.items() for _, labels in entries]

    def selects(selector: dict | None) -> set[str]:
        return {component for component, labels in all_pods if selector_matches(selector, labels)}

    for obj in objects:
        who, kind, component, spec = name_of(obj), obj["kind"], component_of(obj), obj.get("spec") or {}
        if kind in ("Deployment", "StatefulSet"):
            f.check(selector_matches(spec["selector"], spec["template"]["metadata"]["labels"]), vs, who,
                    "selector matches its own pod template")
            f.check(selects(spec["selector"]) == {component}, vs, who, "selector matches no other component's pods",
                    str(selects(spec["selector"])))
        elif kind == "Service":
            selector = {"matchLabels": spec.get("selector") or {}}
            f.check(bool(spec.get("selector")) and selects(selector) == {component}, vs, who,
                    f"selector matches the {component} pods and only them", str(selects(selector)))
            named = {p["name"] for c in containers_of(_workload_template(objects, component)) for p in c.get("ports") or []}
            for port in spec.get("ports") or []:
                f.check(port.get("targetPort") in named, vs, who, f"targetPort {port.get('targetPort')} is a named container port", str(named))
        elif kind == "PodDisruptionBudget":
            f.check(selects(spec.get("selector")) == {component}, vs, who, f"selects the {component} pods only",
                    str(selects(spec.get("selector"))))
        elif kind == "NetworkPolicy":
            f.check(selects(spec.get("podSelector")) == {component}, vs, who, f"podSelector matches the {component} pods only",
                    str(selects(spec.get("podSelector"))))
            for rule in spec.get("ingress") or []:
                for peer in rule.get("from") or []:
                    if "podSelector" in peer and "namespaceSelector" not in peer and "ipBlock" not in peer:
                        chosen = selects(peer["podSelector"])
                        chart_peer = (peer["podSelector"].get("matchLabels") or {}).get("app.kubernetes.io/instance") == RELEASE
                        if chart_peer:
                            f.check(len(chosen) == 1, vs, who, "a peer naming this release's pods matches one component", str(peer))
        elif kind == "ServiceMonitor":
            services = [o for o in objects if o["kind"] == "Service" and selector_matches(spec["selector"], o["metadata"].get("labels") or {})]
            f.check(sorted(component_of(s) for s in services) == sorted(["cachemanager", "router"] + ["worker"] * len(values["workerGroups"])),
                    vs, who, "selects exactly the router and cachemanager Services and each worker group's",
                    str([s["metadata"]["name"] for s in services]))
            for service in services:
                f.check(any(p.get("name") == "metrics" for p in service["spec"]["ports"]), vs, who,
                        f"Service {service['metadata']['name']} has the port named metrics")
            with_metrics = {o["metadata"]["name"] for o in objects if o["kind"] == "Service"
                            and any(p.get("name") == "metrics" for p in o["spec"].get("ports") or [])}
            f.check({s["metadata"]["name"] for s in services} == with_metrics, vs, who,
                    "selects every Service that has a metrics port, and no other",
                    f"{sorted(s['metadata']['name'] for s in services)} vs {sorted(with_metrics)}")
        elif kind == "PodMonitor":
            f.check(selects(spec["selector"]) == {"router", "worker", "cachemanager"}, vs, who,
                    "selects router, worker and cachemanager pods (not the test pod)", str(selects(spec["selector"])))
    # The NetworkPolicies say what they promise.
    if values["networkPolicy"]["enabled"]:
        policies = {component_of(o): o for o in objects if o["kind"] == "NetworkPolicy"}
        f.check(set(policies) == {"router", "worker", "cachemanager"}, vs, "NetworkPolicy", "one per component", str(sorted(policies)))
        grpc_ports = {"router": 50060, "worker": 50051, "cachemanager": 50050}
        allowed = {"worker": {"router"}, "cachemanager": {"router", "worker"}}
        for component, policy in policies.items():
            rules = [r for r in policy["spec"].get("ingress") or [] if any(p.get("port") == grpc_ports[component] for p in r.get("ports") or [])]
            who = name_of(policy)
            if not f.check(len(rules) == 1, vs, who, "one rule for the gRPC port"):
                continue
            peers = rules[0].get("from")
            if component in allowed:
                chosen = set().union(*(selects(p.get("podSelector")) for p in peers or [])) if peers else {"<anyone>"}
                f.check(peers is not None and chosen == allowed[component]
                        and all(set(p) == {"podSelector"} for p in peers), vs, who,
                        f"gRPC only from this release's {sorted(allowed[component])} pods", str(chosen))
            elif values["networkPolicy"]["routerClients"]:
                f.check(peers is not None and any(selects(p.get("podSelector")) == {"test"} for p in peers if set(p) == {"podSelector"}),
                        vs, who, "the helm test pod may call the router")
            else:
                f.check(peers is None, vs, who, "router gRPC open to any client when routerClients is empty")
    else:
        f.check(not any(o["kind"] == "NetworkPolicy" for o in objects), vs, "NetworkPolicy", "none when networkPolicy.enabled is false")
    pdbs = [o for o in objects if o["kind"] == "PodDisruptionBudget" and component_of(o) == "router"]
    budget = values["router"]["podDisruptionBudget"]
    f.check(len(pdbs) == int(budget["enabled"]), vs, "PodDisruptionBudget router", "present iff router.podDisruptionBudget.enabled")
    for pdb in pdbs:
        wanted = {"maxUnavailable": budget["maxUnavailable"]} if budget.get("maxUnavailable") is not None \
            else {"minAvailable": budget["minAvailable"]}
        got = {k: v for k, v in pdb["spec"].items() if k in ("minAvailable", "maxUnavailable")}
        f.check(got == wanted, vs, name_of(pdb), "maxUnavailable when set, else minAvailable", f"{got} vs {wanted}")


def check_metrics_exposure(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    """Metrics ports sit on ClusterIP (or headless) Services only: the router's
    client Service (router.service.type may be NodePort or LoadBalancer) carries
    gRPC alone, and its metrics have a ClusterIP Service of their own."""
    services = [o for o in objects if o["kind"] == "Service"]
    router_name = f"{values.get('fullnameOverride') or RELEASE + '-kvfleet'}-router"
    f.check(any(s["metadata"]["name"] == router_name for s in services), vs, f"Service/{router_name}", "exists")
    for service in services:
        who, spec = name_of(service), service["spec"]
        names = [p.get("name") for p in spec.get("ports") or []]
        if "metrics" in names:
            f.check(spec.get("type", "ClusterIP") == "ClusterIP", vs, who, "a Service with a metrics port is ClusterIP",
                    str(spec.get("type")))
        if component_of(service) == "router":
            f.check(names in (["grpc"], ["grpc", "http"], ["metrics"]), vs, who,
                    "a router Service carries the client ports or metrics, not both", str(names))
        if service["metadata"]["name"] == router_name:
            want = ["grpc", "http"] if values["router"]["http"]["enabled"] else ["grpc"]
            f.check(names == want, vs, who, f"the client-facing router Service carries {want} only", str(names))
            f.check(spec.get("type", "ClusterIP") == values["router"]["service"]["type"], vs, who, "type is router.service.type")
    # Each pod's metrics behind exactly one Service (one per worker group), so a ServiceMonitor scrapes it once.
    with_metrics = [s for s in services if any(p.get("name") == "metrics" for p in s["spec"].get("ports") or [])]
    for workload in (o for o in objects if o["kind"] in ("Deployment", "StatefulSet")):
        labels = workload["spec"]["template"]["metadata"]["labels"]
        reachable = [s["metadata"]["name"] for s in with_metrics if selector_matches({"matchLabels": s["spec"].get("selector")}, labels)]
        f.check(len(reachable) == 1, vs, name_of(workload), "exactly one Service exposes its pods' metrics port", str(reachable))


def check_common_args(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    """What every service container shares: its three named ports, its metrics
    port and log level in the args and its extraArgs last (the services keep a
    flag's last value, so a flag repeated in extraArgs wins), the downward API
    first in env and extraEnv last, podAnnotations on the pod."""
    for obj in objects:
        component = component_of(obj)
        if obj["kind"] not in ("Deployment", "StatefulSet") or component not in ("router", "worker", "cachemanager"):
            continue
        container = next(c for c in containers_of(obj["spec"]["template"]) if c["name"] == component)
        who, args, own = f"{name_of(obj)} container {component}", container.get("args") or [], values[component]
        ports = {p["name"]: p["containerPort"] for p in container.get("ports") or []}
        want = ["grpc", "health", "metrics"] + (["http"] if component == "router" and values["router"]["http"]["enabled"] else []) \
            + (["kv-transfer"] if component == "worker" and values["worker"]["kvTransfer"]["enabled"] else [])
        f.check(sorted(ports) == sorted(want), vs, who, f"container ports {want}", str(ports))
        f.check(arg_after(args, "--metrics-port") == str(ports.get("metrics")), vs, who, "--metrics-port is the metrics container port")
        f.check(arg_after(args, "--log-level") == own["logLevel"], vs, who, f"--log-level from {component}.logLevel")
        extra = [str(a) for a in own.get("extraArgs") or []]
        f.check(not extra or args[-len(extra):] == extra, vs, who, f"{component}.extraArgs come last", str(args[-len(extra) - 2:]))
        env = [e["name"] for e in container.get("env") or []]
        f.check(env[:3] == ["POD_NAME", "POD_NAMESPACE", "POD_IP"], vs, who, "env starts with the downward API", str(env))
        wanted = [e["name"] for e in own.get("extraEnv") or []]
        f.check(not wanted or env[-len(wanted):] == wanted, vs, who, f"{component}.extraEnv comes last", str(env))
        annotations = dict(obj["spec"]["template"]["metadata"].get("annotations") or {})
        annotations.pop("kvfleet.io/calibration-sha256", None)  # the worker's record (check_worker_sizing)
        f.check(annotations == (own.get("podAnnotations") or {}), vs, who, f"pod annotations are {component}.podAnnotations",
                str(annotations))


def _workload_template(objects: list[dict], component: str) -> dict:
    for obj in objects:
        if obj["kind"] in ("Deployment", "StatefulSet") and component_of(obj) == component:
            return obj["spec"]["template"]
    return {"spec": {"containers": []}}


def check_references(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    present = collections.defaultdict(set)
    for obj in objects:
        present[obj["kind"]].add(obj["metadata"]["name"])
    user_strings = string_leaves(values)
    pull_secrets = {s["name"] for s in values.get("imagePullSecrets") or []}
    # TLS Secrets left unnamed in values have documented default names ("<fullname>-<component>-tls").
    tls_defaults = {name for component, name in tls_names(values)["secret"].items()
                    if values["tls"]["enabled"] and not values["tls"][component]["secretName"]}
    # So have the auth Secrets ("<fullname>-auth-tokens", "<fullname>-auth-test-token").
    tls_defaults |= {name for key, name in auth_names(values).items()
                     if values["auth"]["enabled"] and not values["auth"][{"tokens": "tokensSecret", "test": "testTokenSecret"}[key]]}
    # And the admin tokens Secret ("<fullname>-admin-tokens").
    if values["auth"]["admin"]["enabled"] and not values["auth"]["admin"]["tokensSecret"]:
        tls_defaults.add(admin_secret(values))

    def exists(kind: str, name: str, who: str, what: str, user_supplied_ok: bool) -> None:
        ok = name in present[kind] or (user_supplied_ok and name in user_strings)
        f.check(ok, vs, who, f"{what} {kind} {name!r} exists in the render" + (" or is named in values" if user_supplied_ok else ""))

    for obj in objects:
        who, template = name_of(obj), pod_template(obj)
        if template:
            spec = template["spec"]
            exists("ServiceAccount", spec.get("serviceAccountName", "default"), who, "serviceAccountName", True)
            f.check(spec.get("automountServiceAccountToken") is False, vs, who, "automountServiceAccountToken false")
            for secret in spec.get("imagePullSecrets") or []:
                f.check(secret["name"] in pull_secrets, vs, who, f"imagePullSecret {secret['name']} is named in values.imagePullSecrets")
            for volume in spec.get("volumes") or []:
                if "configMap" in volume:
                    # worker.lora.volume is the user's: a ConfigMap of adapters they made.
                    exists("ConfigMap", volume["configMap"]["name"], who, "volume", volume["name"] == "adapters")
                if "secret" in volume:
                    # Secrets are the user's (or cert-manager's): the chart renders none.
                    secret = volume["secret"]["secretName"]
                    f.check(secret not in present["Secret"], vs, who, f"volume Secret {secret!r} is supplied by the user, not rendered")
                    f.check(secret in user_strings or secret in tls_defaults, vs, who,
                            f"volume Secret {secret!r} is named in values (or is the documented default of an empty tls.*.secretName or auth.*Secret)")
                if "persistentVolumeClaim" in volume:
                    claim = volume["persistentVolumeClaim"]["claimName"]
                    f.check(claim in user_strings, vs, who, f"PVC {claim!r} is the one named in values")
            for container in containers_of(template, init=True):
                for env in container.get("env") or []:
                    source = env.get("valueFrom") or {}
                    if "configMapKeyRef" in source:
                        exists("ConfigMap", source["configMapKeyRef"]["name"], who, "env", False)
                    if "secretKeyRef" in source:
                        exists("Secret", source["secretKeyRef"]["name"], who, "env", True)
                for source in container.get("envFrom") or []:
                    if "configMapRef" in source:
                        exists("ConfigMap", source["configMapRef"]["name"], who, "envFrom", False)
                    if "secretRef" in source:
                        exists("Secret", source["secretRef"]["name"], who, "envFrom", True)
                # Services the containers dial by name.
                args = (container.get("command") or []) + (container.get("args") or [])
                for flag in ("--cachemanager", "--router"):
                    target = arg_after(args, flag)
                    if target:
                        exists("Service", target.split(":")[0], f"{who} container {container['name']}", flag, False)
        kind, spec = obj["kind"], obj.get("spec") or {}
        if kind == "Ingress":
            for rule in spec.get("rules") or []:
                for path in rule["http"]["paths"]:
                    exists("Service", path["backend"]["service"]["name"], who, "backend", False)
            for tls in spec.get("tls") or []:
                f.check(tls.get("secretName") in user_strings, vs, who, f"TLS secret {tls.get('secretName')!r} is named in values")
        if kind == "GRPCRoute":
            for rule in spec.get("rules") or []:
                for ref in rule.get("backendRefs") or []:
                    exists("Service", ref["name"], who, "backendRef", False)
        if kind == "HorizontalPodAutoscaler":
            exists(spec["scaleTargetRef"]["kind"], spec["scaleTargetRef"]["name"], who, "scaleTargetRef", False)
        if kind == "ScaledObject":
            exists(spec["scaleTargetRef"]["kind"], spec["scaleTargetRef"]["name"], who, "scaleTargetRef", False)
        if kind == "ServiceAccount":
            f.check(obj.get("automountServiceAccountToken") is False, vs, who, "automountServiceAccountToken false")


def without_flags(args: list[str], flags: set[str]) -> list[str]:
    """args with every flag of `flags` and its value taken out."""
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in flags:
            skip = True
        else:
            kept.append(arg)
    return kept


def without_tls_flags(args: list[str]) -> list[str]:
    """args with every TLS flag and its value taken out."""
    return without_flags(args, TLS_FLAGS)


def secret_files(template: dict, container: dict) -> dict[str, tuple[str, str]]:
    """Every file a container sees from a Secret volume: path -> (Secret, key)."""
    volumes = {v["name"]: v for v in template["spec"].get("volumes") or []}
    files = {}
    for mount in container.get("volumeMounts") or []:
        secret = (volumes.get(mount["name"]) or {}).get("secret")
        if not secret:
            continue
        base = mount["mountPath"].rstrip("/")
        items = secret.get("items") or [{"key": k, "path": k} for k in ("tls.crt", "tls.key", "ca.crt")]
        for item in items:
            if mount.get("subPath"):
                if mount["subPath"] == item["path"]:
                    files[base] = (secret["secretName"], item["key"])
            else:
                files[f"{base}/{item['path']}"] = (secret["secretName"], item["key"])
    return files


def check_tls(f: Failures, vs: str, objects: list[dict], values: dict, chart, user_values: dict) -> None:
    """tls.enabled wires every hop and changes nothing else; off, no trace of it."""
    services = [o for o in objects if o["kind"] == "Service"]
    ingresses = [o for o in objects if o["kind"] == "Ingress"]
    backend_protocol = "nginx.ingress.kubernetes.io/backend-protocol"
    if not values["tls"]["enabled"]:
        for obj in objects:
            template = pod_template(obj)
            for container in containers_of(template, init=True) if template else []:
                who = f"{name_of(obj)} container {container['name']}"
                args = (container.get("command") or []) + (container.get("args") or [])
                f.check(not TLS_FLAGS & set(args), vs, who, "no TLS flag without tls.enabled", str(sorted(TLS_FLAGS & set(args))))
                f.check(not any(m["mountPath"] == TLS_DIR for m in container.get("volumeMounts") or []), vs, who,
                        f"nothing mounted at {TLS_DIR} without tls.enabled")
        for service in services:
            for port in service["spec"].get("ports") or []:
                if port.get("name") == "grpc":
                    f.check(port.get("appProtocol") == "kubernetes.io/h2c", vs, name_of(service), "cleartext gRPC port declares appProtocol kubernetes.io/h2c")
        for ingress in ingresses:
            f.check((ingress["metadata"].get("annotations") or {}) == values["router"]["ingress"]["annotations"], vs, name_of(ingress),
                    "annotations are router.ingress.annotations")
        return

    names = tls_names(values)
    f.check(not any(o["kind"] == "Secret" for o in objects), vs, "Secret", "none rendered: the user or cert-manager creates the TLS Secrets")
    # The auth Secrets' volumes are check_auth's; here, the TLS ones.
    auth_secrets = set(auth_names(values).values()) if values["auth"]["enabled"] else set()
    if values["auth"]["admin"]["enabled"]:
        auth_secrets.add(admin_secret(values))  # and the admin tokens', check_lora's
    # The same values without TLS: everything but the TLS wiring must come out the same. Admin
    # certificates (auth.admin.peers, --admin-peers) exist only over TLS, so they go too.
    plain_values = copy.deepcopy(user_values)
    plain_values.setdefault("tls", {})["enabled"] = False
    plain_values.get("auth", {}).get("admin", {}).pop("peers", None)
    plain = {(o["kind"], o["metadata"]["name"]): o for o in render(chart, plain_values)}
    admitted = {"worker": [names["router_client"]], "cachemanager": sorted([names["router_client"], names["worker_client"]])}
    transfer = bool(values["worker"]["kvTransfer"]["enabled"])
    for component, flags in TLS_FLAGS_OF.items():
        if component == "worker" and transfer:
            flags = flags | KV_TRANSFER_TLS_FLAGS
        obj = next((o for o in objects if o["kind"] in ("Deployment", "StatefulSet") and component_of(o) == component), None)
        if not f.check(obj is not None, vs, component, "workload exists"):
            continue
        template = obj["spec"]["template"]
        container = next(c for c in containers_of(template) if c["name"] == component)
        who, args = f"{name_of(obj)} container {component}", container.get("args") or []
        extra = len(values[component].get("extraArgs") or [])
        given = [a for a in (args[:-extra] if extra else args) if a in TLS_FLAGS]
        f.check(sorted(given) == sorted(flags), vs, who, f"TLS flags are {sorted(flags)}, once each", str(given))
        secret = names["secret"][component]
        volumes = [v for v in template["spec"].get("volumes") or [] if "secret" in v and v["secret"]["secretName"] not in auth_secrets]
        f.check([v["secret"]["secretName"] for v in volumes] == [secret], vs, who,
                f"mounts the Secret of tls.{component}.secretName ({secret}) and no other TLS Secret",
                str([v["secret"]["secretName"] for v in volumes]))
        for volume in volumes:
            mode = volume["secret"].get("defaultMode")
            f.check(mode == 0o440, vs, who, "Secret volume defaultMode 0440 (owner and the pod's fsGroup)", oct(mode) if isinstance(mode, int) else str(mode))
        mounts = [m for m in container.get("volumeMounts") or [] if m["name"] in {v["name"] for v in volumes}]
        f.check(len(mounts) == 1 and mounts[0]["mountPath"] == TLS_DIR and mounts[0].get("readOnly") is True and "subPath" not in mounts[0],
                vs, who, f"Secret mounted whole and read-only at {TLS_DIR} (no subPath: renewed files reach the pod)", str(mounts))
        files = secret_files(template, container)
        for flag in sorted(flags & set(TLS_FILE_FLAGS)):
            path = arg_after(args, flag)
            f.check(files.get(path) == (secret, TLS_FILE_FLAGS[flag]), vs, who,
                    f"{flag} {path} is the {TLS_FILE_FLAGS[flag]} of the mounted Secret", str(files.get(path)))
        if component == "router":
            f.check(arg_after(args, "--worker-tls-name") == names["worker_server"], vs, who,
                    "--worker-tls-name is tls.worker.serverName (default <fullname>-worker)", str(arg_after(args, "--worker-tls-name")))
        else:
            peers = (arg_after(args, "--tls-allowed-peers") or "").split(",")
            f.check(sorted(peers) == admitted[component] and len(set(peers)) == len(peers), vs, who,
                    f"--tls-allowed-peers is exactly {admitted[component]}", str(peers))
        if component == "worker" and transfer:
            # The transfer port admits the workers' client name alone (never the routers'), and a
            # puller checks the name the workers' certificate carries, not the pod IP it dials.
            allowed = (arg_after(args, "--kv-transfer-allowed-peers") or "").split(",")
            f.check(allowed == [names["worker_client"]], vs, who,
                    f"--kv-transfer-allowed-peers is exactly [{names['worker_client']!r}] (tls.worker.clientName)", str(allowed))
            f.check(arg_after(args, "--kv-transfer-tls-name") == names["worker_server"], vs, who,
                    "--kv-transfer-tls-name is tls.worker.serverName (default <fullname>-worker)",
                    str(arg_after(args, "--kv-transfer-tls-name")))
        twin = plain.get((obj["kind"], obj["metadata"]["name"]))
        if not f.check(twin is not None, vs, who, "renders without TLS too"):
            continue
        twin_container = next(c for c in containers_of(twin["spec"]["template"]) if c["name"] == component)
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            handler = (container.get(probe) or {}).get("grpc") or {}
            f.check(container.get(probe) == twin_container.get(probe) and handler.get("port") == HEALTH_PORT, vs, who,
                    f"{probe} unchanged by TLS: gRPC on the plaintext health port {HEALTH_PORT}", str(container.get(probe)))
        f.check(without_flags(args, TLS_FLAGS | {"--admin-peers"}) == twin_container.get("args"), vs, who,
                "args are the plaintext ones plus the TLS flags (and the router's --admin-peers) alone")
        f.check(container.get("ports") == twin_container.get("ports"), vs, who, "container ports unchanged by TLS")
    for job in (o for o in objects if o["kind"] == "Job"):
        template, who = job["spec"]["template"], name_of(job)
        volumes = [v for v in template["spec"].get("volumes") or [] if "secret" in v and v["secret"]["secretName"] not in auth_secrets]
        f.check([v["secret"]["secretName"] for v in volumes] == [names["secret"]["router"]], vs, who,
                "mounts the routers' Secret (their CA) and no other TLS Secret", str([v["secret"]["secretName"] for v in volumes]))
        f.check(all([i["key"] for i in v["secret"].get("items") or [{"key": "(all)"}]] == ["ca.crt"] for v in volumes), vs, who,
                "only its ca.crt: the test pod never holds the routers' key")
        twin_job = plain.get(("Job", job["metadata"]["name"]))
        twin_containers = {c["name"]: c for c in containers_of(twin_job["spec"]["template"], init=True)} if twin_job else {}
        for container in containers_of(template, init=True):
            command, files = container.get("command") or [], secret_files(template, container)
            path = arg_after(command, "--tls-ca")
            f.check(path is not None and files.get(path) == (names["secret"]["router"], "ca.crt"), vs, f"{who} container {container['name']}",
                    "kvfleet --tls-ca is the mounted ca.crt of the routers' Secret", f"{path}: {files.get(path)}")
            f.check(without_tls_flags(command) == (twin_containers.get(container["name"]) or {}).get("command"), vs,
                    f"{who} container {container['name']}", "command is the plaintext one plus --tls-ca alone")
    for service in services:
        for port in service["spec"].get("ports") or []:
            if port.get("name") == "grpc":
                f.check("appProtocol" not in port, vs, name_of(service), "the gRPC port speaks TLS: no appProtocol kubernetes.io/h2c",
                        str(port.get("appProtocol")))
    for ingress in ingresses:
        annotations = dict(ingress["metadata"].get("annotations") or {})
        f.check(annotations.pop(backend_protocol, None) == "GRPCS", vs, name_of(ingress), f"{backend_protocol}: GRPCS (the routers speak TLS)")
        wanted = {k: v for k, v in values["router"]["ingress"]["annotations"].items() if k != backend_protocol}
        f.check(annotations == wanted, vs, name_of(ingress), "other annotations are router.ingress.annotations", str(annotations))


def check_auth(f: Failures, vs: str, objects: list[dict], values: dict, chart, user_values: dict) -> None:
    """auth.enabled: the routers alone mount the tokens Secret (whole, read-only, 0440, its key
    `tokens` alone) and are given --auth-tokens naming that file; the helm test Job alone mounts
    the test token Secret (its key `token` alone) and passes --token-file to both steps; nothing
    else changes, and tokens reach no environment. Off: no trace of it. Never a Secret rendered."""
    f.check(not any(o["kind"] == "Secret" for o in objects), vs, "Secret",
            "none rendered: the chart takes no token and creates no Secret (the user does)",
            str([name_of(o) for o in objects if o["kind"] == "Secret"]))
    names = auth_names(values)
    if not values["auth"]["enabled"]:
        traces = sorted(AUTH_FLAGS) + [AUTH_DIR, AUTH_TEST_TOKEN_DIR, "KVFLEET_API_TOKEN", "auth-tokens", "auth-test-token"] \
            + sorted(names.values())
        for obj in objects:
            text = json.dumps(clean(obj))
            found = [t for t in traces if t in text]
            f.check(not found, vs, name_of(obj), "nothing auth-related without auth.enabled", str(found))
        return

    # The same values without auth: everything but the auth wiring must come out the same.
    plain_values = copy.deepcopy(user_values)
    plain_values.setdefault("auth", {})["enabled"] = False
    plain = {(o["kind"], o["metadata"]["name"]): o for o in render(chart, plain_values)}
    rendered = {(o["kind"], o["metadata"]["name"]) for o in objects}
    f.check(rendered == set(plain), vs, "chart", "auth.enabled renders no object of its own (no Secret, no ConfigMap)",
            str(sorted(rendered ^ set(plain))))
    mode = lambda volume: oct(volume["secret"].get("defaultMode")) if isinstance(volume["secret"].get("defaultMode"), int) else "unset"

    def check_volume(who: str, volume: dict, key: str) -> None:
        secret = volume["secret"]
        f.check(secret.get("items") == [{"key": key, "path": key}], vs, who,
                f"Secret {secret['secretName']!r}: its key {key!r} alone", str(secret.get("items")))
        f.check(secret.get("defaultMode") == 0o440, vs, who, f"Secret {secret['secretName']!r} defaultMode 0440 (owner and the pod's fsGroup)",
                mode(volume))
        f.check(not secret.get("optional"), vs, who, f"Secret {secret['secretName']!r} is not optional (no pod runs without it)")

    def check_mount(who: str, container: dict, volume: dict, directory: str) -> None:
        mounts = [m for m in container.get("volumeMounts") or [] if m["name"] == volume["name"]]
        f.check(len(mounts) == 1 and mounts[0]["mountPath"] == directory and mounts[0].get("readOnly") is True
                and "subPath" not in mounts[0], vs, who,
                f"{volume['secret']['secretName']!r} mounted whole and read-only at {directory} (no subPath: updates reach the pod)",
                str(mounts))

    for obj in objects:
        template = pod_template(obj)
        if not template:
            continue
        who, spec, component = name_of(obj), template["spec"], component_of(obj)
        volumes = spec.get("volumes") or []
        tokens_volumes = [v for v in volumes if (v.get("secret") or {}).get("secretName") == names["tokens"]]
        test_volumes = [v for v in volumes if (v.get("secret") or {}).get("secretName") == names["test"]]
        projected = [src["secret"]["name"] for v in volumes for src in (v.get("projected") or {}).get("sources") or []
                     if (src.get("secret") or {}).get("name") in names.values()]
        f.check(not projected, vs, who, "no auth Secret in a projected volume", str(projected))
        for container in containers_of(template, init=True):
            cwho = f"{who} container {container['name']}"
            for env in container.get("env") or []:
                ref = ((env.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name")
                f.check(ref not in names.values() and env["name"] != "KVFLEET_API_TOKEN", vs, cwho,
                        "no token and no token file in the environment (files only)", env["name"])
            for source in container.get("envFrom") or []:
                f.check((source.get("secretRef") or {}).get("name") not in names.values(), vs, cwho,
                        "no auth Secret in envFrom", str(source))
        twin = plain.get((obj["kind"], obj["metadata"]["name"]))
        if not f.check(twin is not None, vs, who, "renders without auth too"):
            continue
        twin_spec = twin["spec"]["template"]["spec"]
        twin_containers = {c["name"]: c for c in containers_of(twin["spec"]["template"], init=True)}
        if obj["kind"] == "Deployment" and component == "router":
            f.check(not test_volumes, vs, who, "routers never mount the helm test's token")
            if not f.check(len(tokens_volumes) == 1, vs, who, f"mounts the tokens Secret {names['tokens']!r} once",
                           str(len(tokens_volumes))):
                continue
            volume = tokens_volumes[0]
            check_volume(who, volume, "tokens")
            for container in containers_of(template, init=True):
                cwho = f"{who} container {container['name']}"
                if container["name"] != "router":
                    f.check(not any(m["name"] == volume["name"] for m in container.get("volumeMounts") or []), vs, cwho,
                            "only the router container mounts the token file")
                    continue
                check_mount(cwho, container, volume, AUTH_DIR)
                args = container.get("args") or []
                f.check(args.count("--auth-tokens") == 1 and "--token-file" not in args, vs, cwho, "--auth-tokens once, no --token-file",
                        str([a for a in args if a in AUTH_FLAGS]))
                path = arg_after(args, "--auth-tokens")
                f.check(path is not None and path.startswith(AUTH_DIR + "/")
                        and secret_files(template, container).get(path) == (names["tokens"], "tokens"), vs, cwho,
                        f"--auth-tokens {path} is the key tokens of the mounted Secret {names['tokens']!r}",
                        str(secret_files(template, container).get(path)))
                extra = len(values["router"].get("extraArgs") or [])
                f.check(path is not None and args.index("--auth-tokens") < len(args) - extra, vs, cwho,
                        "--auth-tokens comes before router.extraArgs (which still come last)")
                stripped = copy.deepcopy(container)
                stripped["args"] = without_flags(args, {"--auth-tokens"})
                stripped["volumeMounts"] = [m for m in container.get("volumeMounts") or [] if m["name"] != volume["name"]]
                if not stripped["volumeMounts"]:
                    stripped.pop("volumeMounts")  # a router with no other mount renders none
                f.check(stripped == twin_containers.get("router"), vs, cwho,
                        "the container without auth plus --auth-tokens and the mount alone (probes, env, ports unchanged)")
            f.check([v for v in volumes if v is not volume] == (twin_spec.get("volumes") or []), vs, who,
                    "volumes are the ones without auth plus the tokens Secret alone")
        elif obj["kind"] == "Job":
            f.check(not tokens_volumes, vs, who, "the test Job never mounts the routers' tokens Secret")
            if not f.check(len(test_volumes) == 1, vs, who, f"mounts the test token Secret {names['test']!r} once",
                           str(len(test_volumes))):
                continue
            volume = test_volumes[0]
            check_volume(who, volume, "token")
            containers = containers_of(template, init=True)
            f.check(sorted(c["name"] for c in containers) == ["chat", "models"], vs, who, "two steps: models and chat",
                    str([c["name"] for c in containers]))
            for container in containers:
                cwho = f"{who} container {container['name']}"
                command = container.get("command") or []
                check_mount(cwho, container, volume, AUTH_TEST_TOKEN_DIR)
                f.check(command.count("--token-file") == 1 and "--auth-tokens" not in command, vs, cwho,
                        f"kvfleet {container['name']} passes --token-file once", str(command))
                path = arg_after(command, "--token-file")
                f.check(path is not None and secret_files(template, container).get(path) == (names["test"], "token"), vs, cwho,
                        f"--token-file {path} is the key token of the mounted Secret {names['test']!r}",
                        str(secret_files(template, container).get(path)))
                stripped = copy.deepcopy(container)
                stripped["command"] = without_flags(command, {"--token-file"})
                stripped["volumeMounts"] = [m for m in container.get("volumeMounts") or [] if m["name"] != volume["name"]]
                if not stripped["volumeMounts"]:
                    del stripped["volumeMounts"]
                f.check(stripped == twin_containers.get(container["name"]), vs, cwho,
                        "the step without auth plus --token-file and the mount alone")
            f.check([v for v in volumes if v is not volume] == (twin_spec.get("volumes") or []), vs, who,
                    "volumes are the ones without auth plus the test token alone")
        else:
            f.check(not tokens_volumes and not test_volumes, vs, who, "mounts neither auth Secret (the token file is the routers' alone)")
            f.check(template == twin["spec"]["template"], vs, who, "pod template unchanged by auth.enabled")


def check_reflection(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    """Server reflection is off on the router's public port unless router.reflection, and never touched elsewhere."""
    want_off = not values["router"].get("reflection", False)
    for obj in objects:
        if obj["kind"] not in ("Deployment", "StatefulSet"):
            continue
        for c in containers_of(obj["spec"]["template"]):
            args = c.get("args") or []
            who = f"{name_of(obj)} container {c['name']}"
            expected = want_off and c["name"] == "router"
            f.check(("--no-reflection" in args) == expected, vs, who,
                    "--no-reflection" if expected else "no --no-reflection", " ".join(args))


def check_http(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    """router.http: the router's --http-listen, its container port, the router Service's port and the
    router NetworkPolicy's ingress on 8000 together, or none of them; the timeout in ms; the served name."""
    http = values["router"]["http"]
    served = values["router"].get("servedModelName", "")
    for obj in objects:
        kind, who = obj["kind"], name_of(obj)
        if kind in ("Deployment", "StatefulSet"):
            for c in containers_of(obj["spec"]["template"]):
                args = c.get("args") or []
                router = c["name"] == "router"
                ports = {p["name"]: p["containerPort"] for p in c.get("ports") or []}
                on = router and http["enabled"]
                f.check((arg_after(args, "--http-listen") == "0.0.0.0:8000") == on, vs, who,
                        "--http-listen 0.0.0.0:8000" if on else "no --http-listen", " ".join(args))
                f.check((ports.get("http") == 8000) == on, vs, who, "container port http 8000" if on else "no http port")
                if on:
                    f.check(arg_after(args, "--http-request-timeout") == str(http["requestTimeoutSeconds"] * 1000),
                            vs, who, "--http-request-timeout in ms", " ".join(args))
                if router:
                    # The routers name model.* only when they read it; its workers announce the name.
                    reads = values["router"].get("readModelFile", False)
                    f.check(arg_after(args, "--served-model-name") == (served if reads and served else None), vs, who,
                            f"--served-model-name {served!r}" if reads else "no --served-model-name", " ".join(args))
        if kind == "Service" and component_of(obj) == "router" and "grpc" in {p["name"] for p in obj["spec"]["ports"]}:
            ports = {p["name"]: p for p in obj["spec"]["ports"]}
            f.check(("http" in ports) == http["enabled"], vs, who, "port http" if http["enabled"] else "no http port")
            if http["enabled"]:
                f.check(ports["http"]["port"] == 8000 and ports["http"]["targetPort"] == "http", vs, who,
                        "http: 8000 -> http", str(ports["http"]))
        if kind == "NetworkPolicy" and component_of(obj) == "router":
            opened = {p["port"] for rule in obj["spec"]["ingress"] for p in rule.get("ports", [])}
            f.check((8000 in opened) == http["enabled"], vs, who, "ingress on 8000" if http["enabled"] else "8000 closed")


def check_kv_transfer(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    """worker.kvTransfer: the worker's --kv-transfer-listen 0.0.0.0:<port> (it advertises its pod IP with
    that port), --kv-transfer-deadline and --kv-transfer-max-pulls, each once and before worker.extraArgs;
    the container port kv-transfer; the port in the workers' headless Service (h2c without TLS); and in
    the workers' NetworkPolicy one rule opening it to this release's workers alone, which no other rule
    opens. With tls.enabled also --kv-transfer-allowed-peers and --kv-transfer-tls-name, each once and
    before worker.extraArgs (their values are check_tls's); without TLS neither. Off: none of them. No
    other container is given the flags."""
    kv = values["worker"]["kvTransfer"]
    on, port = bool(kv["enabled"]), int(kv["port"])
    tls = bool(values["tls"]["enabled"])
    every_flag = KV_TRANSFER_FLAGS | KV_TRANSFER_TLS_FLAGS
    wanted = KV_TRANSFER_FLAGS | (KV_TRANSFER_TLS_FLAGS if tls else set())
    pods = pods_by_component(objects)
    for obj in objects:
        kind, who, component = obj["kind"], name_of(obj), component_of(obj)
        if kind in WORKLOAD_KINDS:
            for c in containers_of(obj["spec"]["template"], init=True):
                cwho = f"{who} container {c['name']}"
                args = (c.get("command") or []) + (c.get("args") or [])
                ports = {p["name"]: p["containerPort"] for p in c.get("ports") or []}
                if not (kind == "StatefulSet" and c["name"] == "worker" and on):
                    f.check(not every_flag & set(args), vs, cwho, "no --kv-transfer-* flag",
                            str(sorted(every_flag & set(args))))
                    f.check("kv-transfer" not in ports and port not in ports.values(), vs, cwho,
                            f"no kv-transfer container port (and nothing on {port})", str(ports))
                    continue
                f.check(all(args.count(flag) == 1 for flag in KV_TRANSFER_FLAGS), vs, cwho, "each --kv-transfer-* flag once",
                        str([a for a in args if a in every_flag]))
                f.check(all(args.count(flag) == (1 if tls else 0) for flag in KV_TRANSFER_TLS_FLAGS), vs, cwho,
                        f"{sorted(KV_TRANSFER_TLS_FLAGS)} " + ("once each with tls.enabled" if tls else "absent without tls.enabled"),
                        str([a for a in args if a in KV_TRANSFER_TLS_FLAGS]))
                f.check(arg_after(args, "--kv-transfer-listen") == f"0.0.0.0:{port}", vs, cwho,
                        f"--kv-transfer-listen 0.0.0.0:{port} (worker.kvTransfer.port)", str(arg_after(args, "--kv-transfer-listen")))
                f.check(float(arg_after(args, "--kv-transfer-deadline") or "nan") == float(kv["deadlineSeconds"]), vs, cwho,
                        "--kv-transfer-deadline from worker.kvTransfer.deadlineSeconds", str(arg_after(args, "--kv-transfer-deadline")))
                f.check(arg_after(args, "--kv-transfer-max-pulls") == str(kv["maxPulls"]), vs, cwho,
                        "--kv-transfer-max-pulls from worker.kvTransfer.maxPulls", str(arg_after(args, "--kv-transfer-max-pulls")))
                advertise = arg_after(args, "--advertise-address") or ""
                f.check(advertise.startswith("$(POD_IP):"), vs, cwho,
                        "--advertise-address names the pod IP (the host the worker advertises for the transfer port)", advertise)
                extra = len(values["worker"].get("extraArgs") or [])
                f.check(all(args.index(flag) < len(args) - extra for flag in wanted if flag in args), vs, cwho,
                        "--kv-transfer-* come before worker.extraArgs (which still come last)")
                f.check(ports.get("kv-transfer") == port, vs, cwho, f"container port kv-transfer {port}", str(ports))
                f.check(list(ports.values()).count(port) == 1, vs, cwho, f"no other container port on {port}", str(ports))
        elif kind == "Service":
            service_ports = {p["name"]: p for p in obj["spec"].get("ports") or []}
            headless = component == "worker" and obj["spec"].get("clusterIP") == "None"
            if headless and on:
                entry = service_ports.get("kv-transfer") or {}
                f.check(entry.get("port") == port and entry.get("targetPort") == "kv-transfer", vs, who,
                        f"kv-transfer: {port} -> kv-transfer", str(entry))
                f.check((entry.get("appProtocol") == "kubernetes.io/h2c") == (not values["tls"]["enabled"]), vs, who,
                        "kv-transfer declares appProtocol kubernetes.io/h2c exactly while it is cleartext (no TLS)",
                        str(entry.get("appProtocol")))
            else:
                f.check("kv-transfer" not in service_ports, vs, who, "no kv-transfer port", str(sorted(service_ports)))
        elif kind == "NetworkPolicy":
            rules = [r for r in obj["spec"].get("ingress") or [] if any(p.get("port") in (port, "kv-transfer") for p in r.get("ports") or [])]
            if not (component == "worker" and on):
                f.check(not rules, vs, who, f"nothing opens {port} (the KV transfer port is the workers' alone, and only when on)",
                        str(rules))
                continue
            if not f.check(len(rules) == 1, vs, who, f"one rule opens the KV transfer port {port}", str(rules)):
                continue
            rule = rules[0]
            f.check(rule.get("ports") == [{"port": port, "protocol": "TCP"}], vs, who, f"the rule opens TCP {port} alone",
                    str(rule.get("ports")))
            peers = rule.get("from")
            chosen = {c for p in peers or [] for c, entries in pods.items() for _, labels in entries
                      if selector_matches(p.get("podSelector"), labels)}
            f.check(bool(peers) and all(set(p) == {"podSelector"} for p in peers) and chosen == {"worker"}, vs, who,
                    f"{port} only from this release's worker pods (a podSelector, no namespace or IP peers)",
                    f"{peers} selects {sorted(chosen)}")


# What the value set tests/deploy/helm/values/lora.yaml must render, spelled out (check_lora derives the
# same from the values for every set): the worker's flags as (flag, value) pairs, and the router's.
LORA_SET_WORKER_ARGS = [("--lora", "sql=/adapters/sql"), ("--lora", "support/v2=/adapters/support-v2"),
                        ("--max-loras", "4"), ("--max-lora-rank", "32"), ("--lora-dir", "/adapters")]
LORA_SET_ROUTER_ARGS = [("--admin-tokens", "/etc/kvfleet/admin/tokens")]
LORA_SET_ADMIN_SECRET = "llm-admin-tokens"


def flag_pairs(args: list[str], flags: set[str]) -> list[tuple[str, str | None]]:
    """(flag, value) for each of `flags` in args, in order."""
    return [(a, args[i + 1] if i + 1 < len(args) else None) for i, a in enumerate(args) if a in flags]


def check_lora(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    """worker.lora (a group's lora laid over it; none of it for a group with a model of its own): each
    worker gets --lora NAME=PATH per adapter in order, --max-loras while maxLoras is above 0,
    --max-lora-rank while adapters are on at all (adapters, dir or maxLoras), --lora-dir with dir, all
    before worker.extraArgs; with a volume, the pod's volume "adapters" is that volume source and the
    worker container alone mounts it, whole and read-only, at /adapters. auth.admin: the router alone
    gets --admin-tokens naming the key `tokens` of the admin tokens Secret, mounted whole, read-only,
    0440, and --admin-peers joining auth.admin.peers, before router.extraArgs. Nothing of either
    anywhere else, or when off."""
    groups = {g["statefulset"]: g["worker"] for g in worker_groups(values)}
    admin = values["auth"]["admin"]
    secret = admin_secret(values)
    for obj in objects:
        template = pod_template(obj)
        if not template:
            continue
        who, spec = name_of(obj), template["spec"]
        volumes = spec.get("volumes") or []
        lora = groups[obj["metadata"]["name"]]["lora"] if obj["kind"] == "StatefulSet" else None
        router = obj["kind"] == "Deployment" and component_of(obj) == "router"
        adapters_volumes = [v for v in volumes if v["name"] == "adapters"]
        admin_volumes = [v for v in volumes if (v.get("secret") or {}).get("secretName") == secret]
        if not (lora and lora["volume"]):
            f.check(not adapters_volumes, vs, who, "no adapters volume (no worker.lora.volume)", str(adapters_volumes))
        if not (router and admin["enabled"]):
            f.check(not admin_volumes, vs, who, f"no admin tokens Secret {secret!r} (the routers' alone, with auth.admin.enabled)",
                    str(admin_volumes))
        for container in containers_of(template, init=True):
            cwho = f"{who} container {container['name']}"
            args = (container.get("command") or []) + (container.get("args") or [])
            mounts = container.get("volumeMounts") or []
            own_worker = lora is not None and container["name"] == "worker"
            own_router = router and container["name"] == "router"
            if not own_worker:
                f.check(not LORA_FLAGS & set(args), vs, cwho, "no LoRA flag (workers' alone)", str(sorted(LORA_FLAGS & set(args))))
                f.check(not [m for m in mounts if m["name"] == "adapters" or m["mountPath"] == LORA_DIR], vs, cwho,
                        f"nothing mounted at {LORA_DIR} (workers' alone)")
            if not own_router:
                f.check(not ADMIN_FLAGS & set(args), vs, cwho, "no admin flag (the router's alone)", str(sorted(ADMIN_FLAGS & set(args))))
                f.check(not [m for m in mounts if m["mountPath"] == ADMIN_DIR or m["name"] in {v["name"] for v in admin_volumes}],
                        vs, cwho, f"nothing mounted at {ADMIN_DIR} (the routers' alone)")
            if own_worker:
                on = bool(lora["adapters"] or lora["dir"] or lora["maxLoras"] > 0)
                wanted = [("--lora", f"{a['name']}={a['path']}") for a in lora["adapters"]]
                if lora["maxLoras"] > 0:
                    wanted.append(("--max-loras", str(lora["maxLoras"])))
                if on:
                    wanted.append(("--max-lora-rank", str(lora["maxRank"])))
                if lora["dir"]:
                    wanted.append(("--lora-dir", lora["dir"]))
                extra = len(values["worker"].get("extraArgs") or [])
                chart_args = container["args"][:-extra] if extra else container["args"]
                f.check(flag_pairs(chart_args, LORA_FLAGS) == wanted, vs, cwho,
                        "LoRA flags from the group's lora, before worker.extraArgs" if on else "no LoRA flag (adapters off)",
                        f"{flag_pairs(chart_args, LORA_FLAGS)} vs {wanted}")
                f.check(flag_pairs(container["args"], LORA_FLAGS) == wanted, vs, cwho, "no LoRA flag but the chart's",
                        str(flag_pairs(container["args"], LORA_FLAGS)))
                lora_mounts = [m for m in mounts if m["name"] == "adapters" or m["mountPath"] == LORA_DIR]
                if lora["volume"]:
                    f.check(adapters_volumes == [{"name": "adapters", **lora["volume"]}], vs, who,
                            "volume adapters is worker.lora.volume (the group's lora)", str(adapters_volumes))
                    f.check(lora_mounts == [{"name": "adapters", "mountPath": LORA_DIR, "readOnly": True}], vs, cwho,
                            f"adapters mounted whole and read-only at {LORA_DIR}", str(lora_mounts))
                else:
                    f.check(not lora_mounts, vs, cwho, f"nothing mounted at {LORA_DIR} without worker.lora.volume", str(lora_mounts))
                if vs == "lora":
                    f.check(flag_pairs(container["args"], LORA_FLAGS) == LORA_SET_WORKER_ARGS, vs, cwho,
                            f"renders {LORA_SET_WORKER_ARGS}", str(flag_pairs(container["args"], LORA_FLAGS)))
            if own_router:
                wanted = ([("--admin-tokens", f"{ADMIN_DIR}/tokens")] if admin["enabled"] else []) \
                    + ([("--admin-peers", ",".join(admin["peers"]))] if admin["peers"] else [])
                extra = len(values["router"].get("extraArgs") or [])
                chart_args = container["args"][:-extra] if extra else container["args"]
                f.check(flag_pairs(chart_args, ADMIN_FLAGS) == wanted and flag_pairs(container["args"], ADMIN_FLAGS) == wanted,
                        vs, cwho, f"admin flags {wanted}, before router.extraArgs", str(flag_pairs(container["args"], ADMIN_FLAGS)))
                admin_mounts = [m for m in mounts if m["mountPath"] == ADMIN_DIR or m["name"] in {v["name"] for v in admin_volumes}]
                if admin["enabled"]:
                    f.check(len(admin_volumes) == 1 and admin_volumes[0]["secret"] == {
                                "secretName": secret, "defaultMode": 0o440, "items": [{"key": "tokens", "path": "tokens"}]},
                            vs, who, f"the admin tokens Secret {secret!r} once: its key tokens alone, 0440, not optional",
                            str(admin_volumes))
                    f.check(len(admin_mounts) == 1 and admin_mounts[0] == {"name": admin_volumes[0]["name"] if admin_volumes else None,
                                                                           "mountPath": ADMIN_DIR, "readOnly": True}, vs, cwho,
                            f"{secret!r} mounted whole and read-only at {ADMIN_DIR} (no subPath: updates reach the router)",
                            str(admin_mounts))
                    path = arg_after(container["args"], "--admin-tokens")
                    f.check(secret_files(template, container).get(path) == (secret, "tokens"), vs, cwho,
                            f"--admin-tokens {path} is the key tokens of the mounted Secret {secret!r}",
                            str(secret_files(template, container).get(path)))
                    if vs == "lora":
                        f.check(flag_pairs(container["args"], ADMIN_FLAGS) == LORA_SET_ROUTER_ARGS and secret == LORA_SET_ADMIN_SECRET,
                                vs, cwho, f"renders {LORA_SET_ROUTER_ARGS} from Secret {LORA_SET_ADMIN_SECRET!r}",
                                f"{flag_pairs(container['args'], ADMIN_FLAGS)} from {secret!r}")
                else:
                    f.check(not admin_mounts, vs, cwho, f"nothing mounted at {ADMIN_DIR} without auth.admin.enabled", str(admin_mounts))


GROUP_LABELS = ("kvfleet.io/worker-group", "kvfleet.io/worker-role")
ROLE_FLAGS = {"--role", "--kv-lease-seconds"}
SPLIT_FLAGS = {"--split-min-uncached-tokens", "--no-split", "--split-stream-first-token"}


def check_worker_groups(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    """workerGroups: per group one StatefulSet, headless Service, PodDisruptionBudget (while enabled) and
    ScaledObject (while its keda is on), named "<fullname>-worker" for a group with an empty name (with
    today's selector and no group label: an upgrade keeps the StatefulSet) and "<fullname>-worker-<name>"
    for a named one, whose objects and pods carry its group and role and whose selectors pick its own pods
    alone; its replicas, resources and keda are its own laid over worker.*. Its workers get --role unless
    it is both, and --kv-lease-seconds when prefill, before worker.extraArgs; nothing else differs between
    groups. The NetworkPolicies cover every group and all register with the routers' cachemanager. The
    router gets the split flags exactly while a group has role prefill."""
    groups = worker_groups(values)
    fixed = {"app.kubernetes.io/name": "kvfleet", "app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/component": "worker"}

    def named(kind: str) -> dict[str, dict]:
        return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}

    statefulsets, services, budgets, scalers = named("StatefulSet"), named("Service"), named("PodDisruptionBudget"), named("ScaledObject")
    f.check(sorted(statefulsets) == sorted(g["statefulset"] for g in groups), vs, "StatefulSet",
            "one per worker group, <fullname>-worker[-<name>]", f"{sorted(statefulsets)} vs {[g['statefulset'] for g in groups]}")
    pods = {name: o["spec"]["template"]["metadata"]["labels"] for name, o in statefulsets.items()}

    def picks(selector: dict | None) -> set[str]:
        return {name for name, labels in pods.items() if selector_matches(selector, labels)}

    kv, alike = values["worker"]["kvTransfer"], {}
    for group in groups:
        name, w, sts = group["name"], group["worker"], statefulsets.get(group["statefulset"])
        if sts is None:
            continue
        who, spec = name_of(sts), sts["spec"]
        own = {"kvfleet.io/worker-group": name, "kvfleet.io/worker-role": group["role"]} if name else {}
        for obj in [sts] + [o for o in (services.get(f"{group['statefulset']}-headless"), budgets.get(group["statefulset"]),
                                         scalers.get(group["statefulset"])) if o]:
            labels = obj["metadata"].get("labels") or {}
            f.check({k: labels[k] for k in GROUP_LABELS if k in labels} == own, vs, name_of(obj),
                    "labelled with its group and role" if name else "no group or role label (a group with an empty name)")
        labels = spec["template"]["metadata"]["labels"]
        f.check({k: labels[k] for k in GROUP_LABELS if k in labels} == own, vs, who,
                "pods labelled with their group and role" if name else "pods without a group or role label", str(labels))
        wanted = fixed | ({"kvfleet.io/worker-group": name} if name else {})
        f.check(spec["selector"] == {"matchLabels": wanted}, vs, who,
                "selector: the component's labels and the group's name" if name else "selector unchanged from a chart without groups",
                str(spec["selector"]))
        f.check(picks(spec["selector"]) == {group["statefulset"]}, vs, who, "selects its own group's pods alone", str(picks(spec["selector"])))
        if w["keda"]["enabled"]:
            f.check("replicas" not in spec, vs, who, "replicas left to the group's ScaledObject")
        else:
            f.check(spec.get("replicas") == w["replicas"], vs, who, "replicas: the group's, else worker.replicas",
                    f"{spec.get('replicas')} vs {w['replicas']}")
        service = services.get(spec.get("serviceName"))
        if f.check(spec.get("serviceName") == f"{group['statefulset']}-headless" and service is not None, vs, who,
                   "serviceName is the group's headless Service <statefulset>-headless", str(spec.get("serviceName"))):
            f.check(picks({"matchLabels": service["spec"].get("selector")}) == {group["statefulset"]}, vs, name_of(service),
                    "selects its own group's pods alone", str(service["spec"].get("selector")))
        budget = budgets.get(group["statefulset"])
        if f.check((budget is not None) == bool(w["podDisruptionBudget"]["enabled"]), vs, who,
                   "a PodDisruptionBudget of its name exactly while worker.podDisruptionBudget.enabled") and budget:
            f.check(picks(budget["spec"]["selector"]) == {group["statefulset"]}, vs, name_of(budget), "selects its own group's pods alone")
        scaler = scalers.get(group["statefulset"])
        if f.check((scaler is not None) == bool(w["keda"]["enabled"]), vs, who,
                   "a ScaledObject of its name exactly while the group's keda (else worker.keda) is on") and scaler:
            sspec, keda = scaler["spec"], w["keda"]
            f.check(sspec["scaleTargetRef"]["name"] == group["statefulset"], vs, name_of(scaler), "scales its group's StatefulSet")
            f.check((sspec["minReplicaCount"], sspec["maxReplicaCount"]) == (keda["minReplicas"], keda["maxReplicas"]), vs,
                    name_of(scaler), "min/max replicas: the group's keda laid over worker.keda",
                    f"{sspec['minReplicaCount']}..{sspec['maxReplicaCount']} vs {keda['minReplicas']}..{keda['maxReplicas']}")
            if not keda["query"]:
                query = sspec["triggers"][0]["metadata"]["query"]
                f.check(f'pod=~"{group["statefulset"]}-[0-9]+"' in query, vs, name_of(scaler),
                        "the default query counts its own group's pods alone", query)
        container = next(c for c in containers_of(spec["template"]) if c["name"] == "worker")
        resources = copy.deepcopy(w["resources"] or {})
        if worker_gpus(values["worker"]) > 0:
            for key in ("requests", "limits"):
                resources.setdefault(key, {})["nvidia.com/gpu"] = worker_gpus(values["worker"])
        f.check(container.get("resources") == resources, vs, who, "resources: the group's laid over worker.resources, and the GPUs",
                f"{container.get('resources')} vs {resources}")
        args, extra = container["args"], len(w.get("extraArgs") or [])
        chart_args = args[:-extra] if extra else args
        role = group["role"]
        f.check(chart_args.count("--role") == (role != "both") and arg_after(chart_args, "--role") == (None if role == "both" else role),
                vs, who, f"--role {role}, before worker.extraArgs" if role != "both" else "no --role (role both)", str(args))
        lease = arg_after(chart_args, "--kv-lease-seconds")
        f.check(chart_args.count("--kv-lease-seconds") == (role == "prefill")
                and (lease is None if role != "prefill" else float(lease) == float(kv["leaseSeconds"])), vs, who,
                "--kv-lease-seconds worker.kvTransfer.leaseSeconds" if role == "prefill" else "no --kv-lease-seconds (not prefill)", str(lease))
        # Nothing else differs between groups: the pod template without the group's labels, role
        # flags, resources and the --threads they give.
        template = copy.deepcopy(spec["template"])
        for key in GROUP_LABELS:
            template["metadata"]["labels"].pop(key, None)
        stripped = next(c for c in containers_of(template) if c["name"] == "worker")
        stripped["args"] = without_flags(stripped["args"], ROLE_FLAGS | {"--threads"})
        stripped.pop("resources", None)
        if any("model" in g for g in values["workerGroups"]):
            # Groups of several models: each group's model flags, volume, label and copy step are its
            # model's (check_security_and_model checks them); the rest is alike.
            stripped["args"] = without_flags(stripped["args"], {"--model", "--model-id", "--served-model-name"})
            template["metadata"]["labels"].pop("kvfleet.io/model", None)
            template["spec"].pop("initContainers", None)
            template["spec"]["volumes"] = [v for v in template["spec"].get("volumes") or [] if v["name"] != "model"]
            stripped["volumeMounts"] = [m for m in stripped.get("volumeMounts") or [] if m["name"] != "model"]
        if any("model" in g or "lora" in g for g in values["workerGroups"]):
            # Groups with LoRA adapters of their own (a group's lora, or none of worker.lora for a group
            # of its own model): check_lora checks each group's; the rest is alike.
            stripped["args"] = without_flags(stripped["args"], LORA_FLAGS)
            template["spec"]["volumes"] = [v for v in template["spec"].get("volumes") or [] if v["name"] != "adapters"]
            stripped["volumeMounts"] = [m for m in stripped.get("volumeMounts") or [] if m["name"] != "adapters"]
        alike[who] = template
    if len(alike) > 1:
        first = next(iter(alike.values()))
        f.check(all(t == first for t in alike.values()), vs, "StatefulSet", "the groups' pods differ in group, role and resources alone",
                str(sorted(alike)))
    # What takes the release's root covers every group.
    every = set(statefulsets)
    for policy in (o for o in objects if o["kind"] == "NetworkPolicy"):
        if component_of(policy) == "worker":
            f.check(picks(policy["spec"]["podSelector"]) == every, vs, name_of(policy), "podSelector covers every worker group",
                    str(picks(policy["spec"]["podSelector"])))
        for rule in policy["spec"].get("ingress") or []:
            for peer in rule.get("from") or []:
                chosen = picks(peer.get("podSelector")) if set(peer) == {"podSelector"} else set()
                f.check(chosen in (set(), every), vs, name_of(policy), "a worker peer is every worker group", str(peer))
    for monitor in (o for o in objects if o["kind"] == "PodMonitor"):
        f.check(picks(monitor["spec"]["selector"]) == every, vs, name_of(monitor), "scrapes every worker group")
    workloads = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet") and component_of(o) in ("router", "worker")]
    addresses = {arg_after(next(c for c in containers_of(o["spec"]["template"]) if c["name"] == component_of(o))["args"], "--cachemanager")
                 for o in workloads}
    f.check(len(addresses) == 1, vs, "workers", "every group registers with the cachemanager the routers ask (how routers find them)",
            str(addresses))
    prefill, split = any(g["role"] == "prefill" for g in groups), values["router"]["split"]
    wanted = (["--split-min-uncached-tokens", str(split["minUncachedTokens"])]
              + (["--split-stream-first-token"] if split["streamFirstToken"] else []) if split["enabled"] else ["--no-split"]) if prefill else []
    for router in (o for o in workloads if component_of(o) == "router"):
        args = next(c for c in containers_of(router["spec"]["template"]) if c["name"] == "router")["args"]
        given = [a for i, a in enumerate(args) if a in SPLIT_FLAGS or (i and args[i - 1] == "--split-min-uncached-tokens")]
        f.check(given == wanted, vs, name_of(router),
                f"split flags {wanted}" + (" (a prefill group)" if prefill else " (no prefill group: none)"), str(given))
        extra = len(values["router"].get("extraArgs") or [])
        f.check(all(args.index(flag) < len(args) - extra for flag in SPLIT_FLAGS if flag in args), vs, name_of(router),
                "split flags before router.extraArgs")


def check_group_fallback(f: Failures, chart) -> None:
    """A group's replicas, resources, keda and lora fall back to worker.* key by key: one unnamed group of
    role both that sets them renders what worker.* set to the same renders, and the default (one such
    group, nothing set) what an empty workerGroups entry would."""
    vs = "worker groups"
    own = {"replicas": 5, "resources": {"requests": {"cpu": "6"}}, "keda": {"enabled": True, "maxReplicas": 9},
           "lora": {"maxLoras": 2, "adapters": [{"name": "sql", "path": "/adapters/sql"}], "volume": {"configMap": {"name": "a"}}}}
    as_group = render(chart, {"workerGroups": [{"name": "", "role": "both", **own}]})
    as_worker = render(chart, {"worker": own})
    f.check(as_group == as_worker, vs, "chart", "a sole unnamed group's replicas, resources, keda and lora render as worker.*'s",
            str(sorted({name_of(o) for o in as_group} ^ {name_of(o) for o in as_worker}) or "objects differ"))
    f.check(render(chart, {}) == render(chart, {"workerGroups": [{"name": "", "role": "both"}]}), vs, "chart",
            "the default is one unnamed group of role both")


QUOTA_FLAGS = {"requestsPerSecond": "--tenant-requests-per-second", "requestBurst": "--tenant-request-burst",
               "tokensPerSecond": "--tenant-tokens-per-second", "tokenBurst": "--tenant-token-burst",
               "maxStreams": "--tenant-max-streams"}


def check_quotas(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    """Each router.tenantQuotas value above 0 is its --tenant-* flag with that value, on routers only; 0 renders nothing."""
    quotas = values["router"].get("tenantQuotas", {})
    for obj in objects:
        if obj["kind"] not in ("Deployment", "StatefulSet"):
            continue
        for c in containers_of(obj["spec"]["template"]):
            args = c.get("args") or []
            who = f"{name_of(obj)} container {c['name']}"
            for key, flag in QUOTA_FLAGS.items():
                value = quotas.get(key, 0) if c["name"] == "router" else 0
                if value > 0:
                    ok = flag in args and args.index(flag) + 1 < len(args) and float(args[args.index(flag) + 1]) == value
                    f.check(ok, vs, who, f"{flag} {value}", " ".join(args))
                else:
                    f.check(flag not in args, vs, who, f"no {flag}", " ".join(args))


def check_worker_identity(f: Failures, vs: str, objects: list[dict]) -> None:
    for obj in objects:
        if obj["kind"] != "StatefulSet":
            continue
        container = next(c for c in containers_of(obj["spec"]["template"]) if c["name"] == "worker")
        who, args = f"{name_of(obj)} container worker", container.get("args") or []
        f.check(arg_after(args, "--worker-id") == "$(POD_NAME)", vs, who, "--worker-id $(POD_NAME)", str(arg_after(args, "--worker-id")))
        advertise = arg_after(args, "--advertise-address") or ""
        f.check(re.fullmatch(r"\$\(POD_IP\):50051", advertise) is not None, vs, who, "--advertise-address $(POD_IP):50051", advertise)
        f.check(arg_after(args, "--listen") == "0.0.0.0:50051", vs, who, "--listen 0.0.0.0:50051")
        env = {e["name"]: ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath") for e in container.get("env") or []}
        f.check(env.get("POD_NAME") == "metadata.name", vs, who, "POD_NAME from the downward API (metadata.name)")
        f.check(env.get("POD_IP") == "status.podIP", vs, who, "POD_IP from the downward API (status.podIP)")


def group_model(values: dict, statefulset: str) -> tuple[dict, bool]:
    """The model a worker StatefulSet serves (its group's own, which takes model.*'s source and nothing else
    of it), and whether the group has its own."""
    for group in values["workerGroups"]:
        name = f"{fullname(values)}-worker" + (f"-{group['name']}" if group["name"] else "")
        if name == statefulset:
            if "model" not in group:
                return values["model"], False
            own = {"id": "", "draftFile": "", "draftHeadsDir": "", "calibration": "", "source": values["model"]["source"]}
            return laid_over(own, group["model"]), True
    return values["model"], False


def check_security_and_model(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    release_values = values
    for obj in objects:
        values = release_values
        if component_of(obj) == "worker" and obj["kind"] == "StatefulSet":
            model, own = group_model(release_values, obj["metadata"]["name"])
            values = {**release_values, "model": model}
            container = next(c for c in containers_of(pod_template(obj)) if c["name"] == "worker")
            model_id = model.get("id") or model["file"][: -len(".gguf")]
            f.check(arg_after(container["args"], "--model-id") == model_id, vs, name_of(obj), f"--model-id {model_id}")
            served = release_values["router"].get("servedModelName") or ""
            want = served if served and not own else None
            f.check(arg_after(container["args"], "--served-model-name") == want, vs, name_of(obj),
                    f"--served-model-name {want} (router.servedModelName, for model.*'s workers)", str(container["args"]))
            labels = pod_template(obj)["metadata"].get("labels") or {}
            f.check(labels.get("kvfleet.io/model") == model_id, vs, name_of(obj), f"pod label kvfleet.io/model {model_id}")
        model_path = f"/models/{values['model']['file']}"
        template = pod_template(obj)
        if not template:
            continue
        who, spec = name_of(obj), template["spec"]
        pod = spec.get("securityContext") or {}
        f.check(pod.get("runAsNonRoot") is True and pod.get("runAsUser") == 10001 and "fsGroup" in pod
                and (pod.get("seccompProfile") or {}).get("type") == "RuntimeDefault", vs, who,
                "pod securityContext: runAsNonRoot, uid 10001, fsGroup, seccomp RuntimeDefault", str(pod))
        for container in containers_of(template, init=True):
            sc = container.get("securityContext") or {}
            f.check(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False
                    and "ALL" in ((sc.get("capabilities") or {}).get("drop") or []), vs, f"{who} container {container['name']}",
                    "container securityContext: read-only root, no privilege escalation, drop ALL", str(sc))
        if component_of(obj) == "router" and not values["router"].get("readModelFile"):
            # The routers learn every model from the workers: no model file, volume or name.
            container = next(c for c in containers_of(template) if c["name"] == "router")
            f.check(not [m for m in container.get("volumeMounts") or [] if m["mountPath"] == "/models"], vs, who,
                    "no model mounted (router.readModelFile false)")
            f.check(not [v for v in spec.get("volumes") or [] if v["name"] == "model"], vs, who, "no model volume")
            for flag in ("--model", "--model-id", "--served-model-name"):
                f.check(arg_after(container["args"], flag) is None, vs, who, f"no {flag}", str(container["args"]))
            f.check(not spec.get("initContainers"), vs, who, "no model-copy init container")
        elif component_of(obj) in ("router", "worker"):
            container = next(c for c in containers_of(template) if c["name"] == component_of(obj))
            mounts = [m for m in container.get("volumeMounts") or [] if m["mountPath"] == "/models"]
            f.check(len(mounts) == 1 and mounts[0].get("readOnly") is True, vs, who, "model mounted read-only at /models", str(mounts))
            f.check(arg_after(container["args"], "--model") == model_path, vs, who, f"--model {model_path}")
            volume = next((v for v in spec.get("volumes") or [] if v["name"] == "model"), {})
            source = values["model"]["source"]["type"]
            expected = {"pvc": "persistentVolumeClaim", "hostPath": "hostPath", "image": "emptyDir"}[source]
            f.check(expected in volume, vs, who, f"model volume is a {expected} (model.source.type {source})", str(volume))
            if source == "image":
                init = [c for c in spec.get("initContainers") or [] if c["name"] == "model-copy"]
                f.check(len(init) == 1 and init[0]["command"][-1] == model_path, vs, who, "model-copy init container copies to the model path")
            draft = values["model"].get("draftFile") or ""
            heads = values["model"].get("draftHeadsDir") or ""
            if component_of(obj) == "worker":
                want = f"/models/{draft}" if draft else None
                f.check(arg_after(container["args"], "--spec-draft-model") == want, vs, who,
                        f"--spec-draft-model {want} (model.draftFile)", str(container["args"]))
                want = f"/models/{heads}" if heads else None
                f.check(arg_after(container["args"], "--spec-draft-heads") == want, vs, who,
                        f"--spec-draft-heads {want} (model.draftHeadsDir)", str(container["args"]))
                top_k = values["worker"].get("specHeadsTopK", 1)
                want = str(top_k) if heads and top_k > 1 else None
                f.check(arg_after(container["args"], "--spec-heads-top-k") == want, vs, who,
                        f"--spec-heads-top-k {want} (worker.specHeadsTopK with heads)", str(container["args"]))
            if source == "image" and heads:
                init = [c for c in spec.get("initContainers") or [] if c["name"] == "draft-heads-copy"]
                f.check(len(init) == 1 and init[0]["command"][-1] == f"/models/{heads}", vs, who,
                        "draft-heads-copy init container copies the heads next to the model")
            if source == "image" and draft:
                init = [c for c in spec.get("initContainers") or [] if c["name"] == "draft-model-copy"]
                f.check(len(init) == 1 and init[0]["command"][1:] == [values["model"]["source"]["image"]["draftPath"],
                                                                       f"/models/{draft}"],
                        vs, who, "draft-model-copy init container copies the draft next to the model")
            if source == "pvc" and values["model"]["source"]["pvc"]["subPath"]:
                f.check(mounts and mounts[0].get("subPath") == values["model"]["source"]["pvc"]["subPath"], vs, who, "subPath mounted")


def check_worker_sizing(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    group_values = {g["statefulset"]: g["worker"] for g in worker_groups(values)}
    for obj in objects:
        if obj["kind"] != "StatefulSet" or obj["metadata"]["name"] not in group_values:
            continue
        container = next(c for c in containers_of(obj["spec"]["template"]) if c["name"] == "worker")
        who, args, w = f"{name_of(obj)} container worker", container["args"], group_values[obj["metadata"]["name"]]
        kv = arg_after(args, "--kv-cache-memory")
        default = "0.9" if worker_gpus(w) > 0 else "0.8"
        f.check(kv == (str(w["kvCacheMemory"]) or default), vs, who, "--kv-cache-memory from worker.kvCacheMemory or the mode's default", str(kv))
        f.check(arg_after(args, "--device") == w["device"], vs, who, "--device from worker.device")
        f.check(arg_after(args, "--kv-cache-dtype") == w["kvCacheDtype"], vs, who,
                "--kv-cache-dtype from worker.kvCacheDtype")
        f.check(arg_after(args, "--cpu-activations") == w["cpuActivations"], vs, who,
                "--cpu-activations from worker.cpuActivations")
        record = values["model"]["calibration"]
        volumes_now = {v["name"]: v for v in obj["spec"]["template"]["spec"].get("volumes") or []}
        mounts_now = {m["name"]: m["mountPath"] for m in container.get("volumeMounts") or []}
        if record:
            cm_name = volumes_now.get("calibration", {}).get("configMap", {}).get("name")
            cms = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == cm_name]
            f.check(len(cms) == 1 and cms[0]["data"].get("record.json") == record, vs, who,
                    "model.calibration rendered whole into the ConfigMap its calibration volume names", str(cm_name))
            f.check(arg_after(args, "--calibration") == f"{mounts_now.get('calibration')}/record.json", vs, who,
                    "--calibration names the mounted record", str(arg_after(args, "--calibration")))
            annotations = obj["spec"]["template"]["metadata"].get("annotations") or {}
            f.check(annotations.get("kvfleet.io/calibration-sha256") == hashlib.sha256(record.encode()).hexdigest(),
                    vs, who, "the pod template carries the record's sha256, so a changed record rolls the workers",
                    str(annotations))
        else:
            f.check("--calibration" not in args and "calibration" not in volumes_now, vs, who,
                    "no --calibration and no calibration volume without model.calibration (the worker looks beside the model)")
        f.check(("--keep-window-blocks" in args) == bool(w["keepWindowBlocks"]), vs, who,
                "--keep-window-blocks exactly when worker.keepWindowBlocks")
        expected_tp = str(w["tensorParallelSize"]) if w["tensorParallelSize"] > 1 else None
        f.check(arg_after(args, "--tensor-parallel") == expected_tp, vs, who,
                "--tensor-parallel from worker.tensorParallelSize (absent at 1)", str(arg_after(args, "--tensor-parallel")))
        tiers = w["kvTiers"]
        f.check(arg_after(args, "--kv-host-memory") == (tiers["hostMemory"] or None), vs, who,
                "--kv-host-memory from worker.kvTiers.hostMemory", str(arg_after(args, "--kv-host-memory")))
        disk = tiers["disk"]
        mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts") or []}
        volumes = {v["name"]: v for v in obj["spec"]["template"]["spec"].get("volumes") or []}
        claims = {c["metadata"]["name"]: c for c in obj["spec"].get("volumeClaimTemplates") or []}
        if disk["enabled"]:
            f.check(arg_after(args, "--kv-disk-dir") == mounts.get("kv-disk"), vs, who,
                    "--kv-disk-dir is the kv-disk volume's mount", str(mounts.get("kv-disk")))
            size = float(arg_after(args, "--kv-disk-size") or 0)
            f.check(0 < size < quantity_bytes(disk["size"]), vs, who, "--kv-disk-size below the volume's size",
                    str(size))
            if disk["persistent"]:
                f.check("kv-disk" in claims and "kv-disk" not in volumes, vs, who,
                        "a persistent disk tier is a volumeClaimTemplate")
                f.check(claims.get("kv-disk", {}).get("spec", {}).get("resources", {}).get("requests", {})
                        .get("storage") == disk["size"], vs, who, "the claim requests worker.kvTiers.disk.size")
            else:
                f.check(volumes.get("kv-disk", {}).get("emptyDir", {}).get("sizeLimit") == disk["size"], vs, who,
                        "an emptyDir of worker.kvTiers.disk.size")
        else:
            f.check("--kv-disk-dir" not in args and "kv-disk" not in mounts and not claims, vs, who,
                    "no disk tier unless worker.kvTiers.disk.enabled")
        limits = (container.get("resources") or {}).get("limits") or {}
        if worker_gpus(w) == 0:
            f.check("memory" in limits, vs, who, "CPU worker has a memory limit (the KV fraction is measured under it)")
        configured = (w.get("resources") or {})
        cpu = ((configured.get("limits") or {}).get("cpu") or (configured.get("requests") or {}).get("cpu"))
        if w.get("threads") is not None:
            threads = str(w["threads"])
        elif cpu is not None:
            text = str(cpu)
            threads = str(max(1, int(text[:-1]) // 1000 if text.endswith("m") else int(float(text))))
        else:
            threads = None
        f.check(arg_after(args, "--threads") == threads, vs, who, "--threads from worker.threads, else the whole CPUs of limits/requests",
                f"{arg_after(args, '--threads')} vs {threads}")
        runtime = obj["spec"]["template"]["spec"].get("runtimeClassName")
        f.check(runtime == (w["runtimeClassName"] or None), vs, who, "runtimeClassName from values", str(runtime))


def check_images(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    """GPU workers run the CUDA variant, everything else the CPU one, unless a component overrides it."""
    image = values["image"]
    for obj in objects:
        template = pod_template(obj)
        if not template:
            continue
        component = component_of(obj)
        override = values.get(component, {}).get("image", {}) if component in ("router", "worker", "cachemanager") else {}
        variant = image["cudaTag"] if component == "worker" and worker_gpus(values["worker"]) > 0 else image["tag"]
        expected = f"{override.get('repository') or image['repository']}:{override.get('tag') or variant}"
        for container in containers_of(template, init=True):
            if container["name"] in ("model-copy", "draft-model-copy", "draft-heads-copy"):  # the model image's
                continue
            f.check(container["image"] == expected, vs, f"{name_of(obj)} container {container['name']}", "image",
                    f"{container['image']} vs {expected}")
            f.check(container.get("imagePullPolicy") == image["pullPolicy"], vs, f"{name_of(obj)} container {container['name']}",
                    "imagePullPolicy from image.pullPolicy")


def check_hook(f: Failures, vs: str, objects: list[dict], values: dict) -> None:
    jobs = [o for o in objects if o["kind"] == "Job"]
    if not values["tests"]["enabled"]:
        f.check(not jobs, vs, "Job", "no test Job when tests.enabled is false")
        return
    if not f.check(len(jobs) == 1, vs, "Job", "one helm test Job", str(len(jobs))):
        return
    job = jobs[0]
    who = name_of(job)
    f.check((job["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test", vs, who, "annotated helm.sh/hook: test")
    spec = job["spec"]["template"]["spec"]
    commands = [c["command"] for c in (spec.get("initContainers") or []) + spec["containers"]]
    router = next(o["metadata"]["name"] for o in objects if o["kind"] == "Service" and component_of(o) == "router"
                  and any(p.get("name") == "grpc" for p in o["spec"].get("ports") or []))
    f.check(commands and commands[0][:4] == ["kvfleet", "models", "--router", f"{router}:50060"], vs, who,
            "first runs kvfleet models --router <router>:50060", str(commands[:1]))
    f.check(len(commands) == 2 and commands[1][:6] == ["kvfleet", "chat", "--router", f"{router}:50060", "--max-tokens", "8"]
            and commands[1][-1] == values["tests"]["prompt"], vs, who,
            "then kvfleet chat --router <router>:50060 --max-tokens 8 PROMPT", str(commands[1:]))


def check_optional_objects(f: Failures, vs: str, objects: list[dict], values: dict, chart_dir: str) -> None:
    kinds = collections.Counter(o["kind"] for o in objects)
    expectations = {
        "HorizontalPodAutoscaler": values["router"]["autoscaling"]["enabled"],
        "Ingress": values["router"]["ingress"]["enabled"],
        "GRPCRoute": values["router"]["grpcRoute"]["enabled"],
        "ScaledObject": sum(g["worker"]["keda"]["enabled"] for g in worker_groups(values)),
        "ServiceMonitor": values["metrics"]["serviceMonitor"]["enabled"],
        "PodMonitor": values["metrics"]["podMonitor"]["enabled"],
        "PrometheusRule": values["metrics"]["prometheusRule"]["enabled"],
    }
    for kind, wanted in expectations.items():
        f.check(kinds[kind] == int(wanted), vs, kind, "rendered exactly when its values enable it (ScaledObject: per worker group)",
                f"{kinds[kind]} rendered")
    dashboards = sorted(n for n in os.listdir(os.path.join(chart_dir, "dashboards")) if n.endswith(".json")) \
        if os.path.isdir(os.path.join(chart_dir, "dashboards")) else []
    maps = [o for o in objects if o["kind"] == "ConfigMap" and values["dashboards"]["label"] in (o["metadata"].get("labels") or {})]
    if values["dashboards"]["enabled"]:
        f.check(sorted(k for m in maps for k in m["data"]) == dashboards, vs, "ConfigMap dashboards", "one ConfigMap per dashboards/*.json",
                f"{[k for m in maps for k in m['data']]} vs {dashboards}")
        for cm in maps:
            f.check(cm["metadata"]["labels"][values["dashboards"]["label"]] == values["dashboards"]["labelValue"], vs, name_of(cm),
                    "labelled for Grafana's sidecar")
            if values["dashboards"]["folder"]:
                f.check((cm["metadata"].get("annotations") or {}).get(values["dashboards"]["folderAnnotation"]) == values["dashboards"]["folder"],
                        vs, name_of(cm), "folder annotation")
            for key, text in cm["data"].items():
                try:
                    json.loads(text)
                    f.check(True, vs, name_of(cm), f"{key} is JSON")
                except ValueError as error:
                    f.check(False, vs, name_of(cm), f"{key} is JSON", str(error))
    else:
        f.check(not maps, vs, "ConfigMap dashboards", "none when dashboards.enabled is false")
    for rule_object in (o for o in objects if o["kind"] == "PrometheusRule"):
        threshold = float(values["alerts"]["routerTtftP99Seconds"])
        exprs = [r["expr"] for g in rule_object["spec"]["groups"] for r in g.get("rules") or [] if r.get("alert") == TTFT_ALERT]
        found = [float(m.group(1)) for e in exprs for m in [re.search(r">\s*([0-9.]+)\s*$", e.strip())] if m]
        f.check(found == [threshold], vs, name_of(rule_object), f"{TTFT_ALERT} threshold is alerts.routerTtftP99Seconds",
                f"{found} vs {threshold}")
        # Everything else is the rules files verbatim.
        originals = []
        for name in sorted(os.listdir(os.path.join(chart_dir, "rules"))):
            if name.endswith(".yaml"):
                with open(os.path.join(chart_dir, "rules", name)) as handle:
                    originals += (yaml.safe_load(handle) or {}).get("groups") or []
        rendered = copy.deepcopy(rule_object["spec"]["groups"])
        # runbook_url: a path in the rules files; alerts.runbookBaseUrl + "/" + that path in
        # the PrometheusRule, or left out while it is empty. The runbook anchor always stays.
        base = values["alerts"]["runbookBaseUrl"].rstrip("/")
        sources = {r["alert"]: r.get("annotations") or {} for g in originals for r in g.get("rules") or [] if "alert" in r}
        for rule in (r for g in rendered for r in g.get("rules") or [] if "alert" in r):
            annotations, label = rule.get("annotations") or {}, rule["alert"]
            source = sources.get(label, {})
            f.check(bool(annotations.get("runbook")) and annotations.get("runbook") == source.get("runbook"), vs,
                    name_of(rule_object), f"{label} keeps its runbook annotation", str(annotations.get("runbook")))
            if "runbook_url" in source:
                f.check(not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", source["runbook_url"]), vs, "rules/*.yaml",
                        f"{label} runbook_url is a path in the repository", source["runbook_url"])
                expected = f"{base}/{source['runbook_url'].lstrip('/')}" if base else None
                f.check(annotations.get("runbook_url") == expected, vs, name_of(rule_object),
                        f"{label} runbook_url is alerts.runbookBaseUrl + its path" + ("" if base else ", absent without a base URL"),
                        f"{annotations.get('runbook_url')} vs {expected}")
        for group in rendered + originals:
            for rule in group.get("rules") or []:
                (rule.get("annotations") or {}).pop("runbook_url", None)
                if rule.get("alert") == TTFT_ALERT:
                    rule["expr"] = re.sub(r">\s*[0-9.]+\s*$", "> X", rule["expr"].strip())
        f.check(rendered == originals, vs, name_of(rule_object),
                "groups are rules/*.yaml verbatim apart from the threshold and runbook_url")


def check_lint(f: Failures, vs: str, chart_dir: str, values: dict) -> None:
    for version in KUBE_VERSIONS:
        report = helm_python.lint(chart_dir, values, strict=True, namespace=NAMESPACE, kube_version=f"v{version}")
        problems = [m for m in report.get("messages") or [] if m.get("severity", 0) >= 2] + \
                   [{"error": e} for e in report.get("errors") or []]
        f.check(not problems, vs, "chart", f"helm lint --strict (kube {version})", "; ".join(str(p.get("error")) for p in problems))


# --- values the chart must refuse ---------------------------------------------------------------

REFUSALS = [
    # (what, values, where the refusal comes from, text the message must contain)
    ("a router reading model.* while a group serves another model",
     {"router": {"readModelFile": True},
      "workerGroups": [{"name": "chat", "role": "both"},
                       {"name": "coder", "role": "both", "model": {"file": "coder.gguf"}}]},
     "template", 'worker group "coder": the group serves a model of its own and router.readModelFile is true'),
    ("a group's model without its source's required field",
     {"workerGroups": [{"name": "coder", "role": "both", "model": {"file": "coder.gguf", "source": {"type": "hostPath"}}}]},
     "template", 'worker group "coder": model.source.type is hostPath: set model.source.hostPath.path'),
    ("a group's model file that is a path", {"workerGroups": [{"name": "a", "role": "both", "model": {"file": "x/y.gguf"}}]},
     "schema", "/workerGroups/0/model/file"),
    ("a group's model without a file", {"workerGroups": [{"name": "a", "role": "both", "model": {"id": "x"}}]},
     "schema", "file"),
    ("two models under one id",
     {"model": {"id": "llm"},
      "workerGroups": [{"name": "a", "role": "both"},
                       {"name": "b", "role": "both", "model": {"id": "llm", "file": "other.gguf"}}]},
     "template", 'model id "llm" names both SmolLM2-135M-Instruct.Q4_1.gguf and other.gguf'),
    ("a calibration that is not a record's JSON", {"model": {"calibration": "models/x.calibration.json"}}, "template",
     "model.calibration must be a calibration record's JSON text"),
    ("an unknown activation mode", {"worker": {"cpuActivations": "q4"}}, "schema", "/worker/cpuActivations"),
    ("negative router replicas", {"router": {"replicas": -1}}, "schema", "/router/replicas"),
    ("negative worker replicas", {"worker": {"replicas": -3}}, "schema", "/worker/replicas"),
    ("a negative tenant quota", {"router": {"tenantQuotas": {"maxStreams": -1}}}, "schema", "/router/tenantQuotas/maxStreams"),
    ("a zero HTTP timeout", {"router": {"http": {"enabled": True, "requestTimeoutSeconds": 0}}}, "schema",
     "/router/http/requestTimeoutSeconds"),
    ("an unknown top-level key", {"replica": 2}, "schema", "replica"),
    ("an unknown nested key", {"worker": {"gpus": 1}}, "schema", "gpus"),
    ("a string for a number", {"worker": {"drainTimeoutSeconds": "30"}}, "schema", "/worker/drainTimeoutSeconds"),
    ("a string for a number (probe)", {"worker": {"probes": {"startup": {"modelLoadSeconds": "600"}}}}, "schema", "modelLoadSeconds"),
    ("a Kubernetes unit the worker does not read", {"worker": {"kvCacheMemory": "8Gi"}}, "schema", "kvCacheMemory"),
    ("an unknown device", {"worker": {"device": "tpu"}}, "schema", "/worker/device"),
    ("an unknown KV cache format", {"worker": {"kvCacheDtype": "int4"}}, "schema", "/worker/kvCacheDtype"),
    ("an unknown model source", {"model": {"source": {"type": "s3"}}}, "schema", "/model/source/type"),
    ("a model id that is not a label value", {"model": {"id": "org/model"}}, "schema", "/model/id"),
    ("the keys auth was reserved with", {"auth": {"tokenSecret": {"name": "kvfleet-tokens", "key": "tokens"}}}, "schema",
     "tokenSecret"),
    ("a token (not a Secret's name) in auth.tokensSecret", {"auth": {"tokensSecret": "Bearer s3cr3t"}}, "schema",
     "/auth/tokensSecret"),
    ("a test token Secret name that is not a DNS name", {"auth": {"testTokenSecret": "helm_test"}}, "schema",
     "/auth/testTokenSecret"),
    ("auth.enabled as a string", {"auth": {"enabled": "true"}}, "schema", "/auth/enabled"),
    ("the helm test's plain token in the routers' tokens Secret",
     {"auth": {"enabled": True, "tokensSecret": "llm-tokens", "testTokenSecret": "llm-tokens"}}, "render",
     "auth.testTokenSecret and auth.tokensSecret"),
    ("auth without an fsGroup to read the 0440 token file",
     {"auth": {"enabled": True}, "podSecurityContext": {"fsGroup": None}}, "render", "auth.enabled: the token files"),
    ("the keys TLS was reserved with", {"tls": {"secretName": "kvfleet-tls"}}, "schema", "secretName"),
    ("a TLS Secret name that is not a DNS name", {"tls": {"router": {"secretName": "Router_TLS"}}}, "schema", "/tls/router/secretName"),
    ("a client name holding a comma (--tls-allowed-peers is a list)", {"tls": {"worker": {"clientName": "a,b"}}}, "schema",
     "/tls/worker/clientName"),
    ("a worker server name that is not a DNS name", {"tls": {"worker": {"serverName": "worker llm"}}}, "schema", "/tls/worker/serverName"),
    ("an unknown key under tls.cachemanager", {"tls": {"cachemanager": {"clientName": "cm"}}}, "schema", "clientName"),
    ("routers and workers admitted under one name",
     {"tls": {"enabled": True, "router": {"clientName": "kvfleet"}, "worker": {"clientName": "kvfleet"}}},
     "render", "tls.router.clientName and tls.worker.clientName"),
    ("the workers' server name being the routers' client name",
     {"tls": {"enabled": True, "worker": {"serverName": "kvf-kvfleet-router"}}}, "render", "tls.worker.serverName"),
    ("TLS without an fsGroup to read the 0440 key files",
     {"tls": {"enabled": True}, "podSecurityContext": {"fsGroup": None}}, "render", "podSecurityContext.fsGroup"),
    ("two LoRA adapters of one name",
     {"worker": {"lora": {"adapters": [{"name": "sql", "path": "/adapters/sql"}, {"name": "sql", "path": "/adapters/sql-v2"}]}}},
     "render", 'worker.lora.adapters: two adapters are named "sql"'),
    ("two LoRA adapters of one name in a group's own lora",
     {"workerGroups": [{"name": "chat", "role": "both"},
                       {"name": "coder", "role": "both", "model": {"file": "coder.gguf"},
                        "lora": {"adapters": [{"name": "py", "path": "/a/py"}, {"name": "py", "path": "/a/py2"}]}}]},
     "render", 'worker group "coder": worker.lora.adapters: two adapters are named "py"'),
    ("a LoRA adapter named as the model's served name",
     {"router": {"servedModelName": "chat"}, "worker": {"lora": {"adapters": [{"name": "chat", "path": "/adapters/chat"}]}}},
     "render", 'the adapter name "chat" is the model\'s own name'),
    ("an adapters volume no adapter can load from",
     {"worker": {"lora": {"volume": {"persistentVolumeClaim": {"claimName": "adapters"}}}}},
     "render", "worker.lora.volume is mounted but the workers serve no adapters"),
    ("a LoRA rank over 512", {"worker": {"lora": {"maxRank": 1024}}}, "schema", "/worker/lora/maxRank"),
    ("a LoRA rank of 0", {"worker": {"lora": {"maxRank": 0}}}, "schema", "/worker/lora/maxRank"),
    ("more LoRA slots than a worker takes", {"worker": {"lora": {"maxLoras": 2048}}}, "schema", "/worker/lora/maxLoras"),
    ("a LoRA adapter name starting with a dot", {"worker": {"lora": {"adapters": [{"name": "../sql", "path": "/adapters/sql"}]}}},
     "schema", "/worker/lora/adapters/0/name"),
    ("a LoRA adapter name holding '=' (--lora NAME=PATH)",
     {"worker": {"lora": {"adapters": [{"name": "sql=v2", "path": "/adapters/sql"}]}}}, "schema", "/worker/lora/adapters/0/name"),
    ("a relative LoRA adapter path", {"worker": {"lora": {"adapters": [{"name": "sql", "path": "adapters/sql"}]}}}, "schema",
     "/worker/lora/adapters/0/path"),
    ("an adapter without a path", {"worker": {"lora": {"adapters": [{"name": "sql"}]}}}, "schema", "path"),
    ("an adapters volume of two sources",
     {"worker": {"lora": {"dir": "/adapters", "volume": {"nfs": {"server": "nfs", "path": "/a"}, "configMap": {"name": "a"}}}}},
     "schema", "/worker/lora/volume"),
    ("an adapters volume that names itself (the chart names it)",
     {"worker": {"lora": {"dir": "/adapters", "volume": {"name": "mine"}}}}, "schema", "/worker/lora"),
    ("an unknown key under worker.lora", {"worker": {"lora": {"rank": 8}}}, "schema", "rank"),
    ("an unknown key in a group's lora", {"workerGroups": [{"name": "a", "role": "both", "lora": {"loras": []}}]}, "schema",
     "/workerGroups/0/lora"),
    ("admin certificates without TLS", {"auth": {"admin": {"peers": ["ops.llm.internal"]}}}, "render",
     "auth.admin.peers names client certificates"),
    ("an admin certificate name holding a comma (--admin-peers is a list)",
     {"tls": {"enabled": True}, "auth": {"admin": {"peers": ["ops,oncall"]}}}, "schema", "/auth/admin/peers/0"),
    ("an admin tokens Secret name that is not a DNS name", {"auth": {"admin": {"tokensSecret": "Admin_Tokens"}}}, "schema",
     "/auth/admin/tokensSecret"),
    ("the tenants' token file as the admins'",
     {"auth": {"enabled": True, "tokensSecret": "llm-tokens", "admin": {"enabled": True, "tokensSecret": "llm-tokens"}}},
     "render", 'auth.admin.tokensSecret and auth.tokensSecret are both "llm-tokens"'),
    ("the helm test's plain token as the admins' token file",
     {"auth": {"testTokenSecret": "llm-test-token", "admin": {"enabled": True, "tokensSecret": "llm-test-token"}}},
     "render", "auth.admin.tokensSecret and auth.testTokenSecret"),
    ("admin tokens without an fsGroup to read the 0440 file",
     {"auth": {"admin": {"enabled": True}}, "podSecurityContext": {"fsGroup": None}}, "render", "auth.admin.enabled: the admin token file"),
    ("a CPU worker holding a GPU", {"worker": {"device": "cpu"}}, "render", "gpusPerWorker"),
    ("fewer GPUs than tensor-parallel ranks", {"worker": {"gpusPerWorker": 2, "tensorParallelSize": 4}}, "render",
     "a GPU for each rank"),
    ("a tensor-parallel degree of 0", {"worker": {"tensorParallelSize": 0}}, "schema", "tensorParallelSize"),
    ("cuda without a GPU", {"worker": {"device": "cuda", "gpusPerWorker": 0,
                                       "resources": {"limits": {"memory": "8Gi"}}}}, "render", "gpusPerWorker is 0"),
    ("a CPU KV size not below the memory limit",
     {"worker": {"device": "cpu", "gpusPerWorker": 0, "kvCacheMemory": "8GiB", "tolerations": [],
                 "resources": {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "8Gi"}}}},
     "render", "is not below worker.resources.limits.memory"),
    # The memory-backed /dev/shm counts against the same limit.
    ("a CPU KV size below the memory limit, but not with /dev/shm",
     {"worker": {"gpusPerWorker": 0, "kvCacheMemory": "7.5GiB", "resources": {"limits": {"memory": "8Gi"}}}},
     "render", "7.5GiB + worker.shm.sizeLimit 1Gi is not below worker.resources.limits.memory"),
    ("a CPU KV size + /dev/shm exactly the memory limit",
     {"worker": {"gpusPerWorker": 0, "kvCacheMemory": "6GiB", "shm": {"sizeLimit": "2Gi"},
                 "resources": {"limits": {"memory": "8Gi"}}}},
     "render", "is not below worker.resources.limits.memory"),
    ("a host KV tier as large as the memory limit", {"worker": {"kvTiers": {"hostMemory": "16GiB"}}}, "render",
     "worker.kvTiers.hostMemory 16GiB is not below worker.resources.limits.memory 16Gi"),
    ("a CPU KV size + host KV tier over the memory limit",
     {"worker": {"gpusPerWorker": 0, "kvCacheMemory": "4GiB", "kvTiers": {"hostMemory": "4GiB"},
                 "resources": {"limits": {"memory": "8Gi"}}}},
     "render", "worker.kvTiers.hostMemory 4GiB is not below worker.resources.limits.memory"),
    ("a host KV tier in Kubernetes' units", {"worker": {"kvTiers": {"hostMemory": "16Gi"}}}, "schema",
     "hostMemory"),
    ("a CPU KV size in decimal units over a binary limit",
     {"worker": {"gpusPerWorker": 0, "kvCacheMemory": "9GB", "resources": {"limits": {"memory": "8Gi"}}}},
     "render", "is not below"),
    ("a CPU worker without a memory limit",
     {"worker": {"gpusPerWorker": 0, "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": None}}},
     "render", "limits.memory is required"),
    ("a fraction above 1", {"worker": {"kvCacheMemory": "1.5"}}, "render", "a fraction must be in (0, 1]"),
    ("nvidia.com/gpu in worker.resources", {"worker": {"resources": {"limits": {"nvidia.com/gpu": 2}}}}, "render", "leave nvidia.com/gpu out"),
    ("a PVC source without a claim", {"model": {"source": {"pvc": {"claimName": ""}}}}, "render", "claimName"),
    ("an image source without an image", {"model": {"source": {"type": "image"}}}, "render", "model.source.image"),
    ("draft speculation without a draft model", {"worker": {"speculation": "draft"}}, "render", "set model.draftFile"),
    ("heads speculation without heads", {"worker": {"speculation": "heads"}}, "render", "set model.draftHeadsDir"),
    ("a heads directory with a slash", {"model": {"draftHeadsDir": "a/b"}}, "schema", "/model/draftHeadsDir"),
    ("a heads top-k of 0", {"worker": {"specHeadsTopK": 0}}, "schema", "/worker/specHeadsTopK"),
    ("the KV transfer port on the worker's gRPC port", {"worker": {"kvTransfer": {"port": 50051}}}, "schema",
     "/worker/kvTransfer/port"),
    ("the KV transfer port on the health port", {"worker": {"kvTransfer": {"port": 8080}}}, "schema", "/worker/kvTransfer/port"),
    ("a privileged KV transfer port (the pods drop every capability)", {"worker": {"kvTransfer": {"port": 443}}}, "schema",
     "/worker/kvTransfer/port"),
    ("a KV transfer deadline of 0", {"worker": {"kvTransfer": {"deadlineSeconds": 0}}}, "schema",
     "/worker/kvTransfer/deadlineSeconds"),
    ("no KV transfer pulls at once", {"worker": {"kvTransfer": {"maxPulls": 0}}}, "schema", "/worker/kvTransfer/maxPulls"),
    ("an unknown key under worker.kvTransfer", {"worker": {"kvTransfer": {"listen": "0.0.0.0:50052"}}}, "schema", "listen"),
    ("the target as its own draft file", {"model": {"draftFile": "SmolLM2-135M-Instruct.Q4_1.gguf"}}, "render",
     "other than model.file"),
    ("a draft file with a directory", {"model": {"draftFile": "drafts/d.gguf"}}, "schema", "/model/draftFile"),
    ("a draft file in an image without its path",
     {"model": {"draftFile": "d.gguf", "source": {"type": "image", "image": {"repository": "models/m", "path": "/m.gguf"}}}},
     "render", "model.source.image.draftPath"),
    ("both a ServiceMonitor and a PodMonitor",
     {"metrics": {"serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}}}, "render", "not both"),
    ("a PDB with neither minAvailable nor maxUnavailable",
     {"router": {"podDisruptionBudget": {"minAvailable": None}}}, "render", "set minAvailable or maxUnavailable"),
    ("a GRPCRoute without a parent Gateway", {"router": {"grpcRoute": {"enabled": True}}}, "render", "parentRefs"),
    ("an empty metrics peer", {"networkPolicy": {"metricsFrom": [{}]}}, "schema", "/networkPolicy/metricsFrom/0"),
    ("an empty router client peer", {"networkPolicy": {"routerClients": [{"ipBlock": {"cidr": "10.0.0.0/8"}}, {}]}},
     "schema", "/networkPolicy/routerClients/1"),
    ("a runbook base that is not a URL", {"alerts": {"runbookBaseUrl": "docs/"}}, "schema", "/alerts/runbookBaseUrl"),
    ("a worker role the workers do not have", {"workerGroups": [{"name": "", "role": "encode"}]}, "schema",
     "/workerGroups/0/role"),
    ("a worker group without a role", {"workerGroups": [{"name": "decode"}]}, "schema", "role"),
    ("an unknown key in a worker group", {"workerGroups": [{"name": "", "role": "both", "gpusPerWorker": 2}]}, "schema",
     "gpusPerWorker"),
    ("a negative replica count in a worker group", {"workerGroups": [{"name": "", "role": "both", "replicas": -1}]}, "schema",
     "/workerGroups/0/replicas"),
    ("a KV lease of 0 s", {"worker": {"kvTransfer": {"leaseSeconds": 0}}}, "schema", "/worker/kvTransfer/leaseSeconds"),
    ("a split from 0 uncached tokens", {"router": {"split": {"minUncachedTokens": 0}}}, "schema", "/router/split/minUncachedTokens"),
    ("no worker group", {"workerGroups": []}, "render", "workerGroups is empty: list at least one worker group"),
    ("two worker groups of one name",
     {"workerGroups": [{"name": "decode", "role": "prefill"}, {"name": "decode", "role": "decode"}]}, "render",
     'workerGroups: two groups are named "decode"'),
    ("a worker group name that is not a DNS label",
     {"workerGroups": [{"name": "Prefill_1", "role": "prefill"}, {"name": "decode", "role": "decode"}]}, "render",
     'workerGroups: the group name "Prefill_1" is not a DNS label'),
    ("a worker group name starting with a digit", {"workerGroups": [{"name": "2", "role": "both"}]}, "render",
     'workerGroups: the group name "2" is not a DNS label'),
    ("an unnamed worker group next to another",
     {"workerGroups": [{"name": "", "role": "both"}, {"name": "prefill", "role": "prefill"}]}, "render",
     "workerGroups: a group with an empty name"),
    ("prefill worker groups alone, none to decode",
     {"workerGroups": [{"name": "prefill", "role": "prefill"}, {"name": "long", "role": "prefill"}]}, "render",
     "add a group of role decode (or both)"),
    ("a prefill group without the KV transfer port",
     {"workerGroups": [{"name": "prefill", "role": "prefill"}, {"name": "decode", "role": "decode"}],
      "worker": {"kvTransfer": {"enabled": False}}}, "render", "set worker.kvTransfer.enabled true"),
    ("a decode group without the KV transfer port",
     {"workerGroups": [{"name": "", "role": "decode"}], "worker": {"kvTransfer": {"enabled": False}}}, "render",
     "set worker.kvTransfer.enabled true"),
    ("a worker group name too long for its StatefulSet",
     {"fullnameOverride": "a" * 40, "workerGroups": [{"name": "prefill", "role": "prefill"}, {"name": "decode", "role": "decode"}]},
     "render", 'worker group "prefill": the StatefulSet name'),
    ("a worker group's KEDA with more min than max replicas",
     {"workerGroups": [{"name": "prefill", "role": "prefill"},
                       {"name": "decode", "role": "decode", "keda": {"enabled": True, "minReplicas": 5, "maxReplicas": 2}}]},
     "render", 'worker group "decode": worker.keda.minReplicas must not exceed worker.keda.maxReplicas'),
    ("nvidia.com/gpu in a worker group's resources",
     {"workerGroups": [{"name": "big", "role": "both", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}, "render",
     'worker group "big": worker.resources: leave nvidia.com/gpu out'),
]

ACCEPTED = [
    ("a host KV tier on a CPU worker with a KV fraction (the worker sets the tier aside first)",
     {"worker": {"gpusPerWorker": 0, "kvTiers": {"hostMemory": "1GiB"}, "resources": {"limits": {"memory": "8Gi"}}}}),
    ("a CPU KV size + /dev/shm below the memory limit",
     {"worker": {"gpusPerWorker": 0, "kvCacheMemory": "6.5GiB", "resources": {"limits": {"memory": "8Gi"}}}}),
    ("a CPU KV size below the memory limit without /dev/shm",
     {"worker": {"gpusPerWorker": 0, "kvCacheMemory": "7.5GiB", "shm": {"enabled": False},
                 "resources": {"limits": {"memory": "8Gi"}}}}),
    ("a GPU KV size over the host memory limit (it is GPU memory)",
     {"worker": {"kvCacheMemory": "40GiB", "resources": {"limits": {"memory": "16Gi"}}}}),
    ("a CPU KV size against a limit in M",
     {"worker": {"gpusPerWorker": 0, "kvCacheMemory": "512MiB", "resources": {"limits": {"memory": "4000M"}}}}),
    ("a fraction given as a YAML number", {"worker": {"kvCacheMemory": 0.85}}),
    ("a memory limit given as a byte count",
     {"worker": {"gpusPerWorker": 0, "kvCacheMemory": "1GiB", "resources": {"limits": {"memory": 4294967296}}}}),
    ("a client name that is a common name with blanks inside", {"tls": {"enabled": True, "router": {"clientName": "kvfleet router"}}}),
    ("no fsGroup while TLS is off", {"podSecurityContext": {"fsGroup": None}, "tls": {"worker": {"clientName": "w"}}}),
    ("one Secret name for both auth Secrets while auth is off",
     {"auth": {"tokensSecret": "llm-tokens", "testTokenSecret": "llm-tokens"}}),
    ("auth without the helm test (no test token needed)", {"auth": {"enabled": True}, "tests": {"enabled": False}}),
    ("a worker group scaled to 0, next to one that decodes",
     {"workerGroups": [{"name": "prefill", "role": "prefill", "replicas": 0}, {"name": "decode", "role": "decode"}]}),
    ("a named group of role both alone", {"workerGroups": [{"name": "main", "role": "both"}]}),
    ("LoRA slots alone, for adapters an admin loads at run time", {"worker": {"lora": {"maxLoras": 2}}}),
    ("a LoRA adapter name of 128 characters with ':' and '/'",
     {"worker": {"lora": {"adapters": [{"name": "org/sql:v2" + "x" * 118, "path": "/adapters/sql"}]}}}),
    ("admin tokens without tenant tokens", {"auth": {"admin": {"enabled": True}}}),
    ("a worker group name as long as a 40-character fullname allows",
     {"fullnameOverride": "a" * 40, "workerGroups": [{"name": "pref", "role": "prefill"}, {"name": "deco", "role": "decode"}]}),
]


# Value sets checked like the files in tests/deploy/helm/values/, for what those leave at
# the defaults: a router Service reachable from outside the cluster (its metrics must
# stay behind), runbook URLs, the args, env and annotations every service shares, and
# words YAML 1.1 would read as booleans (--speculation off, a prompt "off").
INLINE_VALUE_SETS = {
    # Routers that read model.* themselves (--model): they mount it and name it.
    "inline-router-reads-model": {
        "router": {"readModelFile": True, "servedModelName": "smol"},
        "model": {"source": {"type": "image", "image": {"repository": "models/smollm2", "tag": "1",
                                                        "path": "/model/SmolLM2-135M-Instruct.Q4_1.gguf"}}},
    },
    "inline-loadbalancer": {
        "router": {"service": {"type": "LoadBalancer", "annotations": {"example.com/load-balancer": "internal"}},
                   "extraArgs": ["--decision-memory", "10000", "--policy", "least_loaded"],
                   "extraEnv": [{"name": "ROUTER_EXTRA", "value": "1"}],
                   "podAnnotations": {"example.com/team": "llm"}},
        "worker": {"speculation": "off", "extraArgs": ["--block-size", "32"],
                   "extraEnv": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                   "podAnnotations": {"example.com/team": "llm"}},
        "cachemanager": {"livenessDeadlineSeconds": 5, "extraArgs": ["--log-level", "debug"],
                         "extraEnv": [{"name": "CACHEMANAGER_EXTRA", "value": "2"}]},
        "metrics": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}},
        "alerts": {"runbookBaseUrl": "https://git.example.com/kvfleet/blob/v0.1.0/"},
        "tests": {"prompt": "off"},
    },
    # TLS with every name left to the chart's defaults ("<fullname>-<component>-tls" Secrets,
    # "<fullname>-router" / "<fullname>-worker" peers), extra args still last, and the
    # default Ingress annotation turned into GRPCS.
    "inline-tls-defaults": {
        "tls": {"enabled": True},
        "router": {"extraArgs": ["--decision-memory", "10000"], "ingress": {"enabled": True}},
        "cachemanager": {"extraArgs": ["--log-level", "debug"]},
    },
    # auth without TLS, every name left to the chart's defaults ("<fullname>-auth-tokens",
    # "<fullname>-auth-test-token"), with NetworkPolicies limiting the router's clients.
    "inline-auth-defaults": {
        "auth": {"enabled": True},
        "router": {"tenantQuotas": {"requestsPerSecond": 2.5, "tokensPerSecond": 4000, "maxStreams": 8}},
        "networkPolicy": {"routerClients": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "apps"}}}]},
    },
    # KV tiers: host memory counted in the memory limit, a persistent disk volume per worker.
    # KV transfer on a port of the user's, with a fractional deadline.
    "inline-kv-tiers": {
        "worker": {"kvTiers": {"hostMemory": "16GiB", "disk": {"enabled": True, "size": "50Gi", "persistent": True,
                                                                "storageClassName": "fast-nvme"}},
                   "kvTransfer": {"port": 7000, "deadlineSeconds": 2.5, "maxPulls": 8},
                   "resources": {"limits": {"memory": "64Gi"}}},
    },
    # KV transfer off: no flag, port or policy rule, with extra worker args still last.
    "inline-kv-transfer-off": {
        "worker": {"kvTransfer": {"enabled": False}, "extraArgs": ["--block-size", "32"]},
        "metrics": {"serviceMonitor": {"enabled": True}},
    },
    # KV transfer off with TLS on: the workers keep their main port's TLS flags, and neither
    # --kv-transfer-allowed-peers nor --kv-transfer-tls-name renders.
    "inline-kv-transfer-off-tls": {
        "tls": {"enabled": True, "worker": {"clientName": "worker-client.llm.internal"}},
        "worker": {"kvTransfer": {"enabled": False}, "extraArgs": ["--block-size", "32"]},
    },
    # A draft model next to the target, copied out of a model image, as the workers' default.
    "inline-draft-model": {
        "model": {"file": "qwen2.5-coder-1.5b-instruct.Q4_K_M.gguf", "draftFile": "qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf",
                  "draftHeadsDir": "qwen-1.5b-heads",
                  "source": {"type": "image", "image": {"repository": "models/qwen-coder", "path": "/m/1.5b.gguf",
                                                        "draftPath": "/m/0.5b.gguf", "draftHeadsPath": "/m/heads"}}},
        "worker": {"speculation": "draft", "specHeadsTopK": 3},
    },
    # Worker groups with the split off (--no-split), KEDA on for every group but one that turns it
    # off for itself, a group of role both next to prefill and decode, TLS on (every group the same
    # certificate names), a PodMonitor, and extra worker args still last.
    "inline-groups-split-off-tls": {
        "workerGroups": [{"name": "prefill", "role": "prefill", "replicas": 2, "keda": {"enabled": False}},
                         {"name": "decode", "role": "decode", "keda": {"maxReplicas": 3}},
                         {"name": "chat", "role": "both", "resources": {"limits": {"cpu": "2"}}}],
        "worker": {"keda": {"enabled": True}, "extraArgs": ["--block-size", "32"],
                   "podDisruptionBudget": {"enabled": False}},
        "router": {"split": {"enabled": False}, "extraArgs": ["--decision-memory", "10000"]},
        "tls": {"enabled": True},
        "metrics": {"podMonitor": {"enabled": True}},
    },
    # LoRA adapters in worker groups of two models: the chat group takes worker.lora's adapter and
    # volume with slots and a rank of its own; the coder group, of its own model, none of worker.lora
    # (its adapters are another base's), only its own lora.
    "inline-lora-groups": {
        "worker": {"lora": {"adapters": [{"name": "sql", "path": "/adapters/sql"}],
                            "volume": {"nfs": {"server": "nfs.llm.internal", "path": "/exports/adapters", "readOnly": True}}}},
        "workerGroups": [{"name": "chat", "role": "both", "lora": {"maxLoras": 3, "maxRank": 8}},
                         {"name": "coder", "role": "both", "model": {"file": "qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf"},
                          "lora": {"maxLoras": 2, "dir": "/models/coder-adapters"}}],
    },
    # Admins by token (the Secret's default name) and by certificate over TLS, next to tenant tokens;
    # slots for adapters loaded at run time from a claim, none listed; extra args still come last.
    "inline-lora-admin-tls": {
        "tls": {"enabled": True},
        "auth": {"enabled": True, "admin": {"enabled": True, "peers": ["ops.llm.internal", "kvfleet admin"]}},
        "worker": {"lora": {"maxLoras": 8, "maxRank": 64,
                            "volume": {"persistentVolumeClaim": {"claimName": "llm-adapters", "readOnly": True}}}},
        "router": {"extraArgs": ["--decision-memory", "10000"]},
    },
    "inline-nodeport": {
        "router": {"service": {"type": "NodePort"}, "http": {"enabled": False, "requestTimeoutSeconds": 600},
                   "servedModelName": "smollm2"},
        "metrics": {"podMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}},
        "alerts": {"runbookBaseUrl": "https://docs.example.com/kvfleet"},
    },
}


def check_refusals(f: Failures, chart) -> None:
    vs = "refusals"
    for what, values, stage, text in REFUSALS:
        schema_error = None
        try:
            chart.validate_schema(values)
        except helm_python.HelmError as error:
            schema_error = str(error)
        if stage == "schema":
            f.check(schema_error is not None and text in schema_error, vs, "values.schema.json", f"refuses {what}",
                    schema_error or "accepted")
            continue
        f.check(schema_error is None, vs, "values.schema.json", f"accepts {what} (the template refuses it)", str(schema_error))
        try:
            chart.render(values, name=RELEASE, namespace=NAMESPACE)
            f.check(False, vs, "templates", f"refuses {what}", "rendered")
        except helm_python.HelmError as error:
            f.check(text in str(error), vs, "templates", f"refuses {what} with a message naming {text!r}", str(error)[-300:])
    for what, values in ACCEPTED:
        try:
            chart.render(values, name=RELEASE, namespace=NAMESPACE)
            f.check(True, vs, "templates", f"accepts {what}")
        except helm_python.HelmError as error:
            f.check(False, vs, "templates", f"accepts {what}", str(error)[-300:])


def check_schema_closed(f: Failures, chart) -> None:
    """Every object in the schema that lists properties refuses unknown keys."""
    def walk(node, path):
        if isinstance(node, dict):
            if "properties" in node:
                f.check(node.get("additionalProperties") is False, "schema", path or "/", "additionalProperties: false")
            for key, child in node.items():
                walk(child, f"{path}/{key}")
        elif isinstance(node, list):
            for index, child in enumerate(node):
                walk(child, f"{path}/{index}")
    walk(chart.schema, "")


def check_values_documented(f: Failures, chart_dir: str) -> None:
    """Every key of values.yaml has a comment right above it. A `# --` comment
    documents a parameter and its whole default value (what is nested inside,
    e.g. the requests of `resources`, is part of that value); every parameter
    has a row in README.md's values reference."""
    with open(os.path.join(chart_dir, "values.yaml")) as handle:
        lines = handle.read().splitlines()
    with open(os.path.join(chart_dir, "README.md")) as handle:
        readme = handle.read()
    stack: list[tuple[int, str, bool]] = []  # (indent, key, documented as a parameter)
    parameters = 0
    for number, line in enumerate(lines):
        match = re.match(r"^( *)([A-Za-z0-9_./-]+):", line)
        if not match:
            continue
        indent, key = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        inside_parameter = any(documented for _, _, documented in stack)
        path = ".".join([k for _, k, _ in stack] + [key])
        previous = lines[number - 1].strip() if number else ""
        # The comment right above a key may span several lines; its first line says whether it is `# --`.
        first = number - 1
        while first > 0 and lines[first - 1].strip().startswith("#") and not lines[first].strip().startswith("# --"):
            first -= 1
        is_parameter = lines[first].strip().startswith("# --") if previous.startswith("#") else False
        stack.append((indent, key, is_parameter or inside_parameter))
        if inside_parameter:
            continue
        f.check(previous.startswith("#"), "values.yaml", path, "has a comment above it")
        if is_parameter:
            parameters += 1
            f.check(f"`{path}`" in readme, "README.md", path, "is in the values reference")
    f.check(parameters > 100, "values.yaml", "parameters", "are documented with `# --`", str(parameters))


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chart", required=True, help="the chart directory (deploy/helm/kvfleet)")
    parser.add_argument("--values", default=os.path.join(here, "values"), help="directory of value sets (*.yaml)")
    args = parser.parse_args()
    chart_dir = os.path.abspath(args.chart)
    value_files = sorted(n for n in os.listdir(args.values) if n.endswith(".yaml"))
    if len(value_files) < 5:
        print(f"chart_test: FAIL: expected at least five value sets in {args.values}, found {value_files}", file=sys.stderr)
        return 1

    # Helm logs every template `fail` at INFO; only its warnings are worth showing.
    helm_python.enable_logging(logging.WARNING, logging.getLogger("chart_test.helm"))
    f = Failures()
    chart = helm_python.Chart.load(chart_dir)
    check_schema_closed(f, chart)
    check_values_documented(f, chart_dir)
    total_objects = 0
    value_sets = []
    for value_file in value_files:
        with open(os.path.join(args.values, value_file)) as handle:
            value_sets.append((value_file[: -len(".yaml")], yaml.safe_load(handle) or {}))
    value_sets += [(name, copy.deepcopy(v)) for name, v in INLINE_VALUE_SETS.items()]
    for vs, user_values in value_sets:
        before = len(f.items)
        try:
            chart.validate_schema(user_values)
            objects = render(chart, user_values)
        except helm_python.HelmError as error:
            f.check(False, vs, "chart", "renders", str(error))
            print(f"[{vs}] does not render")
            continue
        values = chart.merge_values(user_values)
        check_lint(f, vs, chart_dir, user_values)
        check_kubernetes_schemas(f, vs, objects)
        check_custom_resources(f, vs, objects)
        check_names_and_labels(f, vs, objects, values)
        check_gpu(f, vs, objects, values)
        check_shm(f, vs, objects, values)
        check_probes(f, vs, objects, values)
        check_grace(f, vs, objects, values)
        check_rollout(f, vs, objects, values)
        check_selectors(f, vs, objects, values)
        check_metrics_exposure(f, vs, objects, values)
        check_common_args(f, vs, objects, values)
        check_references(f, vs, objects, values)
        check_tls(f, vs, objects, values, chart, user_values)
        check_auth(f, vs, objects, values, chart, user_values)
        check_worker_identity(f, vs, objects)
        check_reflection(f, vs, objects, values)
        check_quotas(f, vs, objects, values)
        check_http(f, vs, objects, values)
        check_kv_transfer(f, vs, objects, values)
        check_lora(f, vs, objects, values)
        check_worker_groups(f, vs, objects, values)
        check_security_and_model(f, vs, objects, values)
        check_worker_sizing(f, vs, objects, values)
        check_images(f, vs, objects, values)
        check_hook(f, vs, objects, values)
        check_optional_objects(f, vs, objects, values, chart_dir)
        total_objects += len(objects)
        kinds = collections.Counter(o["kind"] for o in objects)
        status = "ok" if len(f.items) == before else f"{len(f.items) - before} FAILED"
        print(f"[{vs}] {len(objects)} objects: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + f" -- {status}")
        for obj in objects:
            print(f"    {obj['kind']}/{obj['metadata']['name']}")
    before = len(f.items)
    check_group_fallback(f, chart)
    print("[worker groups] a group's fields fall back to worker.* -- " + ("ok" if len(f.items) == before else "FAILED"))
    before = len(f.items)
    check_refusals(f, chart)
    print(f"[refusals] {len(REFUSALS)} bad value sets refused, {len(ACCEPTED)} edge cases accepted -- "
          + ("ok" if len(f.items) == before else f"{len(f.items) - before} FAILED"))

    if f.items:
        for item in f.items:
            print(f"FAIL {item}", file=sys.stderr)
        print(f"chart_test: FAILED: {len(f.items)} of {f.checks} checks failed over {len(value_sets)} value sets", file=sys.stderr)
        return 1
    print(f"chart_test: PASS: {f.checks} checks over {len(value_sets)} value sets ({total_objects} objects, "
          f"Kubernetes {' and '.join(KUBE_VERSIONS)}) and {len(REFUSALS)} refusals")
    return 0


if __name__ == "__main__":
    sys.exit(main())
