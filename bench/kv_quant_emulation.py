"""How close an 8-bit KV cache can come to float16 on the greedy-agreement
bar, emulated in the numpy reference (tests/reference/llama_numpy.py,
float64): the same 24 chat-rendered prompts as activation_accuracy.py, 32
greedy tokens each, compared token for token with the reference's own
float16-cache continuation.

Formats (per (token, KV head) row, as kvfleet stores int8):
  int8           x / (max|x| / 127), rounded half to even, binary16 scale
  int8-rotated   the same after an orthogonal Hadamard rotation of K and of
                 V (undone on read; q.k is unchanged by rotating both)
  int8-rotated-32  rotated, with a scale per 32 values instead of per row

Per prompt it prints each format's agreement, the smallest top-two logit
margin along the reference's continuation (a near tie any perturbation of
that size flips) and each format's largest logit shift at the first step.

  .venv/bin/python bench/kv_quant_emulation.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf   # ~8 min
"""
import argparse
import os
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "reference"))
sys.path.insert(0, os.path.join(REPO, "bench"))
import activation_accuracy as aa  # noqa: E402
import llama_numpy as ln  # noqa: E402


def hadamard(n):
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    if h.shape[0] != n:
        raise ValueError(f"head_dim {n} is not a power of two")
    return h / np.sqrt(n)


def int8_rows(x, group=0):
    """x quantized per last-axis row as kvfleet's int8 KV does (or per
    `group` values of it), decoded."""
    x = np.asarray(x, np.float64)
    if group:
        return int8_rows(x.reshape(*x.shape[:-1], -1, group)).reshape(x.shape)
    scale = (np.max(np.abs(x), axis=-1, keepdims=True) / 127.0).astype(np.float16).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(scale > 0, np.clip(np.rint(x / scale), -127, 127), 0)
    return q * scale


def f16(k, v):
    return k.astype(np.float16).astype(np.float64), v.astype(np.float16).astype(np.float64)


def int8(k, v):
    return int8_rows(k), int8_rows(v)


def int8_rotated(k, v):
    h = hadamard(k.shape[-1])
    return int8_rows(k @ h) @ h.T, int8_rows(v @ h) @ h.T


def int8_rotated_32(k, v):
    h = hadamard(k.shape[-1])
    return int8_rows(k @ h, 32) @ h.T, int8_rows(v @ h, 32) @ h.T


FORMATS = {"int8": int8, "int8-rotated": int8_rotated, "int8-rotated-32": int8_rotated_32}


class EmulatedCache(ln.LlamaReference):
    fmt = staticmethod(f16)

    def kv_round(self, k, v):
        return self.fmt(k, v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--formats", default="int8,int8-rotated")
    ap.add_argument("--prompts", type=int, default=len(aa.PROMPTS))
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--tokenize-dump", default=os.path.join(REPO, "build", "tests", "reference", "tokenize_dump"))
    args = ap.parse_args()
    formats = args.formats.split(",")
    ref = EmulatedCache(args.model, np.float64)
    reader = ln.GGUFReader(args.model)
    encode = aa.encoder_for(reader, args.model, args.tokenize_dump)
    same = {f: 0 for f in formats}
    start = time.time()
    for text in aa.PROMPTS[: args.prompts]:
        ids = encode(ln.chat_prompt(reader, text))
        ref.fmt = f16
        base, base_logits = ref.greedy(ids, args.tokens)
        top2 = np.sort(base_logits, axis=1)[:, -2:]
        margin = top2[:, 1] - top2[:, 0]
        row = [f"min margin {margin.min():.4f} at {margin.argmin():2d}"]
        for f in formats:
            ref.fmt = FORMATS[f]
            out, logits = ref.greedy(ids, args.tokens)
            agree = aa.agreement(out, base)
            same[f] += agree == args.tokens
            row.append(f"{f} {agree:2d}/{args.tokens} (shift {np.abs(logits[0] - base_logits[0]).max():.3f})")
        print(f"{time.time() - start:5.0f} s  " + "  ".join(row) + f"  {text[:40]}", flush=True)
    n = min(args.prompts, len(aa.PROMPTS))
    print(f"\n{n} prompts, {args.tokens} greedy tokens, identical to the float16-cache reference:")
    for f in formats:
        print(f"  {f:<14} {same[f]:2d} of {n}")


if __name__ == "__main__":
    main()
