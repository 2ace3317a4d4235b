#!/usr/bin/env python3
"""Every CPU mode of a model against its exact path, by `kvfleet eval`.

Runs the f32 path with --save-reference, then each other mode (8-bit
activations, each 8-bit KV format, both together) with --reference on the
same text and windows, and prints one table: perplexity with its standard
error, mean / median / p99 / max KL divergence from f32, same top token,
RMS delta p, and the evaluation's own speed. Not run in CI.

  bench/eval_modes.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf --text docs/design.md --ctx 256
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

MODES = [
    ("f32", []),
    ("q8 activations", ["--cpu-activations", "q8"]),
    ("int8 KV", ["--kv-cache-dtype", "int8"]),
    ("int8_rotated KV", ["--kv-cache-dtype", "int8_rotated"]),
    # Its key channel scales come from the model's calibration record.
    ("int8_rotated_scaled KV", ["--kv-cache-dtype", "int8_rotated_scaled"]),
    ("fp8_e4m3 KV", ["--kv-cache-dtype", "fp8_e4m3"]),
    ("q8 + int8 KV", ["--cpu-activations", "q8", "--kv-cache-dtype", "int8"]),
]


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    return out.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvfleet", default="build/tools/kvfleet/kvfleet")
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--max-windows", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    base = [args.kvfleet, "eval", "--model", args.model, "--text", args.text, "--ctx", str(args.ctx),
            "--threads", str(args.threads), "--max-windows", str(args.max_windows)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ref = os.path.join(tmp, "f32.ref")
        for name, flags in MODES:
            if "int8_rotated_scaled" in flags and not os.path.exists(args.model + ".calibration.json"):
                print(f"{name}: skipped, no calibration record beside the model to take its scales from",
                      file=sys.stderr)
                continue
            extra = ["--save-reference", ref] if name == "f32" else ["--reference", ref]
            out = run(base + flags + extra)
            head = re.search(r"(\d+) positions scored, ([\d.]+) tokens/s", out)
            ppl = re.search(r"perplexity ([\d.]+) \+/- ([\d.]+)", out)
            kl = re.search(r"mean ([\d.e+-]+), median ([\d.e+-]+), p99 ([\d.e+-]+), max ([\d.e+-]+)", out)
            top = re.search(r"same top token ([\d.]+)%, RMS delta p ([\d.e+-]+)", out)
            rows.append((name, ppl.group(1), ppl.group(2), kl.groups() if kl else ("0",) * 4,
                         top.groups() if top else ("100", "0"), head.group(1), head.group(2)))
    print(f"{os.path.basename(args.model)}, {os.path.basename(args.text)}, windows of {args.ctx}, "
          f"{rows[0][5]} positions; KL from the f32 path (its own saved distributions)")
    print("| mode | perplexity | mean KL | median KL | p99 KL | max KL | same top-1 | RMS Δp | eval tok/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, p, e, kl, top, _, speed in rows:
        kls = " | ".join(f"{float(v):.3g}" for v in kl)
        print(f"| {name} | {float(p):.4f} ± {float(e):.4f} | {kls} | {float(top[0]):.2f}% | {float(top[1]):.3g} | "
              f"{float(speed):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
