"""The cluster from its own images: the cachemanager, two workers and the
router as containers of kvfleet:cpu on a podman network, each run from the
pod template the Helm chart renders (tests/deploy/containers/values.yaml:
TLS on every hop), with its security context (uid 10001, read-only root,
no capabilities), its volumes (the model read-only, a memory-backed
/dev/shm, the TLS Secrets) and mutual TLS whose certificates name the
containers' DNS names (the Services' names, as network aliases).

It checks:
- the probes the chart declares (gRPC health, readiness and liveness on the
  plaintext health ports) pass on every container;
- the chart's `helm test` Job (kvfleet models, then kvfleet chat) exits 0;
- the official `openai` client through the router's HTTPS port, resolving
  the router's Service name to its container;
- a worker container killed mid-stream: the stream finishes with the same
  tokens as an undisturbed run; restarted, the worker rejoins and serves;
- no container wrote outside its volumes (`podman diff` is empty).

  cluster_test.py --chart deploy/helm/kvfleet --model models/SmolLM2-135M-Instruct.Q4_1.gguf

Exit 0: passed; 1: failed; 77: skipped (podman cannot run containers here,
the image kvfleet:cpu is missing, or the model is not fetched).
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
import uuid

import grpc
import helm_python
import httpx2 as httpx  # the HTTP library the openai package is built on
import openai
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pod_runner import PodmanError, PodRunner, podman  # noqa: E402

RELEASE, NAMESPACE = "kvf", "llm"
SUBNET_PREFIX = "10.89.217"
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


def metric(url: str, name: str) -> float:
    total = 0.0
    with urllib.request.urlopen(url, timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.split()[-1])
    return total


def port_of(container: dict, name: str) -> int:
    for p in container.get("ports") or []:
        if p["name"] == name:
            return p["containerPort"]
    raise Failure(f"container {container['name']} declares no port {name}")


def logs(container: str) -> str:
    return podman("logs", container, check=False).stderr[-3000:]


# --- the test --------------------------------------------------------------------------------

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


def stream_text(client, model: str, on_chunk=None) -> str:
    parts = []
    stream = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=48, temperature=0,
                                            stream=True)
    for i, chunk in enumerate(stream):
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
        if on_chunk:
            on_chunk(i)
    return "".join(parts)


def run(args, scratch: str) -> None:
    objects = render(args.chart, args.values)
    prefix = f"{RELEASE}-kvfleet"
    cachemanager = find(objects, "Deployment", f"{prefix}-cachemanager")
    router = find(objects, "Deployment", f"{prefix}-router")
    workers = find(objects, "StatefulSet", f"{prefix}-worker")
    test_job = next(o for o in objects if o["kind"] == "Job")
    values = yaml.safe_load(open(args.values))
    model_dir = values["model"]["source"]["hostPath"]["path"]

    # The Secrets the chart mounts, with the names its peers check.
    tls_secrets = make_secrets(os.path.join(scratch, "tls"), {
        f"{prefix}-router-tls": service_aliases(f"{prefix}-router"),
        f"{prefix}-worker-tls": [f"{prefix}-worker"] + [f"{prefix}-worker-{i}" for i in range(workers["spec"]["replicas"])],
        f"{prefix}-cachemanager-tls": service_aliases(f"{prefix}-cachemanager"),
    })
    run_id = uuid.uuid4().hex[:6]
    network = f"kvfleet-test-{run_id}"
    podman("network", "create", "--subnet", f"{SUBNET_PREFIX}.0/24", network)
    model_file = os.path.realpath(args.model)  # a link would dangle inside the container
    check(os.path.basename(model_file) == values["model"]["file"],
          f"{args.model} is not the values' model.file {values['model']['file']}")
    models = os.path.dirname(model_file)
    runner = PodRunner(network, NAMESPACE, {model_dir: models}, tls_secrets, scratch, run_id)
    try:
        pods = {}  # pod name -> (container name, ip, container spec)

        def start(pod: str, workload: dict, ip: str, aliases: list[str]) -> None:
            spec = workload["spec"]["template"]["spec"]
            (container,) = spec["containers"]
            image = args.image or container["image"]
            pods[pod] = (runner.start(pod, spec, image, ip, aliases), ip, container)
            print(f"started {pod}: {' '.join(runner.command_of(pod, ip, container))}")

        start(f"{prefix}-cachemanager-0", cachemanager, f"{SUBNET_PREFIX}.10", service_aliases(f"{prefix}-cachemanager"))
        for i in range(workers["spec"]["replicas"]):
            start(f"{prefix}-worker-{i}", workers, f"{SUBNET_PREFIX}.{20 + i}", [])
        start(f"{prefix}-router-0", router, f"{SUBNET_PREFIX}.30", service_aliases(f"{prefix}-router"))
        for pod, (name, ip, container) in pods.items():
            try:
                wait_ready(ip, container, pod)
            except Failure:
                print(logs(name))
                raise

        # `helm test`: the chart's own Job, in the cluster's network.
        job_spec = test_job["spec"]["template"]["spec"]
        results = runner.run_to_completion(f"{prefix}-test", job_spec, args.image or job_spec["containers"][0]["image"])
        for name, code, output in results:
            print(f"helm test step {name}: exit {code}\n    " + output.replace("\n", "\n    ")[-1500:])
            check(code == 0, f"the helm test step {name} failed (exit {code})")

        # The official client through the router's HTTPS port, by its Service name.
        router_name, router_ip, router_container = pods[f"{prefix}-router-0"]
        host = f"{prefix}-router"
        ca = os.path.join(tls_secrets[f"{prefix}-router-tls"], "ca.crt")
        http_client = httpx.Client(transport=ResolvingTransport({host: router_ip}, verify=ca), timeout=120)
        client = openai.OpenAI(base_url=f"https://{host}:{port_of(router_container, 'http')}/v1", api_key="none",
                               max_retries=0, http_client=http_client)
        model = client.models.list().data[0].id
        print(f"openai client: /v1/models lists {model}")
        reference = stream_text(client, model)
        print(f"openai client: streamed {reference!r}")
        check(len(reference) > 20, "the reference answer is too short to be cut mid-stream")

        # A worker killed mid-stream: the one whose running-requests gauge says it serves.
        killed = []

        def kill_serving_worker(chunk: int) -> None:
            if killed or chunk != 4:
                return
            for pod, (name, ip, container) in pods.items():
                if "-worker-" in pod:
                    url = f"http://{ip}:{port_of(container, 'metrics')}/metrics"
                    if metric(url, "kvfleet_worker_requests_running") > 0:
                        podman("kill", "--signal", "KILL", name)
                        killed.append(pod)
                        print(f"  killed {pod} after {chunk + 1} chunks")
                        return
            raise Failure("no worker reported the stream as running")

        cut = stream_text(client, model, kill_serving_worker)
        check(killed, "no worker was killed")
        check(cut == reference, f"the stream after the kill differs:\n  {cut!r}\nvs\n  {reference!r}")
        print("worker killed mid-stream: the stream finished token-identical")

        # Restarted: it rejoins (probes, the cachemanager's live workers) and serves.
        name, ip, container = pods[killed[0]]
        podman("start", name)
        wait_ready(ip, container, killed[0])
        cm_name, cm_ip, cm_container = pods[f"{prefix}-cachemanager-0"]
        cm_metrics = f"http://{cm_ip}:{port_of(cm_container, 'metrics')}/metrics"
        deadline = time.time() + 60
        while metric(cm_metrics, "kvfleet_cachemanager_live_workers") < workers["spec"]["replicas"]:
            check(time.time() < deadline, "the restarted worker did not rejoin the cachemanager")
            time.sleep(0.5)
        worker_metrics = f"http://{ip}:{port_of(container, 'metrics')}/metrics"
        before = metric(worker_metrics, "kvfleet_worker_requests_total")
        for i in range(12):
            client.chat.completions.create(model=model, max_tokens=4, temperature=0,
                                           messages=[{"role": "user", "content": f"Count to {i + 3}, please."}])
            if metric(worker_metrics, "kvfleet_worker_requests_total") > before:
                break
        check(metric(worker_metrics, "kvfleet_worker_requests_total") > before,
              f"the restarted {killed[0]} served none of 12 requests")
        print(f"{killed[0]} restarted: it rejoined and serves")

        # Nothing written outside the volumes. The runtime itself makes each
        # mount point (and its missing parents) in the container's layer: those
        # are not the process's writes.
        for pod, (name, _, container) in pods.items():
            mounts = [m["mountPath"] for m in container.get("volumeMounts") or []]
            changes = [line for line in podman("diff", name).stdout.splitlines()
                       if not any(m == line[2:] or m.startswith(line[2:].rstrip("/") + "/") for m in mounts)]
            check(not changes, f"{pod} wrote to its root file system:\n" + "\n".join(changes))
        print("podman diff: no container wrote outside its volumes")
    finally:
        runner.remove_all()
        podman("network", "rm", "--force", network, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chart", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--values", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "values.yaml"))
    parser.add_argument("--image", default="", help="run this image instead of the one the chart names")
    args = parser.parse_args()
    if shutil.which("podman") is None:
        skip("no podman (scripts/setup.sh installs it)")
    if not os.path.exists(args.model):
        skip(f"no model at {args.model} (scripts/fetch_model.sh)")
    image = args.image or "kvfleet:cpu"
    if podman("image", "exists", image, check=False).returncode != 0:
        skip(f"no image {image}: deploy/docker/images.sh builds it (ctest's deploy.container_images)")
    probe = podman("run", "--rm", image, "true", check=False)
    if probe.returncode != 0:
        skip(f"podman cannot run a container here: {probe.stderr.strip()[-500:]}")
    with tempfile.TemporaryDirectory(prefix="kvfleet-containers-") as scratch:
        os.chmod(scratch, 0o755)
        try:
            run(args, scratch)
        except (Failure, PodmanError) as e:
            print(f"cluster_test: FAIL: {e}")
            return 1
    print("cluster_test: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
