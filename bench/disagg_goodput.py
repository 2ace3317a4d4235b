#!/usr/bin/env python3
"""disagg_goodput: disaggregated prefill and decode against two workers of
role both, live on this machine (bench/README.md, "Prefill and decode").

Two clusters of two workers each, one CPU thread per worker (not pinned:
the router, the cachemanager and this load generator need the rest):
  - split: `kvfleet up --prefill-workers 1 --decode-workers 1`;
  - aggregated: `kvfleet up --workers 2`.
The same open-loop workload goes to each, in alternated runs: Poisson
arrivals at --rate requests/s for --duration seconds, each request a chat
turn (--chat-tokens random prompt tokens, --chat-output generated) or, with
probability --doc-share, a document (--doc-tokens prompt tokens,
--doc-output generated). Prompts are random token ids, so no prefix is
shared and the prefix cache plays no part.

Per request the client records its time to first token and the gaps
between the messages of tokens it receives (inter-token latency, ITL).
A request meets the objective when its TTFT is at most --ttft-slo and its
own 99th-percentile ITL at most --itl-slo; goodput is the rate of requests
that do. Printed per rate: TTFT p90, ITL p99 (over every gap of every
request), goodput and completed requests per configuration, as the median
of the runs with their range, and split / aggregated.

Not part of CI.

  .venv/bin/python bench/disagg_goodput.py --rates 0.15,0.3,0.5 --duration 50 --runs 3 --json out.json
"""
import argparse
import importlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import grpc
from grpc_tools import protoc

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = {
    "split": ["--prefill-workers", "1", "--decode-workers", "1"],
    "aggregated": ["--workers", "2"],
}


def generate_stubs(out_dir):
    proto_dir = os.path.join(REPO, "proto")
    for proto in ("kvfleet/v1/types.proto", "kvfleet/v1/inference.proto"):
        if protoc.main(["protoc", f"-I{proto_dir}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}", proto]):
            sys.exit(f"grpc_tools.protoc failed on {proto}")
    sys.path.insert(0, out_dir)
    return importlib.import_module("kvfleet.v1.inference_pb2"), importlib.import_module("kvfleet.v1.inference_pb2_grpc")


def start_cluster(args, config, log_dir):
    """`kvfleet up` in `config`; returns (process, router address)."""
    up = subprocess.Popen(
        [args.cli, "up", "--model", args.model, *CONFIGS[config], "--threads", "1", "--kv-cache-memory", "512MiB",
         "--max-num-batched-tokens", str(args.max_batched_tokens), "--split-min-uncached-tokens",
         str(args.split_tokens), "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
         "--cachemanager-listen", "127.0.0.1:0", "--metrics-port", "0", "--log-dir", log_dir],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    router = None
    deadline = time.time() + 300
    for line in up.stderr:
        if line.startswith("kvfleet up: router ready at "):
            router = line.split(" ready at ")[1].split()[0]
        if router or time.time() > deadline:
            break
    for stream in (up.stdout, up.stderr):  # keep draining so it never blocks on a full pipe
        threading.Thread(target=lambda s=stream: [None for _ in s], daemon=True).start()
    if router is None:
        up.kill()
        sys.exit(f"kvfleet up ({config}) never became ready; logs in {log_dir}")
    return up, router


def workload(args, seed):
    """[(arrival offset s, prompt ids, max_tokens, kind)], the same for every configuration."""
    rng = random.Random(seed)
    out, t = [], 0.0
    while True:
        t += rng.expovariate(args.rate)
        if t >= args.duration:
            return out
        doc = rng.random() < args.doc_share
        n = args.doc_tokens if doc else args.chat_tokens
        prompt = [rng.randrange(100, 40000) for _ in range(n)]
        out.append((t, prompt, args.doc_output if doc else args.chat_output, "doc" if doc else "chat"))


def one_request(stub, pb, prompt, max_tokens, result):
    options = pb.GenerationOptions(stopping={"max_tokens": max_tokens, "ignore_eos": True})
    start = time.monotonic()
    last = None
    try:
        for message in stub.Generate(pb.GenerateTextRequest(prompt_token_ids=prompt, options=options), timeout=600):
            if not message.token_ids:
                continue
            now = time.monotonic()
            if last is None:
                result["ttft"] = now - start
            else:
                result["gaps"].append(now - last)
            last = now
        result["ok"] = True
    except grpc.RpcError as e:
        result["error"] = e.code().name


def percentile(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def run_once(args, pb, pb_grpc, config, rate, seed, log_root):
    log_dir = tempfile.mkdtemp(prefix=f"{config}-", dir=log_root)
    up, router = start_cluster(args, config, log_dir)
    try:
        stub = pb_grpc.InferenceStub(grpc.insecure_channel(router))
        # One short request first: the workers' first step (page faults, allocation) is not measured.
        one_request(stub, pb, [1000 + i for i in range(32)], 4, {"gaps": []})
        requests = workload(args, seed)
        results = [{"gaps": [], "ok": False, "kind": kind} for (_, _, _, kind) in requests]
        threads = []
        begin = time.monotonic()
        for (offset, prompt, max_tokens, _), result in zip(requests, results):
            delay = begin + offset - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            th = threading.Thread(target=one_request, args=(stub, pb, prompt, max_tokens, result), daemon=True)
            th.start()
            threads.append(th)
        for th in threads:
            th.join()
        elapsed = time.monotonic() - begin
    finally:
        up.terminate()
        try:
            up.wait(timeout=120)
        except subprocess.TimeoutExpired:
            up.kill()
    done = [r for r in results if r["ok"]]
    gaps = [g for r in done for g in r["gaps"]]
    good = [r for r in done if r.get("ttft", 1e9) <= args.ttft_slo and percentile(r["gaps"] or [0.0], 0.99) <= args.itl_slo]
    return {
        "per_request": [{"kind": r["kind"], "ttft": r.get("ttft"), "gaps": r["gaps"]} for r in results],
        "elapsed": elapsed,
        "ttft_p90": percentile([r["ttft"] for r in done if "ttft" in r], 0.90),
        "itl_p99": percentile(gaps, 0.99),
        "goodput": len(good) / elapsed,
        "good_share": len(good) / max(len(requests), 1),
        "completed": len(done),
        "requests": len(requests),
        "failed": len(requests) - len(done),
        "doc_ttft_p90": percentile([r["ttft"] for r in done if r["kind"] == "doc" and "ttft" in r], 0.90),
        "chat_itl_p99": percentile([g for r in done if r["kind"] == "chat" for g in r["gaps"]], 0.99),
    }


def spread(values, fmt):
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", default=os.path.join(REPO, "build", "tools", "kvfleet", "kvfleet"))
    ap.add_argument("--model", default=os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--rates", default="0.15,0.3,0.5", help="arrival rates to sweep, requests/s")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of arrivals per run")
    ap.add_argument("--runs", type=int, default=3, help="alternated runs per configuration and rate")
    ap.add_argument("--doc-share", type=float, default=0.2)
    ap.add_argument("--doc-tokens", type=int, default=3000)
    ap.add_argument("--doc-output", type=int, default=16)
    ap.add_argument("--chat-tokens", type=int, default=150)
    ap.add_argument("--chat-output", type=int, default=64)
    ap.add_argument("--max-batched-tokens", type=int, default=512, help="each worker's --max-num-batched-tokens")
    ap.add_argument("--split-tokens", type=int, default=2048, help="the router's --split-min-uncached-tokens")
    ap.add_argument("--ttft-slo", type=float, default=30.0,
                    help="seconds (a 3,000-token document alone takes about 14 s on one thread here)")
    ap.add_argument("--itl-slo", type=float, default=0.25, help="seconds, a request's own p99")
    ap.add_argument("--json", help="also write every run's per-request figures to this file")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="which of split,aggregated to run")
    args = ap.parse_args()
    configs = [c for c in CONFIGS if c in args.configs.split(",")]
    everything = []
    stubs_dir = tempfile.mkdtemp(prefix="disagg-stubs-")
    pb, pb_grpc = generate_stubs(stubs_dir)
    log_root = tempfile.mkdtemp(prefix="disagg-logs-")
    print(f"{os.path.basename(args.model)}: 2 workers x 1 thread, --max-num-batched-tokens {args.max_batched_tokens}, "
          f"split at {args.split_tokens} uncached tokens; {args.doc_share:.0%} documents of {args.doc_tokens} tokens "
          f"({args.doc_output} out), chats of {args.chat_tokens} ({args.chat_output} out); objective TTFT <= "
          f"{args.ttft_slo} s and a request's p99 ITL <= {args.itl_slo * 1000:.0f} ms; logs in {log_root}")
    for rate in [float(r) for r in args.rates.split(",")]:
        args.rate = rate
        runs = {config: [] for config in configs}
        for i in range(args.runs):
            for config in (configs if i % 2 == 0 else reversed(configs)):
                runs[config].append(run_once(args, pb, pb_grpc, config, rate, seed=1000 + i, log_root=log_root))
                r = runs[config][-1]
                everything.append({"rate": rate, "run": i + 1, "config": config, **r})
                if args.json:
                    with open(args.json, "w") as f:
                        json.dump(everything, f)
                print(f"  rate {rate} run {i + 1} {config}: TTFT p90 {r['ttft_p90']:.2f} s, ITL p99 "
                      f"{r['itl_p99'] * 1000:.0f} ms, goodput {r['goodput']:.3f}/s ({r['good_share']:.0%}), "
                      f"{r['completed']}/{r['requests']} done", flush=True)
        print(f"\nrate {rate}/s, median of {args.runs} runs (range):")
        print(f"{'config':<12} {'TTFT p90 s':<20} {'ITL p99 ms':<20} {'goodput /s':<22} {'doc TTFT p90 s':<20} "
              f"{'chat ITL p99 ms':<20}")
        for config, rs in runs.items():
            print(f"{config:<12} {spread([r['ttft_p90'] for r in rs], '{:.2f}'):<20} "
                  f"{spread([r['itl_p99'] * 1000 for r in rs], '{:.0f}'):<20} "
                  f"{spread([r['goodput'] for r in rs], '{:.3f}'):<22} "
                  f"{spread([r['doc_ttft_p90'] for r in rs], '{:.2f}'):<20} "
                  f"{spread([r['chat_itl_p99'] * 1000 for r in rs], '{:.0f}'):<20}")
        med = {c: {k: statistics.median(r[k] for r in rs) for k in ("ttft_p90", "itl_p99", "goodput")}
               for c, rs in runs.items()}
        if len(med) < 2:
            continue
        s, a = med["split"], med["aggregated"]
        print(f"split / aggregated: ITL p99 {s['itl_p99'] / a['itl_p99']:.2f}x, TTFT p90 "
              f"{s['ttft_p90'] / a['ttft_p90']:.2f}x, goodput {s['goodput'] / max(a['goodput'], 1e-9):.2f}x\n", flush=True)


if __name__ == "__main__":
    main()
