"""Runs the pod templates the Helm chart renders as podman containers, as a
kubelet would run them: the image, command and arguments (with Kubernetes'
$(VAR) expansion from the container's env and downward API), the pod's and
the container's security context, and its volumes (hostPath, emptyDir,
memory-backed /dev/shm, Secrets with their items and mode), on one podman
network where Services are network aliases.

Nothing here knows kvfleet's flags: what runs is what the chart rendered.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# The project's podman configuration (runc, cgroupfs, no ulimits asked for).
PODMAN_ENV = dict(os.environ, CONTAINERS_CONF=os.path.join(REPO, "deploy", "docker", "containers.conf"))


class PodmanError(RuntimeError):
    pass


def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    result = subprocess.run(["podman", *args], env=PODMAN_ENV, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise PodmanError(f"podman {' '.join(args)}: exit {result.returncode}: {result.stderr.strip()[-2000:]}")
    return result


OWNER_LABEL = "kvfleet.test-owner-pid"


def _owner_alive(network: str) -> bool:
    """Whether the process that made `network` (its owner label) still runs here."""
    pid = podman("network", "inspect", "--format", f'{{{{index .Labels "{OWNER_LABEL}"}}}}', network,
                 check=False).stdout.strip()
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def create_network(name_prefix: str, subnet_prefix: str) -> str:
    """A new network named `name_prefix` and a random suffix, on
    `subnet_prefix`.0/24, labelled with this process's pid. Networks with
    the same prefix whose maker is gone are what an interrupted run of the
    same test left behind (its `finally` never ran): they would hold the
    subnet and `network create` would refuse it, so they go first, with
    their pods and containers. One whose maker still runs is left alone:
    that run's create then fails on the subnet, as it should."""
    for stale in podman("network", "ls", "--format", "{{.Name}}").stdout.split():
        if not stale.startswith(name_prefix) or _owner_alive(stale):
            continue
        for pod in podman("pod", "ps", "-q", "--filter", f"network={stale}", check=False).stdout.split():
            podman("pod", "rm", "--force", pod, check=False)
        podman("network", "rm", "--force", stale)
        print(f"removed the network {stale}, left behind by an interrupted run")
    name = name_prefix + uuid.uuid4().hex[:6]
    podman("network", "create", "--label", f"{OWNER_LABEL}={os.getpid()}", "--subnet", f"{subnet_prefix}.0/24", name)
    return name


def podman_size(quantity: str) -> str:
    """A Kubernetes quantity (64Mi, 1Gi, 500M) as podman's size (64m, 1g)."""
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|K|M|G)?", quantity)
    if not m:
        raise ValueError(f"cannot convert the quantity {quantity!r}")
    unit = {"Ki": "k", "Mi": "m", "Gi": "g", "K": "k", "M": "m", "G": "g", None: "b"}[m.group(2)]
    return f"{m.group(1)}{unit}"


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in command and args ($$ escapes)."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


def resolve_env(container: dict, fields: dict[str, str]) -> dict[str, str]:
    """The container's env as the kubelet sets it: values with $(VAR)
    expanded from the variables before them, and the downward API's fields
    (fieldPath -> value) filled in."""
    env = {}
    for e in container.get("env") or []:
        if "value" in e:
            env[e["name"]] = expand(e["value"], env)
        elif "fieldRef" in (e.get("valueFrom") or {}):
            env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            raise PodmanError(f"env {e['name']} comes from a source this runner does not map")
    return env


def project_secret(secret: dict, source: str, target: str, fs_group: int | None) -> None:
    """A Secret volume's files as the kubelet projects them into target:
    only the listed items (all keys without a list), with the volume's
    mode, group-owned by the pod's fsGroup. source holds the keys as files."""
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    items = secret.get("items") or [{"key": k, "path": k} for k in sorted(os.listdir(source))]
    for item in items:
        dest = os.path.join(target, item["path"])
        shutil.copyfile(os.path.join(source, item["key"]), dest)
        os.chmod(dest, item.get("mode", secret.get("defaultMode", 0o644)))
        if fs_group is not None:
            os.chown(dest, 0, fs_group)
    os.chmod(target, 0o755)


class PodRunner:
    """Runs pods on one podman network.

    host_paths: a hostPath volume's path -> the directory on this machine.
    secrets: a Secret's name -> the directory holding its keys as files.
    """

    def __init__(self, network: str, namespace: str, host_paths: dict[str, str], secrets: dict[str, str],
                 scratch: str, run_id: str):
        self.network, self.namespace = network, namespace
        self.host_paths, self.secrets = host_paths, secrets
        self.scratch, self.run_id = scratch, run_id
        self.containers: list[str] = []

    def container_name(self, pod: str, container: str) -> str:
        return f"{pod}-{container}-{self.run_id}"

    def _volume_args(self, pod: str, spec: dict, container: dict) -> list[str]:
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        fs_group = (spec.get("securityContext") or {}).get("fsGroup")
        args = []
        for mount in container.get("volumeMounts") or []:
            volume, path = volumes[mount["name"]], mount["mountPath"]
            if "hostPath" in volume:
                source = self.host_paths[volume["hostPath"]["path"]]
                args += ["--volume", f"{source}:{path}" + (":ro" if mount.get("readOnly") else "")]
            elif "emptyDir" in volume:
                size = volume["emptyDir"].get("sizeLimit")
                if volume["emptyDir"].get("medium") == "Memory":
                    if path == "/dev/shm":
                        args += ["--shm-size", podman_size(size or "64Mi")]
                    else:
                        args += ["--mount", f"type=tmpfs,destination={path},tmpfs-mode=1777"
                                 + (f",tmpfs-size={podman_size(size)}" if size else "")]
                else:
                    # Disk-backed, writable by any uid (as an emptyDir is), one per pod.
                    source = os.path.join(self.scratch, "emptydir", pod, mount["name"])
                    os.makedirs(source, exist_ok=True)
                    os.chmod(source, 0o1777)
                    args += ["--volume", f"{source}:{path}"]
            elif "secret" in volume:
                args += ["--volume", f"{self._secret_dir(pod, volume, fs_group)}:{path}:ro"]
            else:
                raise PodmanError(f"pod {pod}: volume {mount['name']} has a kind this runner does not map: {volume}")
        return args

    def _secret_dir(self, pod: str, volume: dict, fs_group: int | None) -> str:
        target = os.path.join(self.scratch, "secrets", pod, volume["name"])
        project_secret(volume["secret"], self.secrets[volume["secret"]["secretName"]], target, fs_group)
        return target

    def _security_args(self, spec: dict, container: dict) -> list[str]:
        pod_sc, sc = spec.get("securityContext") or {}, container.get("securityContext") or {}
        user = sc.get("runAsUser", pod_sc.get("runAsUser"))
        group = sc.get("runAsGroup", pod_sc.get("runAsGroup"))
        args = []
        if user is not None:
            args += ["--user", f"{user}:{group}" if group is not None else str(user)]
        if pod_sc.get("fsGroup") is not None:
            args += ["--group-add", str(pod_sc["fsGroup"])]
        if sc.get("readOnlyRootFilesystem"):
            # Kubernetes adds no tmpfs of its own; podman would (/tmp, /run, /var/tmp).
            args += ["--read-only", "--read-only-tmpfs=false"]
        caps = sc.get("capabilities") or {}
        for cap in caps.get("drop") or []:
            args += ["--cap-drop", cap]
        for cap in caps.get("add") or []:
            args += ["--cap-add", cap]
        if sc.get("allowPrivilegeEscalation") is False:
            args += ["--security-opt", "no-new-privileges"]
        return args

    def _env(self, pod: str, ip: str | None, container: dict) -> dict[str, str]:
        return resolve_env(container, {"metadata.name": pod, "metadata.namespace": self.namespace,
                                       "status.podIP": ip or ""})

    def command_of(self, pod: str, ip: str | None, container: dict) -> list[str]:
        env = self._env(pod, ip, container)
        return [expand(a, env) for a in (container.get("command") or []) + (container.get("args") or [])]

    def podman_args(self, pod: str, spec: dict, container: dict, image: str, ip: str | None,
                    aliases: list[str]) -> list[str]:
        env = self._env(pod, ip, container)
        args = ["--name", self.container_name(pod, container["name"]), "--hostname", pod,
                "--network", self.network]
        if ip:
            args += ["--ip", ip]
        for alias in aliases:
            args += ["--network-alias", alias]
        args += self._security_args(spec, container) + self._volume_args(pod, spec, container)
        for name, value in env.items():
            args += ["--env", f"{name}={value}"]
        return args + [image] + self.command_of(pod, ip, container)

    def start(self, pod: str, spec: dict, image: str, ip: str, aliases: list[str]) -> str:
        """The pod's one container, detached; returns its container name."""
        (container,) = spec["containers"]
        podman("run", "--detach", *self.podman_args(pod, spec, container, image, ip, aliases))
        name = self.container_name(pod, container["name"])
        self.containers.append(name)
        return name

    def run_to_completion(self, pod: str, spec: dict, image: str, timeout: float = 180) -> list[tuple[str, int, str]]:
        """A Job's pod: its init containers in order, then its container;
        stops at the first that fails. Returns (name, exit code, output) of each run."""
        results = []
        for container in (spec.get("initContainers") or []) + spec["containers"]:
            name = self.container_name(pod, container["name"])
            self.containers.append(name)
            r = podman("run", *self.podman_args(pod, spec, container, image, None, []), check=False, timeout=timeout)
            results.append((container["name"], r.returncode, (r.stdout + r.stderr).strip()))
            if r.returncode != 0:
                break
        return results

    def remove_all(self) -> None:
        for name in self.containers:
            podman("rm", "--force", "--time", "0", name, check=False)
        self.containers.clear()
