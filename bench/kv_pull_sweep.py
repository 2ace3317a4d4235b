#!/usr/bin/env python3
"""kv_pull_sweep: a prompt's prefix pulled from a peer worker against
computing it, over a sweep of prompt lengths, with two real worker
processes on loopback (bench/README.md, "Peer prefix fetch").

Per model and length L, in one run, each repeat with fresh prompts:
  - worker A computes prompt P (its blocks are then A's to serve);
  - recompute: worker B prefills another prompt of L tokens: TTFT;
  - pull: B gets P with kv_peer = A (every full block A holds): TTFT, and
    from B's metrics the bytes pulled and the pull's own time;
  - tail: B gets P again, now cached: TTFT, the tail's prefill alone;
  - ideal: the pulled bytes at the transfer path's measured rate
    (kv_transfer_bench's in-process pull, same model, this run) plus the tail;
  - price: what the router would have said before the pull, from B's load
    report (its pull seconds per block, else the block's bytes at 1 GB/s,
    over its prefill seconds per block, else A's) against which was faster.

Prints one table per model and the share of lengths where the price chose
the faster path. Not part of CI.

  .venv/bin/python bench/kv_pull_sweep.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf \\
      --lengths 500,1000,2000,4000,8000 --repeats 2
"""
import argparse
import importlib
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import grpc
from grpc_tools import protoc

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASSUMED_BYTES_PER_SECOND = 1e9  # the router's --peer-pull-bandwidth default


def generate_stubs(out_dir):
    proto_dir = os.path.join(REPO, "proto")
    for proto in ("kvfleet/v1/types.proto", "kvfleet/v1/worker.proto"):
        if protoc.main(["protoc", f"-I{proto_dir}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}", proto]):
            sys.exit(f"grpc_tools.protoc failed on {proto}")
    sys.path.insert(0, out_dir)
    return importlib.import_module("kvfleet.v1.worker_pb2"), importlib.import_module("kvfleet.v1.worker_pb2_grpc")


class Worker:
    """One kvfleet-worker process with a transfer port, on one thread."""

    def __init__(self, binary, model, log_path, threads):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [binary, "--model", model, "--model-id", "sweep", "--listen", "127.0.0.1:0", "--metrics-port", "0",
             "--metrics-host", "127.0.0.1", "--kv-transfer-listen", "127.0.0.1:0", "--threads", str(threads),
             "--kv-cache-memory", "1GiB", "--kv-transfer-deadline", "120"],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.grpc = self.metrics = self.transfer = None
        deadline = time.time() + 600
        for line in self.proc.stdout:
            m = re.search(r"listening grpc=(\S+) metrics=(\S+)(?: kvtransfer=(\S+))?", line)
            if m:
                self.grpc, self.metrics, self.transfer = m.groups()
            if line.strip() == "kvfleet-worker ready" or time.time() > deadline:
                break
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()
        if not (self.grpc and self.transfer):
            self.proc.kill()
            sys.exit(f"worker never became ready; see {log_path}")

    def metric(self, name, labels=""):
        """The sum of `name`'s samples whose labels contain `labels`."""
        body = urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=10).read().decode()
        total = 0.0
        for line in body.splitlines():
            m = re.match(r"([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$", line)
            if m and m.group(1) == name and labels in (m.group(2) or ""):
                total += float(m.group(3))
        return total

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def ttft(stub, pb, tokens, peer=None, blocks=0):
    """Seconds from sending the request to its first token."""
    request = pb.GenerateRequest(prompt_token_ids=tokens)
    request.stopping.max_tokens = 1
    request.stopping.ignore_eos = True
    request.sampling.temperature = 0.0
    if peer:
        request.kv_peer.endpoint = peer
        request.kv_peer.blocks = blocks
    start = time.perf_counter()
    first = None
    cached = 0
    for message in stub.Generate(request, timeout=600):
        if first is None and message.token_ids:
            first = time.perf_counter() - start
        if message.HasField("usage"):
            cached = message.usage.cached_prompt_tokens
    return first, cached


def transfer_rate(model, blocks):
    """kv_transfer_bench's in-process pull rate for this model, GB/s."""
    binary = os.path.join(REPO, "build", "bench", "kv_transfer_bench")
    out = subprocess.run([binary, "--model", model, "--blocks", str(blocks), "--repeats", "3"], capture_output=True,
                         text=True, timeout=900).stdout
    m = re.search(r"kvfleet pull.*?:\s*([\d.]+) GB/s", out)
    if not m:
        sys.exit(f"kv_transfer_bench printed no rate:\n{out}")
    return float(m.group(1)) * 1e9


def sweep(args, model, pb, pb_grpc, log_dir):
    name = os.path.basename(model)
    rate = transfer_rate(model, args.rate_blocks)
    binary = os.path.join(REPO, "build", "services", "worker", "kvfleet-worker")
    a = Worker(binary, model, os.path.join(log_dir, f"{name}.a.log"), args.threads)
    b = Worker(binary, model, os.path.join(log_dir, f"{name}.b.log"), args.threads)
    stub_a = pb_grpc.WorkerStub(grpc.insecure_channel(a.grpc))
    stub_b = pb_grpc.WorkerStub(grpc.insecure_channel(b.grpc))
    info = stub_b.GetInfo(pb.GetInfoRequest())
    block_size = info.block_size
    rng = random.Random(args.seed)
    rows = []
    try:
        ttft(stub_b, pb, [rng.randrange(100, info.vocab_size - 100) for _ in range(64)])  # warm B's prefill rate
        for length in args.lengths:
            samples = []
            for _ in range(args.repeats):
                prompt = [rng.randrange(100, info.vocab_size - 100) for _ in range(length)]
                other = [rng.randrange(100, info.vocab_size - 100) for _ in range(length)]
                blocks = length // block_size
                ttft(stub_a, pb, prompt)
                load_b = stub_b.GetStats(pb.GetStatsRequest()).load_report
                load_a = stub_a.GetStats(pb.GetStatsRequest()).load_report
                recompute, _ = ttft(stub_b, pb, other)
                bytes_before = b.metric("kvfleet_worker_kv_peer_bytes_total", 'direction="pulled"')
                seconds_before = b.metric("kvfleet_worker_kv_peer_pull_seconds_sum")
                pulled, cached = ttft(stub_b, pb, prompt, a.transfer, blocks)
                pulled_bytes = b.metric("kvfleet_worker_kv_peer_bytes_total", 'direction="pulled"') - bytes_before
                pull_seconds = b.metric("kvfleet_worker_kv_peer_pull_seconds_sum") - seconds_before
                tail, _ = ttft(stub_b, pb, prompt)
                prefill_rate = load_b.prefill_tokens_per_second or load_a.prefill_tokens_per_second
                per_block = load_b.peer_pull_seconds_per_block or load_b.kv_block_bytes / ASSUMED_BYTES_PER_SECOND
                price_pull = prefill_rate > 0 and per_block < block_size / prefill_rate
                if args.verbose:
                    print(f"  {name} {length}: recompute {recompute:.3f} s, pull {pulled:.3f} s ({pulled_bytes / 1e6:.1f} MB "
                          f"in {pull_seconds:.3f} s, {cached} tokens cached), tail {tail:.3f} s", file=sys.stderr)
                samples.append(dict(recompute=recompute, pulled=pulled, tail=tail, cached=cached,
                                    bytes=pulled_bytes, pull_seconds=pull_seconds,
                                    ideal=pulled_bytes / rate + tail, price_pull=price_pull,
                                    right=price_pull == (pulled < recompute)))
            med = {k: statistics.median(s[k] for s in samples) for k in
                   ("recompute", "pulled", "tail", "bytes", "pull_seconds", "ideal", "cached")}
            rows.append(dict(length=length, **med, right=sum(s["right"] for s in samples), n=len(samples),
                             price_pull=sum(s["price_pull"] for s in samples)))
    finally:
        a.stop()
        b.stop()
    print(f"\n{name}: transfer path {rate / 1e9:.2f} GB/s (kv_transfer_bench, {args.rate_blocks} blocks); "
          f"medians of {args.repeats}; block {block_size} tokens")
    print("| tokens | recompute TTFT s | pull TTFT s | pull / recompute | pulled MB | pull's own GB/s "
          "| tail TTFT s | ideal s | pull / ideal | price said pull | price right |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        own = r["bytes"] / r["pull_seconds"] / 1e9 if r["pull_seconds"] > 0 else 0
        print(f"| {r['length']} | {r['recompute']:.3f} | {r['pulled']:.3f} | {r['pulled'] / r['recompute']:.2f} | "
              f"{r['bytes'] / 1e6:.1f} | {own:.2f} | {r['tail']:.3f} | {r['ideal']:.3f} | "
              f"{r['pulled'] / r['ideal']:.2f} | {r['price_pull']}/{r['n']} | {r['right']}/{r['n']} |")
    return sum(r["right"] for r in rows), sum(r["n"] for r in rows)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", action="append", required=True)
    p.add_argument("--lengths", default="500,1000,2000,4000,8000")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="per worker (two run at once)")
    p.add_argument("--rate-blocks", type=int, default=256)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--verbose", action="store_true", help="each measurement on stderr")
    args = p.parse_args()
    args.lengths = [int(x) for x in args.lengths.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        pb, pb_grpc = generate_stubs(tmp)
        right = total = 0
        for model in args.model:
            r, n = sweep(args, model, pb, pb_grpc, tmp)
            right += r
            total += n
        print(f"\nthe price chose the faster path in {right} of {total} measurements ({100 * right / total:.0f}%)")


if __name__ == "__main__":
    main()
