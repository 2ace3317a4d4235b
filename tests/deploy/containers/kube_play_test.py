"""The chart's own manifests run by `podman kube play`: the cachemanager and
router Deployments and the workers' StatefulSet pod template, as the chart
renders them (tests/deploy/containers/values.yaml: TLS on every hop), on a
podman network; then the cluster serves through them (the router lists the
model, and the official `openai` client gets a streamed answer that equals
the whole one).

podman 4.3 (Debian 12) plays Pods and Deployments but not everything a
cluster does; each manifest is converted only as far as that requires,
and every conversion is listed in `convert` below.

  kube_play_test.py --chart deploy/helm/kvfleet --model models/SmolLM2-135M-Instruct.Q4_1.gguf

Exit 0: passed; 1: failed; 77: skipped (podman cannot run containers here,
the image kvfleet:cpu is missing, or the model is not fetched).
"""
from __future__ import annotations

import copy
import os
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_common import (MESSAGES, NAMESPACE, RELEASE, Failure, chart_secrets, check, find, logs,  # noqa: E402
                            model_directory, openai_client, render, service_aliases, stream_text, test_main,
                            wait_ready, wait_routable)
from pod_runner import create_network, expand, podman, project_secret, resolve_env  # noqa: E402

SUBNET_PREFIX = "10.89.219"


def convert(workload: dict, pod_name: str, ip: str, secret_dirs: dict[str, str], model_dir: str,
            host_model_dir: str, scratch: str) -> dict:
    """The manifest podman 4.3 can play, changed only where it must be:
    - a StatefulSet becomes the Pod its controller would create (named
      <name>-<ordinal>): kube play has no StatefulSet;
    - a Secret volume becomes a hostPath of the Secret's items projected as
      the kubelet would (keys, mode, fsGroup): podman 4.3.1 panics on Secret
      volumes with items (a nil pointer in VolumeFromSecret);
    - env from the downward API becomes its value (the pod's name as kube
      play names it, the namespace, the address given with --ip): podman 4.3
      supports neither metadata.namespace nor status.podIP;
    - $(VAR) references in command and args are expanded from that env:
      podman 4.3 passes them through unexpanded (both workers then
      registered as "$(POD_NAME)" at "$(POD_IP):50051");
    - containers declare no ports: podman 4.3 publishes every containerPort
      on the host's own port of that number (Kubernetes publishes none
      without a hostPort), so the second pod with health port 8080 fails;
    - the model's hostPath points at this machine's models folder.
    """
    obj = copy.deepcopy(workload)
    if obj["kind"] == "StatefulSet":
        template = obj["spec"]["template"]
        obj = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": pod_name, "namespace": NAMESPACE, "labels": template["metadata"]["labels"]},
               "spec": template["spec"]}
        spec = obj["spec"]
        spec.setdefault("hostname", pod_name)
    else:
        spec = obj["spec"]["template"]["spec"]
    fs_group = (spec.get("securityContext") or {}).get("fsGroup")
    for volume in spec.get("volumes") or []:
        if "secret" in volume:
            target = os.path.join(scratch, "secrets", pod_name, volume["name"])
            project_secret(volume["secret"], secret_dirs[volume["secret"]["secretName"]], target, fs_group)
            volume.pop("secret")
            volume["hostPath"] = {"path": target, "type": "Directory"}
        elif "hostPath" in volume and volume["hostPath"]["path"] == model_dir:
            volume["hostPath"]["path"] = host_model_dir
    # kube play names a Deployment's pod <name>-pod-0.
    played_name = pod_name if obj["kind"] == "Pod" else f"{obj['metadata']['name']}-pod-0"
    fields = {"metadata.name": played_name, "metadata.namespace": NAMESPACE, "status.podIP": ip}
    for container in (spec.get("initContainers") or []) + spec["containers"]:
        container.pop("ports", None)
        values = resolve_env(container, fields)
        container["env"] = [{"name": name, "value": value} for name, value in values.items()]
        for key in ("command", "args"):
            if key in container:
                container[key] = [expand(a, values) for a in container[key]]
    return obj


def run(args, scratch: str) -> None:
    objects = render(args.chart, args.values)
    values = yaml.safe_load(open(args.values))
    prefix = f"{RELEASE}-kvfleet"
    workers = find(objects, "StatefulSet", f"{prefix}-worker")
    secret_dirs = chart_secrets(os.path.join(scratch, "tls"), workers["spec"]["replicas"])
    host_models = model_directory(args.model, values)
    model_dir = values["model"]["source"]["hostPath"]["path"]

    network = create_network("kvfleet-kube-", SUBNET_PREFIX)
    played = []
    try:
        plays = [(find(objects, "Deployment", f"{prefix}-cachemanager"), f"{prefix}-cachemanager", 10,
                  service_aliases(f"{prefix}-cachemanager"))]
        plays += [(workers, f"{prefix}-worker-{i}", 20 + i, []) for i in range(workers["spec"]["replicas"])]
        plays.append((find(objects, "Deployment", f"{prefix}-router"), f"{prefix}-router", 30,
                      service_aliases(f"{prefix}-router")))
        # Holding the subnet means no other run of this test is live, so a
        # pod that already has one of these names was left by an interrupted
        # run; one killed inside `kube play` joined no network, so
        # create_network's sweep cannot see it.
        existing = set(podman("pod", "ps", "--format", "{{.Name}}").stdout.split())
        for _, pod, _, _ in plays:
            if pod in existing:
                podman("pod", "rm", "--force", pod, check=False)
                print(f"removed the pod {pod}, left behind by an interrupted run")
        ready = []
        for workload, pod, host, aliases in plays:
            ip = f"{SUBNET_PREFIX}.{host}"
            manifest = os.path.join(scratch, f"{pod}.yaml")
            with open(manifest, "w") as f:
                yaml.safe_dump(convert(workload, pod, ip, secret_dirs, model_dir, host_models, scratch), f)
            network_arg = network + (":" + ",".join(f"alias={a}" for a in aliases) if aliases else "")
            podman("kube", "play", "--network", network_arg, "--ip", ip, manifest, timeout=180)
            played.append(manifest)
            (container,) = workload["spec"]["template"]["spec"]["containers"]
            ready.append((pod, ip, container))
            print(f"played {workload['kind']}/{workload['metadata']['name']} as {pod} at {ip}")
        for pod, ip, container in ready:
            wait_ready(ip, container, pod)
        _, router_ip, router_container = ready[-1]
        client = openai_client(router_ip, router_container, os.path.join(secret_dirs[f"{prefix}-router-tls"], "ca.crt"))
        wait_routable(router_ip, router_container, workers["spec"]["replicas"])
        model = client.models.list().data[0].id
        whole = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=24, temperature=0)
        streamed = stream_text(client, model, max_tokens=24)
        print(f"through the played manifests: {model} answered {streamed!r}")
        check(streamed and streamed == whole.choices[0].message.content,
              f"streamed {streamed!r} differs from whole {whole.choices[0].message.content!r}")
    except Failure:
        # Each played container's last log lines, to say why.
        for name in podman("ps", "-a", "--format", "{{.Names}}").stdout.split():
            if name.startswith(prefix) and not name.endswith("-infra"):
                print(f"--- {name}\n{logs(name)[-1500:]}")
        raise
    finally:
        for manifest in reversed(played):
            podman("kube", "down", manifest, check=False)
        podman("network", "rm", "--force", network, check=False)


def main() -> int:
    return test_main("kube_play_test", __doc__, run)


if __name__ == "__main__":
    sys.exit(main())
