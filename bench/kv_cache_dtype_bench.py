#!/usr/bin/env python3
"""What an 8-bit KV cache buys and costs on the CPU: KV tokens per GiB
(the executor's own bytes per token, scales and padding included) and
decode tokens/s at a long context, float16 vs int8 vs FP8 E4M3, from one
run (`kvfleet bench-model`, the formats interleaved round by round so the
machine's drift hits them alike). Accuracy is bench/activation_accuracy.py's
(--modes f32,f32+kv-int8,f32+kv-fp8_e4m3).

The targets: tokens per GiB with 8-bit at least 1.9x float16's; decode at
a 4,000-token context no slower than float16.

  bench/kv_cache_dtype_bench.py --kvfleet build/tools/kvfleet/kvfleet --model models/qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = ("f16", "int8", "fp8_e4m3")


def bench(binary, model, dtype, context, gen, threads):
    cmd = [binary, "bench-model", "--model", model, "--device", "cpu", "--threads", str(threads),
           "--prompt-tokens", str(context), "--gen-tokens", str(gen), "--repeats", "1", "--kv-cache-dtype", dtype]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvfleet", default=os.path.join(REPO, "build", "tools", "kvfleet", "kvfleet"))
    ap.add_argument("--model", default=os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--context", type=int, default=4000)
    ap.add_argument("--gen-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    decode = {d: [] for d in DTYPES}
    per_token = {}
    for r in range(args.rounds):
        for d in DTYPES if r % 2 == 0 else reversed(DTYPES):
            out = bench(args.kvfleet, args.model, d, args.context, args.gen_tokens, args.threads)
            decode[d].append(out["decode_tokens_per_s"])
            per_token[d] = out["kv_bytes_per_token"]
            print(f"round {r + 1}: {d:<9} decode {out['decode_tokens_per_s']:.2f} tok/s", flush=True)
    print(f"\n{os.path.basename(args.model)}, {args.context}-token context, {args.gen_tokens} decoded, "
          f"{args.threads} threads, median of {args.rounds} rounds")
    print("| KV format | bytes per token | tokens per GiB | vs f16 | decode tok/s | vs f16 |")
    print("|---|---|---|---|---|---|")
    base_tokens = (1 << 30) / per_token["f16"]
    base_decode = statistics.median(decode["f16"])
    for d in DTYPES:
        tokens = (1 << 30) / per_token[d]
        rate = statistics.median(decode[d])
        print(f"| {d} | {per_token[d]:,} | {tokens:,.0f} | {tokens / base_tokens:.2f}x | {rate:.2f} | "
              f"{rate / base_decode:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
