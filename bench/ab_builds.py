#!/usr/bin/env python3
"""Two builds of kvfleet, before and after a change, on the same CPU benchmarks in one run.

Runs, alternating A and B in every round so that machine noise hits both alike:
  kvfleet bench-model   single-stream prefill and decode tokens/s (what
                        bench/cpu_vs_llamacpp.py measures for kvfleet);
  engine_bench aggregate-decode
                        aggregate decode tokens/s at each --streams count.
Prints, per figure, the median of --rounds runs for each build, B/A, and
the range of the rounds' own B/A (each round runs A and B back to back).

  bench/ab_builds.py --a /tmp/before --b build [--rounds 5] [--threads 2]
                     [--cpu-activations f32|q8] [--model PATH] [--streams 1,8,16]

--a and --b are either build trees (build/tools/kvfleet/kvfleet and
build/bench/engine_bench) or directories holding the two binaries. Not part
of CI; see bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DEFAULT_MODEL = os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def binary(root: str, name: str) -> str:
    for rel in (os.path.join("tools", "kvfleet", name), os.path.join("bench", name), name):
        path = os.path.join(root, rel)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise SystemExit(f"{name} not found under {root}")


def json_lines(cmd: list[str]) -> list[dict]:
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` exited {p.returncode}: {p.stderr[-800:]}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip().startswith("{")]


def mode_flags(activations: str) -> list[str]:
    return ["--cpu-activations", activations] if activations else []


def bench_model(root: str, model: str, threads: int, prompt: int, gen: int, activations: str) -> dict[str, float]:
    (r,) = json_lines([binary(root, "kvfleet"), "bench-model", "--model", model, "--threads", str(threads),
                       "--prompt-tokens", str(prompt), "--gen-tokens", str(gen), "--repeats", "1"] +
                      mode_flags(activations))
    return {"prefill tok/s (1 stream)": r["prefill_tokens_per_s"], "decode tok/s (1 stream)": r["decode_tokens_per_s"]}


def aggregate_decode(root: str, model: str, threads: int, streams: str, activations: str) -> dict[str, float]:
    rows = json_lines([binary(root, "engine_bench"), "aggregate-decode", "--model", model, "--threads",
                       str(threads), "--streams", streams, "--repeats", "1"] + mode_flags(activations))
    return {f"aggregate decode tok/s ({r['streams']} streams)": r["decode_tokens_per_s"] for r in rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="the baseline build (before)")
    ap.add_argument("--b", required=True, help="the build under test (after)")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--streams", default="1,8,16")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--cpu-activations", default="", choices=["", "f32", "q8"],
                    help="the activation mode of both builds (default: the model's own choice)")
    ap.add_argument("--skip-single", action="store_true", help="aggregate decode only, no bench-model")
    args = ap.parse_args(argv)

    samples: dict[str, dict[str, list[float]]] = {"a": {}, "b": {}}
    for r in range(args.rounds):
        # A then B on odd rounds, B then A on even ones: neither always runs first.
        order = ("a", "b") if r % 2 == 0 else ("b", "a")
        for which in order:
            root = getattr(args, which)
            figures = {} if args.skip_single else bench_model(root, args.model, args.threads, args.prompt_tokens,
                                                              args.gen_tokens, args.cpu_activations)
            figures.update(aggregate_decode(root, args.model, args.threads, args.streams, args.cpu_activations))
            for k, v in figures.items():
                samples[which].setdefault(k, []).append(v)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    mode = f", --cpu-activations {args.cpu_activations}" if args.cpu_activations else ""
    print(f"\n{os.path.basename(args.model)}, {args.threads} threads{mode}, median of {args.rounds} alternated rounds")
    print(f"A = {args.a}\nB = {args.b}")
    print(f"{'figure':<38} {'A':>10} {'B':>10} {'B/A':>7}   B/A round by round (min-max)")
    for k in samples["a"]:
        a, b = statistics.median(samples["a"][k]), statistics.median(samples["b"][k])
        # Each round ran A and B back to back: their ratio's spread is the noise.
        ratios = [y / x for x, y in zip(samples["a"][k], samples["b"][k])]
        print(f"{k:<38} {a:>10.1f} {b:>10.1f} {b / a:>6.3f}x   {min(ratios):.3f}-{max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
