"""What the Python client tests share: a `kvfleet up` cluster on free
ports, the gRPC stubs generated from proto/ with grpcio-tools, and checks
that fail with a message."""
import importlib
import os
import socket
import subprocess
import sys
import threading
import time

from grpc_tools import protoc


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def generate_stubs(proto_dir, out_dir):
    """(inference_pb2, types_pb2, inference_pb2_grpc) from proto_dir."""
    os.makedirs(out_dir, exist_ok=True)
    for proto in ("kvfleet/v1/types.proto", "kvfleet/v1/inference.proto"):
        rc = protoc.main(["protoc", f"-I{proto_dir}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}", proto])
        check(rc == 0, f"grpc_tools.protoc failed on {proto} ({rc})")
    sys.path.insert(0, out_dir)
    return (importlib.import_module("kvfleet.v1.inference_pb2"), importlib.import_module("kvfleet.v1.types_pb2"),
            importlib.import_module("kvfleet.v1.inference_pb2_grpc"))


def local_greedy_ids(cli, model, prompt, max_tokens, extra=()):
    """`kvfleet generate --local`'s greedy ids for prompt, end-of-turn
    ignored: the reference a served completion must equal. `extra`: more
    flags (another mode, a tensor-parallel degree)."""
    out = subprocess.run([cli, "generate", "--local", "--model", model, "--prompt", prompt, "--max-tokens",
                          str(max_tokens), "--temperature", "0", "--ignore-eos", "--output", "ids", "--threads", "2",
                          *extra], capture_output=True, text=True)
    check(out.returncode == 0, f"kvfleet generate --local {' '.join(extra)} failed: {out.stderr[-1000:]}")
    return [int(t) for t in out.stdout.strip().splitlines()[-1].split(",")]


def detokenized(http, ids, model=None):
    """The router's own detokenization of ids (its /detokenize), with
    `model`'s tokenizer (needed when the router serves several)."""
    import httpx2 as httpx  # the HTTP library the openai package is built on
    body = {"tokens": ids}
    if model is not None:
        body["model"] = model
    reply = httpx.post(f"http://{http}/detokenize", json=body)
    check(reply.status_code == 200, f"/detokenize: {reply.status_code} {reply.text}")
    return reply.json()["prompt"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """`kvfleet up` with one worker of each model (`model`: a path, or a list
    of paths); .router (gRPC), .http (OpenAI-compatible), .cachemanager and
    .worker_metrics (the first worker's URL) once ready."""

    def __init__(self, cli, model, log_dir, workers=1, extra=(), kv_cache_memory="256MiB"):
        self.cachemanager = f"127.0.0.1:{free_port()}"
        self.log_dir = log_dir
        models = [model] if isinstance(model, str) else list(model)
        self.up = subprocess.Popen(
            [cli, "up", *[a for m in models for a in ("--model", m)], "--workers", str(workers), "--threads", "2",
             "--kv-cache-memory", kv_cache_memory,
             "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--cachemanager-listen", self.cachemanager,
             "--metrics-port", "0", "--log-dir", log_dir, *extra],
            stdout=subprocess.PIPE, text=True)
        self.router = self.http = self.worker_metrics = None
        deadline = time.time() + 180
        for line in self.up.stdout:
            print(line, end="", flush=True)
            if line.startswith("  metrics: "):
                self.worker_metrics = line.split(" workers ")[1].split()[0]
            if line.startswith("kvfleet up ready "):
                fields = dict(word.split("=", 1) for word in line.split()[3:])
                self.router, self.http = fields["router"], fields["http"]
                # Keep draining its stdout so it never blocks on a full pipe.
                threading.Thread(target=lambda: [print(l, end="") for l in self.up.stdout], daemon=True).start()
                return
            if time.time() > deadline:
                break
        self.up.kill()
        raise Failure(f"kvfleet up never became ready (exit {self.up.wait()}); logs in {log_dir}")

    def stop(self):
        """Ctrl-C; its exit code. One that does not stop within a minute is
        killed (its services may then outlive it) and reported as -9."""
        import signal
        if self.up.poll() is None:
            self.up.send_signal(signal.SIGINT)
        try:
            return self.up.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.up.kill()
            self.up.wait()
            return -9


def run_against_cluster(cli, model, log_dir, checks, extra=()):
    """Starts a Cluster (`extra`: more `kvfleet up` flags), runs
    checks(cluster), stops it with Ctrl-C (also when a check fails or
    raises, so no service outlives the test): the test's exit code (0
    passed, 1 failed, naming why)."""
    cluster = Cluster(cli, model, log_dir, extra=extra)
    try:
        checks(cluster)
    except Exception as e:  # noqa: BLE001 -- a check's failure or a client's error: report it, stop cleanly
        print(f"FAILED: {type(e).__name__}: {e}" if not isinstance(e, Failure) else f"FAILED: {e}")
        cluster.stop()
        return 1
    code = cluster.stop()
    if code != 0:
        print(f"FAILED: kvfleet up exited {code} after Ctrl-C")
        return 1
    print("passed")
    return 0
