#!/usr/bin/env python3
"""Sliding-window layers freeing the KV pages their window has passed, live:
`kvfleet up` (real router, cachemanager and worker over gRPC) on Gemma 3
270M (15 of its 18 layers on a 512-token window), the same KV budget with
window pages freed (the default) and kept (--keep-window-blocks), measured
in one run.

Several conversations of about 2,000 tokens arrive at once. With every
block kept, the budget holds about one of them, so the others wait or are
preempted and recomputed; with window pages freed each holds about a third
as much. Printed: tokens per second, preemptions, the worker's peak pages
in use per running conversation against what keeping every block takes,
and whether both runs gave the same text (they must: freeing changes
capacity, never tokens).

  bench/window_pages_bench.py --cli build/tools/kvfleet/kvfleet --model models/gemma-3-270m.Q4_K_M.gguf
"""
import argparse
import concurrent.futures
import os
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration", "clients"))
import openai  # noqa: E402
from kvfleet_up import Cluster  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from kv_tiers_bench import ask, metric, passage  # noqa: E402


def run(cli, model_path, model, tmp, keep, conversations, words, budget):
    extra = ("--keep-window-blocks",) if keep else ()
    cluster = Cluster(cli, model_path, os.path.join(tmp, f"logs-{'kept' if keep else 'freed'}"),
                      kv_cache_memory=budget, extra=extra)
    peak = {"used": 0.0, "running": 0.0}
    stop = threading.Event()

    def sample():  # the most pages in use, and the most requests running, at once
        while not stop.is_set():
            peak["used"] = max(peak["used"], metric(cluster.worker_metrics, "kvfleet_worker_kv_blocks",
                                                    '{state="used"}'))
            peak["running"] = max(peak["running"], metric(cluster.worker_metrics, "kvfleet_worker_requests_running"))
            time.sleep(0.05)

    try:
        client = openai.OpenAI(base_url=f"http://{cluster.http}/v1", api_key="none", max_retries=0)
        ask(client, model, "warm up", 2)
        total = metric(cluster.worker_metrics, "kvfleet_worker_kv_blocks_total")
        sampler = threading.Thread(target=sample)
        sampler.start()
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(conversations) as pool:
            results = list(pool.map(lambda s: ask(client, model, passage(s, words), 32), range(1, conversations + 1)))
        seconds = time.perf_counter() - start
        stop.set()
        sampler.join()
        preemptions = metric(cluster.worker_metrics, "kvfleet_worker_preemptions_total")
    finally:
        stop.set()
        cluster.stop()
    prompt_tokens = conversations * words  # about a token a word
    return {"tokens_per_s": (prompt_tokens + sum(c for _, _, c in results)) / seconds, "seconds": seconds,
            "preemptions": preemptions, "peak_used": peak["used"], "peak_running": peak["running"], "total": total,
            "texts": [t for _, t, _ in results]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True, help="a sliding-window model (Gemma 3)")
    ap.add_argument("--conversations", type=int, default=4)
    ap.add_argument("--words", type=int, default=1800, help="words per conversation (about a token each)")
    ap.add_argument("--kv-cache-memory", default="64MiB")
    args = ap.parse_args()
    model = os.path.splitext(os.path.basename(args.model.rstrip("/")))[0]
    with tempfile.TemporaryDirectory() as tmp:
        kept = run(args.cli, args.model, model, tmp, True, args.conversations, args.words, args.kv_cache_memory)
        freed = run(args.cli, args.model, model, tmp, False, args.conversations, args.words, args.kv_cache_memory)
    for name, r in (("kept", kept), ("freed", freed)):
        # Both caches have the same bytes, so a page's share is 1 / total.
        print(f"{name:5s}: {r['tokens_per_s']:8.1f} tokens/s ({r['seconds']:.1f} s), {r['preemptions']:.0f} "
              f"preemptions, at most {r['peak_running']:.0f} running at once, peak {r['peak_used']:.0f} of "
              f"{r['total']:.0f} pages in use ({100 * r['peak_used'] / max(r['total'], 1):.0f}% of the budget)")
    print(f"throughput freed / kept: {freed['tokens_per_s'] / kept['tokens_per_s']:.2f}x")
    same = freed["texts"] == kept["texts"]
    print(f"same text with window pages freed and kept: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
