#!/usr/bin/env python3
"""Constrained decoding's cost: decode tok/s with a json_schema constraint
vs unconstrained, at 1 and 16 concurrent streams, on the 151,936-token Qwen
vocabulary, through `kvfleet up` (real router, worker, gRPC) in one run, and
the worker's mask time per constrained token (p50 and p99, from its
histogram), the part of it the forward pass did not hide, and the compile
count from its metrics (a repeated schema must compile once).

Decode rate is measured on streams: tokens after the first over the time
from the first token to the last, so prefill and queueing are left out.
The target: json_schema decoding at most 5% slower than unconstrained at
batch 1 on the CPU.

  bench/structured_output_bench.py --cli build/tools/kvfleet/kvfleet --model models/qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf
"""
import argparse
import concurrent.futures
import os
import statistics
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration", "clients"))
import openai  # noqa: E402

from kvfleet_up import Cluster  # noqa: E402

SCHEMA = {"type": "object", "properties": {
    "title": {"type": "string", "maxLength": 60},
    "summary": {"type": "string", "maxLength": 400},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 5}},
    "required": ["title", "summary", "tags"], "additionalProperties": False}
TOPICS = ["the history of Rome", "how a CPU cache works", "the water cycle", "black holes", "the printing press",
          "photosynthesis", "the French revolution", "how vaccines work", "plate tectonics", "the internet",
          "jazz music", "the moon landing", "bees", "volcanoes", "the Great Wall", "electric cars"]


def stream_rate(client, model, topic, constrained, max_tokens):
    ask = dict(model=model, temperature=0, max_tokens=max_tokens, stream=True,
               messages=[{"role": "user", "content": f"Write a detailed JSON summary of {topic}."}])
    if constrained:
        ask["response_format"] = {"type": "json_schema", "json_schema": {"name": "s", "schema": SCHEMA}}
    else:
        ask["extra_body"] = {"ignore_eos": True}
    times = []
    for chunk in client.chat.completions.create(**ask):
        if chunk.choices and chunk.choices[0].delta.content:
            times.append(time.perf_counter())
    return len(times), (times[-1] - times[0]) if len(times) > 1 else 0.0


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode().splitlines()


def metric(url, name):
    for line in scrape(url):
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.split()[-1])
    return 0.0


def buckets(url, name):
    """A histogram's cumulative bucket counts: {upper bound: count}."""
    out = {}
    for line in scrape(url):
        if line.startswith(name + "_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[float("inf") if le == "+Inf" else float(le)] = float(line.split()[-1])
    return out


def quantile(q, before, after):
    """Prometheus' histogram_quantile over the observations between two
    scrapes: linear within the bucket the quantile falls in."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1]
    if total <= 0:
        return float("nan")
    rank, lower, below = q * total, 0.0, 0.0
    for bound, count in zip(bounds, counts):
        if count >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = bound, count
    return lower


def run(client, model, streams, constrained, max_tokens):
    with concurrent.futures.ThreadPoolExecutor(streams) as pool:
        results = list(pool.map(lambda t: stream_rate(client, model, t, constrained, max_tokens),
                                TOPICS[:streams] if streams > 1 else TOPICS[:4]))
    chunks = sum(n - 1 for n, _ in results)
    if streams == 1:
        return chunks / sum(s for _, s in results)
    return chunks / max(s for _, s in results)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--max-tokens", type=int, default=96)
    args = ap.parse_args()
    model = os.path.basename(args.model)[:-len(".gguf")]
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(args.cli, args.model, tmp)
        try:
            client = openai.OpenAI(base_url=f"http://{cluster.http}/v1", api_key="none", max_retries=0)
            stream_rate(client, model, "warm-up", True, 8)  # compiles the schema once
            rows = []
            for streams in (1, 16):
                plain = run(client, model, streams, False, args.max_tokens)
                hist = "kvfleet_worker_grammar_mask_seconds"
                before = buckets(cluster.worker_metrics, hist)
                masks0 = metric(cluster.worker_metrics, hist + "_count")
                secs0 = metric(cluster.worker_metrics, hist + "_sum")
                wait0 = metric(cluster.worker_metrics, "kvfleet_worker_grammar_mask_wait_seconds_total")
                constrained = run(client, model, streams, True, args.max_tokens)
                after = buckets(cluster.worker_metrics, hist)
                masks = metric(cluster.worker_metrics, hist + "_count") - masks0
                secs = metric(cluster.worker_metrics, hist + "_sum") - secs0
                wait = metric(cluster.worker_metrics, "kvfleet_worker_grammar_mask_wait_seconds_total") - wait0
                rows.append((streams, plain, constrained, 1e3 * quantile(0.5, before, after),
                             1e3 * quantile(0.99, before, after), 1e3 * secs / max(masks, 1),
                             100 * (1 - wait / secs) if secs > 0 else float("nan")))
            compiles = metric(cluster.worker_metrics, "kvfleet_worker_grammar_compiles_total")
            hits = metric(cluster.worker_metrics, "kvfleet_worker_grammar_cache_hits_total")
        finally:
            cluster.stop()
    print(f"\nstructured output, {model}, 2 threads (decode rate: chunks after the first / time first→last)")
    print("| streams | unconstrained tok/s | json_schema tok/s | ratio | mask ms p50 | p99 | mean "
          "| mask time hidden by the forward pass |")
    print("|---|---|---|---|---|---|---|---|")
    for streams, plain, constrained, p50, p99, mean, hidden in rows:
        print(f"| {streams} | {plain:.1f} | {constrained:.1f} | {constrained / plain:.2f}x | {p50:.3f} | {p99:.3f} "
              f"| {mean:.3f} | {hidden:.0f}% |")
    print(f"schema compiles: {compiles:.0f}, cache hits: {hits:.0f} (one schema, every request after the first a hit)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
