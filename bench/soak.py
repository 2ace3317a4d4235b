"""Soak: a local cluster (`kvfleet up`, the real default model) under mixed
load for a long time, sampling each service's resident memory.

The load, from several client threads through the router's public API:
chat turns, long prompts (about 1,000 tokens), a shared system prompt with
varied questions, streams cancelled after a few messages, and requests the
router must refuse (bad role, too many stop strings, an id outside the
vocabulary, an empty prompt). Every sample records each service's VmRSS.

At the end it reports, per service, the RSS at the start of the measured
window and at the end and the least-squares slope in MiB per hour over the
samples after the warm-up (the first 20% are left out: caches, arenas and
the prefix cache filling), and each worker's KV blocks in use once idle
against its idle baseline from before the load. The goal: slopes near 0 and
blocks back to baseline.

  .venv/bin/python bench/soak.py --minutes 30 --json /tmp/soak.json
"""
import argparse
import importlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

import grpc
from grpc_tools import protoc

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def generate_stubs(out_dir):
    proto_dir = os.path.join(REPO, "proto")
    os.makedirs(out_dir, exist_ok=True)
    for proto in ("kvfleet/v1/types.proto", "kvfleet/v1/inference.proto", "kvfleet/v1/cachemanager.proto"):
        rc = protoc.main(["protoc", f"-I{proto_dir}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}", proto])
        if rc != 0:
            sys.exit(f"grpc_tools.protoc failed on {proto}")
    sys.path.insert(0, out_dir)
    return {name: importlib.import_module(f"kvfleet.v1.{name}")
            for name in ("inference_pb2", "inference_pb2_grpc", "cachemanager_pb2", "cachemanager_pb2_grpc")}


def start_cluster(args, log_dir):
    up = subprocess.Popen(
        [args.cli, "up", "--model", args.model, "--workers", str(args.workers), "--threads", "1",
         "--kv-cache-memory", "256MiB", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--cachemanager-listen", "127.0.0.1:0",
         "--metrics-port", "0", "--log-dir", log_dir],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    router = cachemanager = None
    deadline = time.time() + 300
    for line in up.stderr:
        if " cachemanager ready at " in line:
            cachemanager = line.split(" ready at ")[1].split()[0]
        if line.startswith("kvfleet up: router ready at "):
            router = line.split(" ready at ")[1].split()[0]
        if router and cachemanager:
            break
        if time.time() > deadline:
            break
    for stream in (up.stdout, up.stderr):  # keep draining so it never blocks on a full pipe
        threading.Thread(target=lambda s=stream: [None for _ in s], daemon=True).start()
    if not (router and cachemanager):
        up.kill()
        sys.exit(f"kvfleet up never became ready; logs in {log_dir}")
    return up, router, cachemanager


def service_pids(up_pid):
    """{label: pid} for kvfleet up's children, from their command lines."""
    out = {}
    for pid in map(int, subprocess.run(["pgrep", "-P", str(up_pid)], capture_output=True, text=True).stdout.split()):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        name = os.path.basename(argv[0].decode())
        if "--worker-id" in [a.decode() for a in argv]:
            name = argv[[a.decode() for a in argv].index("--worker-id") + 1].decode()
        out[name.replace("kvfleet-", "")] = pid
    return out


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def slope_per_hour(points):
    """Least-squares slope of (seconds, MiB) points, in MiB per hour."""
    n = len(points)
    if n < 2:
        return float("nan")
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    var = sum((t - mx) ** 2 for t, _ in points)
    return 3600.0 * sum((t - mx) * (v - my) for t, v in points) / var if var else float("nan")


class Load:
    def __init__(self, pb, stub, seed):
        self.pb, self.stub, self.rng = pb, stub, random.Random(seed)
        self.counts = {}
        self.unexpected = []
        self.lock = threading.Lock()

    def count(self, kind, outcome):
        with self.lock:
            self.counts[f"{kind}:{outcome}"] = self.counts.get(f"{kind}:{outcome}", 0) + 1

    def options(self, max_tokens, **kw):
        return self.pb.GenerationOptions(stopping={"max_tokens": max_tokens}, **kw)

    def one(self):
        pb, r = self.pb, self.rng
        kind = r.choices(["chat", "long", "shared", "cancel", "bad"], weights=[35, 15, 15, 20, 15])[0]
        try:
            if kind == "chat":
                q = r.choice(["What is the capital of France?", "Write a haiku about rain.", "Explain TCP briefly.",
                              "List three prime numbers.", "Translate 'good morning' to Spanish."])
                list(self.stub.Chat(pb.ChatRequest(messages=[pb.ChatMessage(role="user", content=q)],
                                                   options=self.options(24)), timeout=300))
            elif kind == "long":
                words = " ".join(r.choice(["alpha", "beta", "gamma", "delta", "kv", "cache", "block", "router"])
                                 for _ in range(900))
                list(self.stub.Generate(pb.GenerateTextRequest(prompt=words, options=self.options(8)), timeout=300))
            elif kind == "shared":
                system = "You are a terse assistant for a company that runs its own GPUs. " * 8
                messages = [pb.ChatMessage(role="system", content=system),
                            pb.ChatMessage(role="user", content=f"Question {r.randrange(1000)}: what is 2+{r.randrange(9)}?")]
                list(self.stub.Chat(pb.ChatRequest(messages=messages, options=self.options(12)), timeout=300))
            elif kind == "cancel":
                stream = self.stub.Generate(pb.GenerateTextRequest(prompt="Tell me a long story about a lighthouse.",
                                                                   options=self.options(200)), timeout=300)
                for i, _ in enumerate(stream):
                    if i >= r.randrange(1, 6):
                        stream.cancel()
                        break
            else:
                bad = r.choice([
                    pb.ChatRequest(messages=[pb.ChatMessage(role="narrator", content="hi")]),
                    pb.GenerateTextRequest(prompt="x", options=pb.GenerationOptions(stop=["s"] * 40)),
                    pb.GenerateTextRequest(prompt_token_ids=[10 ** 7]),
                    pb.GenerateTextRequest(),
                ])
                call = self.stub.Chat if isinstance(bad, pb.ChatRequest) else self.stub.Generate
                try:
                    list(call(bad, timeout=60))
                    self.unexpected.append(f"bad request accepted: {bad}")
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.INVALID_ARGUMENT:
                        self.unexpected.append(f"bad request: {e.code()} {e.details()}")
                    self.count(kind, "refused")
                    return
            self.count(kind, "ok")
        except grpc.RpcError as e:
            if kind == "cancel" and e.code() == grpc.StatusCode.CANCELLED:
                self.count(kind, "cancelled")
                return
            self.count(kind, e.code().name.lower())
            self.unexpected.append(f"{kind}: {e.code()} {e.details()}")


def blocks_in_use(cm_pb, cm_stub):
    workers = cm_stub.ListWorkers(cm_pb.ListWorkersRequest(), timeout=10).workers
    return {w.worker_id: w.load.blocks_used for w in workers}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--sample-seconds", type=float, default=10)
    p.add_argument("--cli", default=os.path.join(REPO, "build/tools/kvfleet/kvfleet"))
    p.add_argument("--model", default=os.path.join(REPO, "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--json")
    args = p.parse_args()

    tmp = tempfile.mkdtemp(prefix="kvfleet-soak-")
    mods = generate_stubs(os.path.join(tmp, "stubs"))
    pb, cm_pb = mods["inference_pb2"], mods["cachemanager_pb2"]
    up, router, cachemanager = start_cluster(args, os.path.join(tmp, "logs"))
    stub = mods["inference_pb2_grpc"].InferenceStub(grpc.insecure_channel(router))
    cm_stub = mods["cachemanager_pb2_grpc"].CacheManagerStub(grpc.insecure_channel(cachemanager))
    pids = service_pids(up.pid)
    time.sleep(2)
    baseline_blocks = blocks_in_use(cm_pb, cm_stub)
    print(f"soak: {args.minutes} min, {args.clients} clients, services {pids}, idle KV blocks in use {baseline_blocks}")

    stop = threading.Event()
    loads = [Load(pb, stub, seed) for seed in range(args.clients)]
    threads = [threading.Thread(target=lambda l=l: [l.one() for _ in iter(lambda: stop.is_set(), True)], daemon=True)
               for l in loads]
    start = time.time()
    for t in threads:
        t.start()
    samples = {name: [] for name in pids}
    while time.time() - start < args.minutes * 60:
        for name, pid in pids.items():
            samples[name].append((time.time() - start, rss_mib(pid)))
        time.sleep(args.sample_seconds)
    stop.set()
    for t in threads:
        t.join(timeout=600)
    duration = time.time() - start

    idle_blocks = {}
    for _ in range(60):
        idle_blocks = blocks_in_use(cm_pb, cm_stub)
        if idle_blocks == baseline_blocks:
            break
        time.sleep(1)
    counts = {}
    for l in loads:
        for k, v in l.counts.items():
            counts[k] = counts.get(k, 0) + v
    unexpected = [u for l in loads for u in l.unexpected]
    report = {"minutes": duration / 60, "clients": args.clients, "counts": counts, "unexpected": unexpected[:20],
              "unexpected_count": len(unexpected), "idle_blocks_before": baseline_blocks, "idle_blocks_after": idle_blocks,
              "rss": {}}
    print(f"\nsoak: {duration / 60:.1f} min; requests {sum(counts.values())}: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"{'service':<14}{'RSS start MiB':>15}{'RSS end MiB':>13}{'peak MiB':>10}{'slope MiB/h':>13}")
    for name, pts in samples.items():
        measured = pts[len(pts) // 5:]
        s = slope_per_hour(measured)
        report["rss"][name] = {"start_mib": measured[0][1], "end_mib": pts[-1][1], "peak_mib": max(v for _, v in pts),
                               "slope_mib_per_hour": s, "samples": len(pts)}
        print(f"{name:<14}{measured[0][1]:>15.1f}{pts[-1][1]:>13.1f}{max(v for _, v in pts):>10.1f}{s:>13.2f}")
    print(f"KV blocks in use, idle: before {baseline_blocks}, after {idle_blocks}")
    print(f"unexpected outcomes: {len(unexpected)}" + (f", e.g. {unexpected[0]}" if unexpected else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    up.send_signal(signal.SIGINT)
    up.wait(timeout=120)
    return 0 if not unexpected and idle_blocks == baseline_blocks else 1


if __name__ == "__main__":
    sys.exit(main())
