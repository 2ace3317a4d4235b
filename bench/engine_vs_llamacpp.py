#!/usr/bin/env python3
"""Aggregate decode throughput of kvfleet's engine against llama.cpp for N concurrent streams, same run.

For each N in --streams, both engines take N sequences with prompts of --prompt-tokens random
token ids, prefill them together in one batch, then decode --gen-tokens tokens per sequence
greedily (argmax, no stop tokens), one batch of N tokens per step. Only the decode steps after
the first token are timed: aggregate decode tokens/s = N * (gen - 1) / their wall time. Each
figure is the median of --repeats runs after one warm-up run.

kvfleet: `engine_bench aggregate-decode`, which drives the continuous-batching Engine over the
CPU executor and prints one JSON line per N; once per --cpu-activations mode (float32 and 8-bit
activations by default).
llama.cpp: llama-cpp-python's low-level batch API in this process: one context per N with
n_seq_max = N, one seq_id per stream, llama_batch_init / llama_decode, logits for the last
token of each stream only, the KV cache cleared between runs (scripts/setup.sh --with-benchmarks installs it).

Not part of CI. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DEFAULT_MODEL = os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
DEFAULT_ENGINE_BENCH = os.path.join(REPO, "build", "bench", "engine_bench")
NOISE_NOTE = ("Wall-clock figures from a shared, noisy 2-core machine: "
              "compare the ratios, not the absolute numbers.")


def load_average():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3]) + f" on {os.cpu_count()} cores"
    except OSError:
        return "unknown"


def kvfleet_rates(binary, model, streams, threads, prompt_tokens, gen_tokens, repeats, seed, activations):
    cmd = [binary, "aggregate-decode", "--model", model, "--streams", ",".join(map(str, streams)),
           "--threads", str(threads), "--prompt-tokens", str(prompt_tokens),
           "--gen-tokens", str(gen_tokens), "--repeats", str(repeats), "--seed", str(seed),
           "--cpu-activations", activations.partition("+")[0],
           "--kv-cache-dtype", activations.partition("+")[2] or "f16"]
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited {p.returncode}: {p.stderr[-1000:]}")
    rates = {}
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith("#"):
            print(line, flush=True)  # engine_bench's own summary lines
        if line.startswith("{"):
            r = json.loads(line)
            rates[int(r["streams"])] = float(r["decode_tokens_per_s"])
    if set(rates) != set(streams):
        raise RuntimeError(f"`{' '.join(cmd)}` printed rates for {sorted(rates)}, wanted {streams}")
    return rates


class LlamaCppBatch:
    """N streams through llama_decode: one seq_id per stream."""

    def __init__(self, model_path, threads):
        import llama_cpp
        import numpy as np
        from llama_cpp import _logger

        _logger.set_verbose(False)  # llama.cpp's own logging: errors only
        self.lib, self.np = llama_cpp, np
        llama_cpp.llama_backend_init()
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = 0
        self.model = llama_cpp.llama_model_load_from_file(model_path.encode(), mparams)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {model_path}")
        vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
        self.threads = threads

    def close(self):
        self.lib.llama_model_free(self.model)

    def rate(self, streams, prompt_tokens, gen_tokens, repeats, rng):
        lib, np = self.lib, self.np
        cparams = lib.llama_context_default_params()
        # Each stream needs prompt + gen positions; llama.cpp rounds the context up and, with
        # kv_unified off (the default), gives each sequence n_ctx / n_seq_max of it.
        cparams.n_ctx = streams * max(256, prompt_tokens + gen_tokens + 16)
        cparams.n_batch = cparams.n_ubatch = max(streams * prompt_tokens, 512)
        cparams.n_seq_max = streams
        cparams.n_threads = cparams.n_threads_batch = self.threads
        cparams.no_perf = True
        ctx = lib.llama_init_from_model(self.model, cparams)
        if not ctx:
            raise RuntimeError(f"llama.cpp could not create a context for {streams} sequences")
        batch = lib.llama_batch_init(streams * prompt_tokens, 0, 1)
        try:
            runs = [self._once(ctx, batch, streams, prompt_tokens, gen_tokens, rng)
                    for _ in range(repeats + 1)]
            return statistics.median(runs[1:]), bool(cparams.kv_unified)
        finally:
            lib.llama_batch_free(batch)
            lib.llama_free(ctx)

    def _fill(self, batch, entries):
        batch.n_tokens = len(entries)
        for i, (token, pos, seq, want_logits) in enumerate(entries):
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = 1 if want_logits else 0

    def _argmax_rows(self, ctx, rows):
        ptr = self.lib.llama_get_logits(ctx)
        logits = self.np.ctypeslib.as_array(ptr, shape=(rows, self.n_vocab))
        return [int(t) for t in logits.argmax(axis=1)]

    def _once(self, ctx, batch, streams, prompt_tokens, gen_tokens, rng):
        lib = self.lib
        lib.llama_memory_clear(lib.llama_get_memory(ctx), True)
        entries = []
        for s in range(streams):
            for p in range(prompt_tokens):
                entries.append((rng.randrange(self.n_vocab), p, s, p == prompt_tokens - 1))
        self._fill(batch, entries)
        if lib.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed on the prefill batch")
        tokens = self._argmax_rows(ctx, streams)  # outputs in batch order: one per stream
        t0 = time.perf_counter()
        for step in range(gen_tokens - 1):
            pos = prompt_tokens + step
            self._fill(batch, [(tokens[s], pos, s, True) for s in range(streams)])
            if lib.llama_decode(ctx, batch) != 0:
                raise RuntimeError(f"llama_decode failed at decode step {step}")
            tokens = self._argmax_rows(ctx, streams)
        return streams * (gen_tokens - 1) / (time.perf_counter() - t0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine-bench", default=DEFAULT_ENGINE_BENCH)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--streams", default="1,4,8,16,32", help="comma-separated stream counts")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--gen-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cpu-activations", default="f32,q8",
                    help="comma-separated kvfleet modes: f32 or q8, optionally +KV format (q8+int8_rotated)")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--target", default="f32=1.0,q8=1.5",
                    help="per mode, the aggregate-decode ratio to llama.cpp wanted at 16 streams and more (the "
                         "CPU backend's targets on Qwen2.5-Coder-1.5B Q4_K_M: float32 activations at least "
                         "llama.cpp's rate, 8-bit ones 1.5 times it; SmolLM2's was 2 for both)")
    args = ap.parse_args(argv)
    try:
        targets = {m: float(r) for m, r in (item.split("=") for item in args.target.split(","))}
    except ValueError:
        print(f"--target {args.target!r}: want MODE=RATIO[,MODE=RATIO], e.g. f32=1.0,q8=1.5", file=sys.stderr)
        return 2

    if not os.path.exists(args.model):
        print(f"model {args.model} not found: run scripts/fetch_model.sh", file=sys.stderr)
        return 1
    streams = [int(s) for s in args.streams.split(",")]
    if args.gen_tokens < 2 or args.prompt_tokens < 1 or args.repeats < 1 or min(streams) < 1:
        print("need --gen-tokens >= 2, --prompt-tokens >= 1, --repeats >= 1, streams >= 1", file=sys.stderr)
        return 2
    print(f"{NOISE_NOTE} Load average at start: {load_average()}", flush=True)
    modes = args.cpu_activations.split(",")
    kv = {}
    for mode in modes:
        try:
            kv[mode] = kvfleet_rates(args.engine_bench, args.model, streams, args.threads, args.prompt_tokens,
                                     args.gen_tokens, args.repeats, args.seed, mode)
        except (OSError, RuntimeError) as e:
            print(f"kvfleet {mode}: {e}", file=sys.stderr)
            return 1
    try:
        import random
        engine = LlamaCppBatch(args.model, args.threads)
    except ImportError:
        print("llama_cpp is not installed: run scripts/setup.sh --with-benchmarks", file=sys.stderr)
        return 1
    rng = random.Random(args.seed)
    lc, unified = {}, False
    for n in streams:
        lc[n], unified = engine.rate(n, args.prompt_tokens, args.gen_tokens, args.repeats, rng)
    engine.close()

    print(f"\nload average at the end: {load_average()}")
    print(f"{os.path.basename(args.model)}: {args.prompt_tokens}-token prompts, {args.gen_tokens} tokens "
          f"generated per stream (greedy, no stop), {args.threads} threads, median of {args.repeats} after a "
          f"warm-up; llama.cpp kv_unified={unified}")
    header = "".join(f" {'kvfleet ' + m + ' tok/s':>18} {'vs llama.cpp':>12}" for m in modes)
    print(f"{'streams':>7} {'llama.cpp tok/s':>16}{header}")
    for n in streams:
        cells = "".join(f" {kv[m][n]:>18,.1f} {kv[m][n] / lc[n]:>11.2f}x" for m in modes)
        print(f"{n:>7} {lc[n]:>16,.1f}{cells}")
    for m in modes:
        falls = [(a, b) for a, b in zip(streams, streams[1:]) if kv[m][b] < kv[m][a]]
        print(f"target, kvfleet {m} never falls as streams grow: " +
              ("met" if not falls else "MISSED (" + ", ".join(
                  f"{a}->{b} streams, {100 * (kv[m][b] / kv[m][a] - 1):+.1f}%" for a, b in falls) + ")"))
        target = targets.get(m.split("+")[0])
        for n in (n for n in streams if n >= 16 and target is not None):
            r = kv[m][n] / lc[n]
            print(f"target, kvfleet {m} >= {target:g}x llama.cpp at {n} streams: "
                  f"{'met' if r >= target else 'MISSED'} ({r:.2f}x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": os.path.basename(args.model), "threads": args.threads,
                       "prompt_tokens": args.prompt_tokens, "gen_tokens": args.gen_tokens,
                       "repeats": args.repeats,
                       "results": [{"streams": n, "llama.cpp": lc[n], **{f"kvfleet {m}": kv[m][n] for m in modes}}
                                   for n in streams]},
                      f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
