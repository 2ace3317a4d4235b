"""What the container tests share: the chart rendered by Helm's own
renderer, the TLS Secrets it mounts (one CA; each certificate naming the
DNS names its peers check), the probes it declares run as the kubelet
would, metrics, and the official `openai` client reaching the router by
its Service name.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import grpc
import helm_python
import httpx2 as httpx  # the HTTP library the openai package is built on
import openai
import yaml

from pod_runner import REPO, PodmanError, podman

RELEASE, NAMESPACE = "kvf", "llm"
MESSAGES = [{"role": "user", "content": "Write a short poem about the sea."}]


class Failure(Exception):
    pass


def check(condition, message: str) -> None:
    if not condition:
        raise Failure(message)


def skip(reason: str) -> None:
    print(f"cluster_test: SKIP: {reason}")
    sys.exit(77)


def render(chart_dir: str, values_file: str) -> list[dict]:
    with open(values_file) as f:
        values = yaml.safe_load(f)
    chart = helm_python.Chart.load(chart_dir)
    objects = []
    for template, text in sorted(chart.render(values, name=RELEASE, namespace=NAMESPACE).items()):
        if template.endswith("NOTES.txt"):
            continue
        objects += [d for d in yaml.safe_load_all(text) if d]
    return objects


def find(objects: list[dict], kind: str, name: str) -> dict:
    for o in objects:
        if o["kind"] == kind and o["metadata"]["name"] == name:
            return o
    raise Failure(f"the chart rendered no {kind}/{name}")


def service_aliases(service: str) -> list[str]:
    """The names a Service answers to inside the cluster."""
    return [service, f"{service}.{NAMESPACE}", f"{service}.{NAMESPACE}.svc", f"{service}.{NAMESPACE}.svc.cluster.local"]


# --- certificates ----------------------------------------------------------------------------

def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_secrets(directory: str, secrets: dict[str, list[str]]) -> dict[str, str]:
    """One CA and, per Secret, a key and certificate (server and client use)
    naming the given DNS names: the layout of a kubernetes.io/tls Secret."""
    os.makedirs(directory)
    ca_key, ca_crt = os.path.join(directory, "ca.key"), os.path.join(directory, "ca.crt")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", "/CN=kvfleet test CA", "-keyout", ca_key, "-out", ca_crt)
    dirs = {}
    for secret, names in secrets.items():
        d = os.path.join(directory, secret)
        os.makedirs(d)
        ext = os.path.join(d, "ext.cnf")
        with open(ext, "w") as f:
            f.write("subjectAltName=" + ",".join(f"DNS:{n}" for n in names) + "\n"
                    "extendedKeyUsage=serverAuth,clientAuth\n")
        openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-subj", f"/CN={names[0]}", "-keyout", os.path.join(d, "tls.key"), "-out", os.path.join(d, "csr"))
        openssl("x509", "-req", "-in", os.path.join(d, "csr"), "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial",
                "-days", "2", "-extfile", ext, "-out", os.path.join(d, "tls.crt"))
        shutil.copyfile(ca_crt, os.path.join(d, "ca.crt"))
        dirs[secret] = d
    return dirs


def chart_secrets(directory: str, worker_replicas: int) -> dict[str, str]:
    """The three TLS Secrets the chart mounts (tls.enabled, default names),
    with the names their peers check: the Services' DNS names, the workers'
    server name (--worker-tls-name) and the client names the allowed-peer
    lists hold."""
    prefix = f"{RELEASE}-kvfleet"
    return make_secrets(directory, {
        f"{prefix}-router-tls": service_aliases(f"{prefix}-router"),
        f"{prefix}-worker-tls": [f"{prefix}-worker"] + [f"{prefix}-worker-{i}" for i in range(worker_replicas)],
        f"{prefix}-cachemanager-tls": service_aliases(f"{prefix}-cachemanager"),
    })


# --- probes and metrics ----------------------------------------------------------------------

def grpc_health(address: str, service: str) -> bool:
    """grpc.health.v1.Health/Check, the protobuf written by hand: request
    field 1 (service), response field 1 (status; 1 = SERVING)."""
    encoded = service.encode()
    request = (b"\x0a" + bytes([len(encoded)]) + encoded) if encoded else b""
    with grpc.insecure_channel(address) as channel:
        check_call = channel.unary_unary("/grpc.health.v1.Health/Check",
                                         request_serializer=lambda b: b, response_deserializer=lambda b: b)
        try:
            return check_call(request, timeout=2) == b"\x08\x01"
        except grpc.RpcError:
            return False


def probe_ok(ip: str, probe: dict) -> bool:
    check("grpc" in probe, f"a probe this test does not run: {probe}")
    return grpc_health(f"{ip}:{probe['grpc']['port']}", probe["grpc"].get("service", ""))


def wait_ready(ip: str, container: dict, what: str, timeout: float = 180) -> None:
    """The startup probe, then readiness and liveness, as the kubelet would ask."""
    deadline = time.time() + timeout
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = container.get(kind)
        if not probe:
            continue
        while not probe_ok(ip, probe):
            check(time.time() < deadline, f"{what}: {kind} {probe} still failing after {timeout:.0f} s")
            time.sleep(0.5)
    print(f"  {what} ({ip}): startup, readiness and liveness probes pass")


def metric(url: str, name: str, label: str = "") -> float:
    """The sum of the series `name` (those with `label`, as 'state="routable"', if given)."""
    total = 0.0
    with urllib.request.urlopen(url, timeout=5) as r:
        for line in r.read().decode().splitlines():
            if (line.startswith(name + " ") or line.startswith(name + "{")) and label in line:
                total += float(line.split()[-1])
    return total


def wait_routable(router_ip: str, router_container: dict, workers: int, timeout: float = 60) -> None:
    """Until the router counts this many routable workers (it learns them
    from the cachemanager and dials each over mutual TLS)."""
    url = f"http://{router_ip}:{port_of(router_container, 'metrics')}/metrics"
    deadline = time.time() + timeout
    while (count := metric(url, "kvfleet_router_workers", 'state="routable"')) < workers:
        check(time.time() < deadline, f"the router counts {count:.0f} routable workers of {workers} after {timeout:.0f} s")
        time.sleep(0.5)


def port_of(container: dict, name: str) -> int:
    for p in container.get("ports") or []:
        if p["name"] == name:
            return p["containerPort"]
    raise Failure(f"container {container['name']} declares no port {name}")


def logs(container: str) -> str:
    return podman("logs", container, check=False).stderr[-3000:]


class ResolvingTransport(httpx.HTTPTransport):
    """Sends requests for a Service name to its container's address, keeping
    the name for TLS (SNI and the certificate check), as cluster DNS would."""

    def __init__(self, hosts: dict[str, str], **kwargs):
        super().__init__(**kwargs)
        self.hosts = hosts

    def handle_request(self, request):
        host = request.url.host
        if host in self.hosts:
            request.extensions = dict(request.extensions, sni_hostname=host)
            request.url = request.url.copy_with(host=self.hosts[host])
        return super().handle_request(request)


def stream_text(client, model: str, on_chunk=None, max_tokens: int = 48) -> str:
    """A greedy streamed chat answer; on_chunk(i) is called after chunk i."""
    parts = []
    stream = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=max_tokens, temperature=0,
                                            stream=True)
    for i, chunk in enumerate(stream):
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
        if on_chunk:
            on_chunk(i)
    return "".join(parts)


def router_grpc_stub(router_ip: str, router_container: dict, ca: str, stubs_dir: str):
    """(inference_pb2, InferenceStub) on the router's gRPC port over TLS,
    checking the certificate against the router Service's name."""
    sys.path.insert(0, os.path.join(REPO, "tests", "integration", "clients"))
    from kvfleet_up import generate_stubs  # the one way the tests make Python stubs
    pb, _, pb_grpc = generate_stubs(os.path.join(REPO, "proto"), stubs_dir)
    with open(ca, "rb") as f:
        credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
    channel = grpc.secure_channel(f"{router_ip}:{port_of(router_container, 'grpc')}", credentials,
                                  options=[("grpc.ssl_target_name_override", f"{RELEASE}-kvfleet-router")])
    return pb, pb_grpc.InferenceStub(channel)


def grpc_stream_ids(pb, stub, on_chunk=None, max_tokens: int = 48) -> list[int]:
    """The token ids of a greedy streamed chat answer through the router's
    gRPC API; on_chunk(i) is called after message i."""
    request = pb.ChatRequest(messages=[pb.ChatMessage(role=m["role"], content=m["content"]) for m in MESSAGES],
                             options=pb.GenerationOptions(stopping={"max_tokens": max_tokens}))
    ids = []
    for i, message in enumerate(stub.Chat(request, timeout=120)):
        ids += list(message.token_ids)
        if on_chunk:
            on_chunk(i)
    return ids


def openai_client(router_ip: str, router_container: dict, ca: str) -> openai.OpenAI:
    """The official client on the router's HTTPS port, by the router Service's name."""
    host = f"{RELEASE}-kvfleet-router"
    http_client = httpx.Client(transport=ResolvingTransport({host: router_ip}, verify=ca), timeout=120)
    return openai.OpenAI(base_url=f"https://{host}:{port_of(router_container, 'http')}/v1", api_key="none",
                         max_retries=0, http_client=http_client)


def skip_unless_runnable(image: str, model: str) -> None:
    """Exits 77 with the reason where the containers cannot run here."""
    if shutil.which("podman") is None:
        skip("no podman (scripts/setup.sh installs it)")
    if not os.path.exists(model):
        skip(f"no model at {model} (scripts/fetch_model.sh)")
    if podman("image", "exists", image, check=False).returncode != 0:
        skip(f"no image {image}: deploy/docker/images.sh builds it (ctest's deploy.container_images)")
    probe = podman("run", "--rm", image, "true", check=False)
    if probe.returncode != 0:
        skip(f"podman cannot run a container here: {probe.stderr.strip()[-500:]}")


def model_directory(model: str, values: dict) -> str:
    """The directory to mount as the model volume; the model's real file,
    since a link would dangle inside a container."""
    model_file = os.path.realpath(model)
    check(os.path.basename(model_file) == values["model"]["file"],
          f"{model} is not the values' model.file {values['model']['file']}")
    return os.path.dirname(model_file)


def test_main(name: str, doc: str, run, extra=None) -> int:
    """A container test's command line (--chart, --model, --values and what
    `extra` adds), its skip conditions, a scratch folder, and run(args,
    scratch) with its failures reported as FAIL."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chart", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--values", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "values.yaml"))
    if extra:
        extra(parser)
    args = parser.parse_args()
    skip_unless_runnable(getattr(args, "image", "") or "kvfleet:cpu", args.model)
    with tempfile.TemporaryDirectory(prefix=f"kvfleet-{name}-") as scratch:
        os.chmod(scratch, 0o755)
        try:
            run(args, scratch)
        except (Failure, PodmanError) as e:
            print(f"{name}: FAIL: {e}")
            return 1
    print(f"{name}: all checks passed")
    return 0
