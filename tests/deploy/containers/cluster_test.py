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
- a worker container killed mid-stream (a streamed chat through the
  router's gRPC API over TLS): the stream finishes with the same token ids
  as an undisturbed run; restarted, the worker rejoins and serves;
- no container wrote outside its volumes (`podman diff` is empty).

  cluster_test.py --chart deploy/helm/kvfleet --model models/SmolLM2-135M-Instruct.Q4_1.gguf

Exit 0: passed; 1: failed; 77: skipped (podman cannot run containers here,
the image kvfleet:cpu is missing, or the model is not fetched).
"""
from __future__ import annotations

import os
import sys
import time
import uuid

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_common import (NAMESPACE, RELEASE, Failure, chart_secrets, check, find, grpc_stream_ids,  # noqa: E402
                            logs, metric, model_directory, openai_client, port_of, render, router_grpc_stub,
                            service_aliases, stream_text, test_main, wait_ready, wait_routable)
from pod_runner import PodRunner, create_network, podman  # noqa: E402

SUBNET_PREFIX = "10.89.217"


def run(args, scratch: str) -> None:
    objects = render(args.chart, args.values)
    prefix = f"{RELEASE}-kvfleet"
    cachemanager = find(objects, "Deployment", f"{prefix}-cachemanager")
    router = find(objects, "Deployment", f"{prefix}-router")
    workers = find(objects, "StatefulSet", f"{prefix}-worker")
    test_job = next(o for o in objects if o["kind"] == "Job")
    values = yaml.safe_load(open(args.values))
    model_dir = values["model"]["source"]["hostPath"]["path"]

    tls_secrets = chart_secrets(os.path.join(scratch, "tls"), workers["spec"]["replicas"])
    run_id = uuid.uuid4().hex[:6]
    network = create_network("kvfleet-test-", SUBNET_PREFIX)
    models = model_directory(args.model, values)
    runner = PodRunner(network, NAMESPACE, {model_dir: models}, tls_secrets, scratch, run_id)
    pods = {}  # pod name -> (container name, ip, container spec)
    try:

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

        _, router_ip, router_container = pods[f"{prefix}-router-0"]
        wait_routable(router_ip, router_container, workers["spec"]["replicas"])

        # `helm test`: the chart's own Job, in the cluster's network.
        job_spec = test_job["spec"]["template"]["spec"]
        results = runner.run_to_completion(f"{prefix}-test", job_spec, args.image or job_spec["containers"][0]["image"])
        for name, code, output in results:
            print(f"helm test step {name}: exit {code}\n    " + output.replace("\n", "\n    ")[-1500:])
            check(code == 0, f"the helm test step {name} failed (exit {code})")

        # The official client through the router's HTTPS port, by its Service name.
        ca = os.path.join(tls_secrets[f"{prefix}-router-tls"], "ca.crt")
        client = openai_client(router_ip, router_container, ca)
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

        pb, stub = router_grpc_stub(router_ip, router_container, ca, os.path.join(scratch, "stubs"))
        reference_ids = grpc_stream_ids(pb, stub)
        cut_ids = grpc_stream_ids(pb, stub, kill_serving_worker)
        check(killed, "no worker was killed")
        check(cut_ids == reference_ids, f"the stream after the kill differs:\n  {cut_ids}\nvs\n  {reference_ids}")
        print(f"worker killed mid-stream: the stream finished token-identical ({len(cut_ids)} tokens)")

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
        wait_routable(router_ip, router_container, workers["spec"]["replicas"])
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
    except Exception:
        # Each container's last log lines, to say why.
        for pod, (name, _, _) in pods.items():
            print(f"--- {pod}\n{logs(name)[-2500:]}")
        raise
    finally:
        runner.remove_all()
        podman("network", "rm", "--force", network, check=False)


def main() -> int:
    return test_main("cluster_test", __doc__, run,
                     extra=lambda p: p.add_argument("--image", default="",
                                                    help="run this image instead of the one the chart names"))


if __name__ == "__main__":
    sys.exit(main())
