#!/usr/bin/env python3
"""CPU throughput of kvfleet against llama.cpp on the same GGUF, same machine, same run.

For each thread count it measures, for both engines:
  prefill: tokens/s evaluating one prompt of --prompt-tokens tokens in one batch;
  decode:  tokens/s generating --gen-tokens tokens greedily, one at a time,
           after that prompt (each step: one forward pass + argmax).
Each number is the median of --repeats runs (after one warm-up run per engine
and thread count). kvfleet runs once per --cpu-activations mode (float32 and
8-bit activations by default), each written ACT[+KV][@ISA]: f32 or q8,
optionally a KV format (q8+int8_rotated; f16 otherwise) and the 8-bit
kernels' instruction set (q8@avx2: the AVX2 kernels on a CPU that has
AVX-512 VNNI, so both sets are measured on one machine). Per thread count, `kvfleet bench-model
--ceilings` also measures the machine (read bandwidth, float32 FMA and int8
dot throughput) and each figure is printed as a share of the rate those
allow: decode against the lower of the bandwidth bound (every weight read
once per token) and the compute bound; prefill against the compute bound of
its arithmetic (two flops per weight for float32 activations, one int8
multiply-add for 8-bit ones). kvfleet is measured through `kvfleet bench-model`, which
prints one JSON line {"prefill_tokens_per_s": x, "decode_tokens_per_s": y};
llama.cpp through llama-cpp-python's Llama (scripts/setup.sh --with-benchmarks installs
it): prefill = Llama.eval(prompt) with n_batch >= prompt, decode = eval of
one token at a time with the argmax of the last logits.

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
DEFAULT_KVFLEET = os.path.join(REPO, "build", "tools", "kvfleet", "kvfleet")

_TEXT = (
    "The old lighthouse stood at the end of a narrow spit of rock, and for a hundred "
    "years its keepers had written the weather into a leather book every evening. "
    "When the light was automated, the last keeper carried the books up the hill to "
    "the village library, where they sat on a shelf until a student of climate found "
    "them. She counted the storms, the fogs and the calm days, decade by decade, and "
    "drew a chart that surprised everyone: the winters had grown wetter, the summers "
    "windier, and the number of clear days had fallen by a third. "
)


def mode_flags(mode):
    """bench-model's flags for a mode written ACT[+KV][@ISA]."""
    rest, _, isa = mode.partition("@")
    activations, _, kv = rest.partition("+")
    flags = ["--cpu-activations", activations, "--kv-cache-dtype", kv or "f16"]
    return flags + (["--q8-isa", isa] if isa else [])


def bench_model(binary, model, threads, prompt_tokens, gen_tokens, mode, extra=()):
    cmd = [binary, "bench-model", "--model", model, "--threads", str(threads),
           "--prompt-tokens", str(prompt_tokens), "--gen-tokens", str(gen_tokens),
           "--repeats", "1", *mode_flags(mode), *extra]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited {p.returncode}: {p.stderr[-1000:]}")
    for line in reversed(p.stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"`{' '.join(cmd)}` printed no JSON line: {p.stdout[-500:]}")


def kvfleet_once(binary, model, threads, prompt_tokens, gen_tokens, mode):
    # One run per call: the median is taken over separate processes.
    r = bench_model(binary, model, threads, prompt_tokens, gen_tokens, mode)
    return float(r["prefill_tokens_per_s"]), float(r["decode_tokens_per_s"])


def ceilings(binary, model, threads, isa):
    """The machine's limits on `threads` threads, as tokens/s of this model;
    the int8 one on `isa` (None: the best this CPU has)."""
    r = bench_model(binary, model, threads, 16, 2, f"f32@{isa}" if isa else "f32", ("--ceilings",))
    weights = float(r["weight_bytes_per_token"])
    # bench-model reports the decode bounds; the int8 one follows from the
    # float32 one: 2 flops per weight against one int8 multiply-add.
    flops_per_token = float(r["fma_gflops"]) * 1e9 / float(r["decode_compute_bound"])
    macs_per_token = flops_per_token / 2
    return {"read_gb_per_s": r["read_gb_per_s"], "fma_gflops": r["fma_gflops"],
            "int8_gmacs": r["int8_gmacs"], "int8_isa": r["int8_isa"], "weight_bytes_per_token": weights,
            "bandwidth_bound": float(r["decode_bandwidth_bound"]),
            "f32_compute_bound": float(r["decode_compute_bound"]),
            "q8_compute_bound": float(r["int8_gmacs"]) * 1e9 / macs_per_token}


class LlamaCpp:
    def __init__(self, model, threads, prompt_tokens, gen_tokens):
        import llama_cpp
        import numpy as np
        from llama_cpp import Llama

        self.np, self.lib = np, llama_cpp
        n_ctx = prompt_tokens + gen_tokens + 16
        self.llm = Llama(model_path=model, n_ctx=n_ctx, n_batch=max(prompt_tokens, 32),
                         n_ubatch=max(prompt_tokens, 32), n_threads=threads,
                         n_threads_batch=threads, logits_all=False, verbose=False)
        text = _TEXT
        ids = self.llm.tokenize(text.encode(), add_bos=False, special=False)
        while len(ids) < prompt_tokens:
            text += _TEXT
            ids = self.llm.tokenize(text.encode(), add_bos=False, special=False)
        self.prompt = ids[:prompt_tokens]
        self.gen_tokens = gen_tokens
        self.n_vocab = self.llm.n_vocab()

    def once(self):
        llm, np = self.llm, self.np
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(self.prompt)
        t1 = time.perf_counter()
        for _ in range(self.gen_tokens):
            # Llama.eval keeps no logits unless logits_all; read the last row.
            last = self.lib.llama_get_logits_ith(llm.ctx, -1)
            tok = int(np.argmax(np.ctypeslib.as_array(last, shape=(self.n_vocab,))))
            llm.eval([tok])
        t2 = time.perf_counter()
        return len(self.prompt) / (t1 - t0), self.gen_tokens / (t2 - t1)


def median_of(fn, repeats):
    fn()  # warm-up
    runs = [fn() for _ in range(repeats)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def fmt(x):
    return "n/a" if x is None else f"{x:,.1f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvfleet", default=DEFAULT_KVFLEET)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cpu-activations", default="f32,q8",
                    help="comma-separated kvfleet modes, each ACT[+KV][@ISA]: q8+int8_rotated, q8@avx2")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)
    modes = args.cpu_activations.split(",")

    if not os.path.exists(args.model):
        print(f"model {args.model} not found: run scripts/fetch_model.sh", file=sys.stderr)
        return 1
    threads = [int(t) for t in args.threads.split(",")]
    # The int8 ceiling of the instruction set the modes force, when they all
    # force the same one (q8@avx2 on an AVX-512 machine); else the best.
    forced = {m.partition("@")[2] or None for m in modes}
    isa = forced.pop() if len(forced) == 1 else None
    results = []
    for n in threads:
        row = {"threads": n}
        try:
            row["ceilings"] = ceilings(args.kvfleet, args.model, n, isa)
        except (OSError, RuntimeError) as e:
            print(f"ceilings, {n} threads: {e}", file=sys.stderr)
            row["ceilings"] = None
        for mode in modes:
            try:
                row[f"kvfleet {mode}"] = median_of(lambda: kvfleet_once(
                    args.kvfleet, args.model, n, args.prompt_tokens, args.gen_tokens, mode), args.repeats)
            except (OSError, RuntimeError) as e:
                print(f"kvfleet {mode}, {n} threads: {e}", file=sys.stderr)
                row[f"kvfleet {mode}"] = (None, None)
        try:
            engine = LlamaCpp(args.model, n, args.prompt_tokens, args.gen_tokens)
            row["llama.cpp"] = median_of(engine.once, args.repeats)
            del engine
        except ImportError:
            print("llama_cpp is not installed: run scripts/setup.sh --with-benchmarks", file=sys.stderr)
            row["llama.cpp"] = (None, None)
        results.append(row)

    print(f"\n{os.path.basename(args.model)}: prefill {args.prompt_tokens} tokens, decode "
          f"{args.gen_tokens} tokens, median of {args.repeats}")
    for row in results:
        c = row["ceilings"]
        if c:
            print(f"{row['threads']} threads: read {c['read_gb_per_s']:.1f} GB/s, float32 FMA "
                  f"{c['fma_gflops']:.0f} GFLOP/s, int8 {c['int8_gmacs']:.0f} GMAC/s ({c['int8_isa']}); "
                  f"{c['weight_bytes_per_token'] / 1e6:.1f} MB of weights per token: bounds "
                  f"{c['bandwidth_bound']:.0f} tok/s (bandwidth), {c['f32_compute_bound']:.0f} (float32 "
                  f"compute), {c['q8_compute_bound']:.0f} (int8 compute)")
    print(f"{'threads':>7}  {'phase':<8} {'engine':<22} {'tok/s':>9} {'vs llama.cpp':>13} {'of ceiling':>11}")
    for row in results:
        c = row["ceilings"]
        for i, phase in enumerate(("prefill", "decode")):
            base = row["llama.cpp"][i]
            for name in [f"kvfleet {m}" for m in modes] + ["llama.cpp"]:
                a = row[name][i]
                ratio = f"{a / base:.2f}x" if a and base else "n/a"
                share = "n/a"
                if a and c:
                    # llama.cpp's CPU path quantizes activations to 8 bits too.
                    q8 = name == "llama.cpp" or mode_flags(name.split(" ", 1)[1])[1] == "q8"
                    compute = c["q8_compute_bound"] if q8 else c["f32_compute_bound"]
                    bound = min(c["bandwidth_bound"], compute) if phase == "decode" else compute
                    share = f"{a / bound:.0%}"
                print(f"{row['threads']:>7}  {phase:<8} {name:<22} {fmt(a):>9} {ratio:>13} {share:>11}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": os.path.basename(args.model), "prompt_tokens": args.prompt_tokens,
                       "gen_tokens": args.gen_tokens, "repeats": args.repeats, "modes": modes,
                       "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
