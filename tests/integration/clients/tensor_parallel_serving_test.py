#!/usr/bin/env python3
"""A model split across tensor-parallel ranks, served end to end.

`kvfleet up --tensor-parallel 3` starts the real router, cachemanager and a
worker whose executor runs the default model (9 query heads, 3 KV heads)
as three ranks meeting at the layer sequences' collectives (on the CPU,
in turn). The official `openai` client asks for greedy completions.
Checked:
- the worker reports the split in its numerics identity (`+tp3`), in the
  mode `generate --local` runs (float32 activations, float16 KV);
- each completion, whole and streamed, equals `kvfleet generate --local
  --tensor-parallel 3` on the same prompt (ids detokenized by the router);
- the same prompts sent at once (batched in one engine step) give the same
  text as alone, and a second run hits the prefix cache with the same text;
- a degree the model cannot split is refused at start, naming the degrees
  that can.

  tensor_parallel_serving_test.py --cli kvfleet --model SmolLM2.gguf
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import tempfile

import httpx2 as httpx  # the HTTP library the openai package is built on
import openai

from kvfleet_up import Failure, check, detokenized, local_greedy_ids, run_against_cluster

DEGREE = 3
PROMPTS = ["The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. Once upon a "
           "time, in a small village by the sea, there lived an old fisherman who",
           "The capital of France is",
           "def fibonacci(n):\n    "]
TOKENS = 16


def checks(cli, model):
    def run(cluster):
        metrics = httpx.get(cluster.worker_metrics).text
        info = [l for l in metrics.splitlines() if l.startswith("kvfleet_worker_device_info")]
        check(info and f'+tp{DEGREE}"' in info[0], f"the worker's numerics do not name the split: {info}")
        print(f"  {info[0]}")
        client = openai.OpenAI(base_url=f"http://{cluster.http}/v1", api_key="none", max_retries=0)
        name = client.models.list().data[0].id

        def complete(prompt, stream=False):
            ask = dict(model=name, prompt=prompt, max_tokens=TOKENS, temperature=0, extra_body={"ignore_eos": True})
            if stream:
                return "".join(c.choices[0].text for c in client.completions.create(**ask, stream=True) if c.choices)
            return client.completions.create(**ask).choices[0].text

        expected = {p: detokenized(cluster.http, local_greedy_ids(cli, model, p, TOKENS, ("--tensor-parallel", str(DEGREE))))
                    for p in PROMPTS}
        for p in PROMPTS:
            whole, streamed = complete(p), complete(p, stream=True)
            check(whole == expected[p], f"{p!r}: served {whole!r}, local {expected[p]!r}")
            check(streamed == expected[p], f"{p!r}: streamed {streamed!r}, local {expected[p]!r}")
            print(f"  {p[:30]!r}... -> {whole!r}: equal to the local run at {DEGREE} ranks, whole and streamed")
        with concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as pool:
            together = list(pool.map(complete, PROMPTS))
        for p, text in zip(PROMPTS, together):
            check(text == expected[p], f"{p!r} batched with the others: {text!r}, alone {expected[p]!r}")
        print(f"  {len(PROMPTS)} prompts at once: the same text as alone")
    return run


def refused_degree(cli, model):
    """4 ranks cannot split 3 KV heads (nor replicate them evenly): refused
    before anything runs, naming the degrees that can."""
    out = subprocess.run([cli, "generate", "--local", "--model", model, "--prompt", "Hi", "--max-tokens", "1",
                          "--tensor-parallel", "4"], capture_output=True, text=True)
    check(out.returncode != 0, "4 ranks of a model with 3 KV heads and 9 query heads was not refused")
    check("Degrees that can" in out.stderr, f"the refusal names no degree that works: {out.stderr[-500:]}")
    print(f"  --tensor-parallel 4 refused: {out.stderr.strip().splitlines()[-1][:160]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True)
    args = ap.parse_args()
    if not os.path.exists(args.model):
        print(f"skipped: {args.model} not found (scripts/fetch_model.sh)")
        return 77
    with tempfile.TemporaryDirectory(prefix="kvfleet_tp_serving_") as tmp:
        try:
            refused_degree(args.cli, args.model)
        except Failure as e:
            print(f"FAILED: {e}")
            return 1
        return run_against_cluster(args.cli, args.model, os.path.join(tmp, "logs"), checks(args.cli, args.model),
                                   extra=("--tensor-parallel", str(DEGREE), "--cpu-activations", "f32",
                                          "--kv-cache-dtype", "f16"))


if __name__ == "__main__":
    sys.exit(main())
