"""Two models behind one router: what learning them costs at start-up, and
what sharing the router costs each under load. Same run, same machine.

Start-up. `kvfleet up --model A --model B` runs a cachemanager and one
worker of each model. Its router is replaced by a new kvfleet-router with
no model file, timed from its start to the first completion served for each
model (the router learns both models from their workers: DescribeModel,
the card, the tokenizer); then, as the baseline, by a router given A's file
(--model), timed to A's first completion. Alternated, median of --rounds.

Load. On that cluster, the same streamed completions (--streams at once,
--requests each, distinct prompts, greedy, --tokens each): A alone, B alone,
then A and B together (--streams each), alternated for --rounds. Per model:
output tokens/s and p90 time to first token, and together against alone in
the same run. On a machine whose cores the two workers share, "together"
also measures the cores' contention, not the router's: the router's share
is its own CPU time per request, printed too.

  .venv/bin/python bench/multi_model_bench.py --cli build/tools/kvfleet/kvfleet \
      --model models/SmolLM2-135M-Instruct.Q4_1.gguf --model models/qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf
"""
import argparse
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import httpx2 as httpx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration", "clients"))
from kvfleet_up import Cluster  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def prompt(i):
    return f"Request {i}: write a short note about the number {i * 7919 % 1000} and what it means to you. " * 2


def complete(base, model, i, tokens, client=None):
    """One streamed greedy completion: (ttft, seconds, tokens)."""
    client = client or httpx.Client(timeout=300)
    body = {"model": model, "prompt": prompt(i), "max_tokens": tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    start, first, generated = time.perf_counter(), None, 0
    with client.stream("POST", f"{base}/v1/completions", json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if first is None and '"text":"' in line and '"text":""' not in line:
                first = time.perf_counter()
            elif '"usage":{' in line:
                generated = json.loads(line[6:])["usage"]["completion_tokens"]
    return (first or time.perf_counter()) - start, time.perf_counter() - start, generated


def _stream(args):
    """One stream's completions, one after another, and when it finished (perf_counter)."""
    base, model, first, count, tokens = args
    client = httpx.Client(timeout=300)
    results = [complete(base, model, i, tokens, client) for i in range(first, first + count)]
    return results, time.perf_counter()


def load(base, jobs, streams, requests, tokens, offset):
    """`jobs`: the models to load at once, `streams` each. Per model: (tokens/s, p90 ttft, requests)."""
    work = [(base, m, offset + 1000 * s + 100000 * j, requests, tokens)
            for j, m in enumerate(jobs) for s in range(streams)]
    start = time.perf_counter()
    with multiprocessing.Pool(len(work)) as pool:
        results = pool.map(_stream, work)
    out = {}
    for m in jobs:
        streams_of_m = [(rs, end) for (w, (rs, end)) in zip(work, results) if w[1] == m]
        mine = [r for rs, _ in streams_of_m for r in rs]
        # From the common start to this model's last stream's end (the pool's processes share the clock).
        wall = max(end for _, end in streams_of_m) - start
        out[m] = (sum(r[2] for r in mine) / wall, percentile([r[0] for r in mine], 0.9), len(mine))
    return out


def start_router(bin_dir, cachemanager, http, extra=()):
    grpc = f"127.0.0.1:{free_port()}"
    log = open(os.path.join(tempfile.gettempdir(), f"multi-model-router-{http.split(':')[1]}.log"), "w")
    p = subprocess.Popen([os.path.join(bin_dir, "services/router/kvfleet-router"), "--cachemanager", cachemanager,
                          "--listen", grpc, "--http-listen", http, "--metrics-port", "0", *extra],
                         stdout=subprocess.DEVNULL, stderr=log)
    return p


def first_served(base, models, deadline_s=120):
    """Seconds from now until each model's first completion is served."""
    start, done, client = time.perf_counter(), {}, httpx.Client(timeout=30)
    while len(done) < len(models) and time.perf_counter() - start < deadline_s:
        for m in models:
            if m in done:
                continue
            try:
                complete(f"http://{base}", m, 1, 1, client)
                done[m] = time.perf_counter() - start
            except (httpx.HTTPError, httpx.StreamError):
                pass
        time.sleep(0.005)
    return done


def router_pid_of(up_pid):
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    name = os.path.basename(f.read().split(b"\0")[0].decode())
            except OSError:
                continue
            if int(fields[1]) == up_pid and name == "kvfleet-router":
                return int(entry)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--bin-dir", default="build")
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    assert len(a.model) == 2, "give two --model"
    ids = [os.path.splitext(os.path.basename(m))[0] for m in a.model]
    with tempfile.TemporaryDirectory() as log_dir:
        cluster = Cluster(a.cli, a.model, log_dir, workers=1)
        try:
            base = f"http://{cluster.http}"
            # Start-up: the cluster's own router, then routers of our own on the same cachemanager.
            learnt, fixed = {m: [] for m in ids}, []
            for r in range(a.rounds):
                http = f"127.0.0.1:{free_port()}"
                p = start_router(a.bin_dir, cluster.cachemanager, http)
                times = first_served(http, ids)
                p.terminate(), p.wait()
                for m in ids:
                    learnt[m].append(times.get(m, float("nan")))
                http = f"127.0.0.1:{free_port()}"
                p = start_router(a.bin_dir, cluster.cachemanager, http, ("--model", a.model[0]))
                fixed.append(first_served(http, [ids[0]]).get(ids[0], float("nan")))
                p.terminate(), p.wait()
            print(f"start-up to the first completion served, median of {a.rounds} (router process start included):")
            for m in ids:
                print(f"  no model file, {m}: {statistics.median(learnt[m]):.3f} s  {sorted(round(x, 3) for x in learnt[m])}")
            print(f"  --model {ids[0]} (baseline): {statistics.median(fixed):.3f} s  {sorted(round(x, 3) for x in fixed)}")
            print(f"  ratio, {ids[0]}: {statistics.median(learnt[ids[0]]) / statistics.median(fixed):.2f}x the baseline")

            # Load: alone and together, alternated.
            router = router_pid_of(cluster.up.pid)
            results = {("alone", m): [] for m in ids} | {("together", m): [] for m in ids}
            for r in range(a.rounds):
                for m in ids:
                    results[("alone", m)].append(load(base, [m], a.streams, a.requests, a.tokens, r)[m])
                both = load(base, ids, a.streams, a.requests, a.tokens, r)
                for m in ids:
                    results[("together", m)].append(both[m])
            print(f"\nload: {a.streams} streams of {a.requests} streamed completions ({a.tokens} tokens) per model, "
                  f"median of {a.rounds}")
            print(f"  {'model':40s} {'alone tok/s':>12s} {'together tok/s':>15s} {'ratio':>6s} "
                  f"{'alone p90 TTFT':>15s} {'together p90 TTFT':>18s}")
            for m in ids:
                alone = statistics.median(x[0] for x in results[("alone", m)])
                together = statistics.median(x[0] for x in results[("together", m)])
                t_alone = statistics.median(x[1] for x in results[("alone", m)])
                t_together = statistics.median(x[1] for x in results[("together", m)])
                print(f"  {m:40s} {alone:12.1f} {together:15.1f} {together / alone:6.2f} {t_alone * 1000:13.0f} ms "
                      f"{t_together * 1000:16.0f} ms")
            if router:
                with open(f"/proc/{router}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
                served = sum(x[2] for v in results.values() for x in v)
                print(f"  the router's CPU time: {cpu:.2f} s over {served} requests, {cpu / served * 1000:.1f} ms a request")
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
