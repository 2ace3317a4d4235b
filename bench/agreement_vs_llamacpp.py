#!/usr/bin/env python3
"""Output agreement of kvfleet with llama.cpp on the same real GGUF files.

For each model and each prompt (token ids, the same for both engines: made by
the tokenizer oracle the reference tests use, BOS where the file asks):
  - greedy agreement: 32 tokens at temperature 0 from each engine, and the
    step of the first split;
  - first-token logits: NMSE = sum((a - b)^2) / sum(b^2) between the
    engines, and each engine's NMSE against the float64 numpy reference
    (tests/reference/llama_numpy.py, written from the gguf package's
    dequantization, sharing no code with either engine);
  - top-1 agreement of those first-token logits.
Every split is explained: the float64 reference's logits after the common
prefix give both candidates' values; a gap within twice the reference
tests' noise bound (2 × 2e-3 × max|logit|) is a near-tie, arithmetic rather
than a bug, and the line says which engine the reference sides with.

kvfleet runs through `kvfleet logits` and `kvfleet generate --local`;
llama.cpp through llama-cpp-python (scripts/setup.sh --with-benchmarks).
Not part of CI. See bench/README.md.

  .venv/bin/python bench/agreement_vs_llamacpp.py [--model M.gguf ...] [--tokens 32]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "reference"))
import llama_numpy  # noqa: E402
import model_reference  # noqa: E402

MODELS = [os.path.join(REPO, "models", m) for m in ("qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf",
                                                    "gemma-3-270m.Q4_K_M.gguf")]
# Beside the reference tests' texts, chats and passages: code and prose.
EXTRA_TEXTS = [
    "def quicksort(items):\n    if len(items) <= 1:\n        return items\n    pivot =",
    "SELECT name, COUNT(*) FROM orders JOIN customers ON",
    "#include <stdio.h>\n\nint main(void) {\n    printf(",
    "The mitochondria is the powerhouse of the cell because",
    "In 1969, the Apollo 11 mission",
    "To make a cup of green tea, first",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):",
    "Rust's borrow checker ensures that",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "Q: What is the boiling point of water at sea level?\nA:",
]


def nmse(a, b):
    return float(np.sum((a - b) ** 2) / np.sum(b ** 2))


class LlamaCpp:
    def __init__(self, model, threads, n_ctx):
        from llama_cpp import Llama
        self.llm = Llama(model_path=model, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                         n_batch=n_ctx, logits_all=False, verbose=False)

    def last_logits(self):
        return np.array(self.llm.eval_logits[-1], dtype=np.float64)

    def run(self, ids, n):
        """(first-token logits, n greedy tokens)."""
        self.llm.reset()
        self.llm.eval(ids)
        first = self.last_logits()
        out, logits = [], first
        for _ in range(n):
            t = int(np.argmax(logits))
            out.append(t)
            self.llm.eval([t])
            logits = self.last_logits()
        return first, out


def prompts_for(ref):
    enc = model_reference.encoder(ref)
    prompts = model_reference.real_prompts(ref, few=False, long=600 if any(ref.hp.windows) else 0)
    prompts += [(f"text {t[:30]!r}", enc(t)) for t in EXTRA_TEXTS]
    return prompts


def explain(ref, ids, common, a, b):
    """A split: kvfleet chose a, llama.cpp b after ids + common."""
    logits = ref.logits(list(ids) + common, dtype=np.float64)
    bound = 2 * model_reference.tolerance(logits)
    gap = float(logits[a] - logits[b])
    top = int(np.argmax(logits))
    sides = "kvfleet" if top == a else "llama.cpp" if top == b else f"neither (it picks {top})"
    kind = "near-tie" if abs(gap) <= bound else "NOT a near-tie"
    return (f"{kind}: reference logits {a}: {logits[a]:.4f}, {b}: {logits[b]:.4f} (gap {gap:+.4f}, "
            f"noise bound {bound:.4f}); the reference sides with {sides}"), abs(gap) <= bound, top == a


def run_model(model, args, workdir):
    print(f"\n== {os.path.basename(model)}", flush=True)
    t0 = time.time()
    ref = llama_numpy.LlamaReference(model, np.float32)
    prompts = prompts_for(ref)
    n_vocab = ref.w["token_embd.weight"].shape[0]
    kv = model_reference.Kvfleet(args.kvfleet, model, args.threads)
    cpp = LlamaCpp(model, args.threads, n_ctx=max(len(ids) for _, ids in prompts) + args.tokens + 8)
    rows, splits = [], []
    for label, ids in prompts:
        kv_first, kv_tokens = kv.logits(ids, n_vocab, workdir), kv.generate(ids, args.tokens)
        cpp_first, cpp_tokens = cpp.run(ids, args.tokens)
        ref_first = ref.logits(ids, dtype=np.float64)
        same = next((j for j, (x, y) in enumerate(zip(kv_tokens, cpp_tokens)) if x != y), args.tokens)
        row = dict(label=label, n=len(ids), agree=same, top1=int(np.argmax(kv_first)) == int(np.argmax(cpp_first)),
                   kv_cpp=nmse(kv_first, cpp_first), kv_ref=nmse(kv_first, ref_first),
                   cpp_ref=nmse(cpp_first, ref_first))
        note = ""
        if same < args.tokens:
            text, tie, kv_right = explain(ref, ids, kv_tokens[:same], kv_tokens[same], cpp_tokens[same])
            splits.append(dict(label=label, step=same, tie=tie, kv_right=kv_right, text=text))
            note = f"split at {same}: {text}"
        rows.append(row)
        print(f"  {label[:38]:<38} {len(ids):>4} tok  greedy {same:>2}/{args.tokens}  top1 "
              f"{'=' if row['top1'] else 'x'}  NMSE kv-cpp {row['kv_cpp']:.2e} kv-ref {row['kv_ref']:.2e} "
              f"cpp-ref {row['cpp_ref']:.2e}  {note}", flush=True)
    identical = sum(r["agree"] == args.tokens for r in rows)
    summary = dict(model=os.path.basename(model), prompts=len(rows), identical=identical,
                   mean_agree=float(np.mean([r["agree"] for r in rows])),
                   top1=sum(r["top1"] for r in rows),
                   kv_cpp=float(np.median([r["kv_cpp"] for r in rows])),
                   kv_cpp_max=float(np.max([r["kv_cpp"] for r in rows])),
                   kv_ref=float(np.median([r["kv_ref"] for r in rows])),
                   cpp_ref=float(np.median([r["cpp_ref"] for r in rows])),
                   ties=sum(s["tie"] for s in splits), kv_right=sum(s["kv_right"] for s in splits),
                   splits=len(splits), seconds=time.time() - t0)
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", help="a GGUF (repeatable; default: the two real test models)")
    ap.add_argument("--kvfleet", default=os.path.join(REPO, "build", "tools", "kvfleet", "kvfleet"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=32)
    args = ap.parse_args()
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        print("llama-cpp-python is missing: scripts/setup.sh --with-benchmarks installs it")
        return 2
    summaries = []
    with tempfile.TemporaryDirectory(prefix="kvfleet_agreement_") as workdir:
        for model in args.model or MODELS:
            if not os.path.exists(model):
                print(f"skipping {model}: not found (scripts/fetch_model.sh)")
                continue
            summaries.append(run_model(model, args, workdir))
    print(f"\nmodel                                      prompts  greedy {args.tokens}/{args.tokens}  mean steps  "
          "top-1   NMSE kv-cpp (median, max)  NMSE vs float64: kv, cpp  splits: near-ties, reference = kvfleet")
    for s in summaries:
        print(f"{s['model']:<42} {s['prompts']:>7}  {s['identical']:>5}/{s['prompts']:<5} {s['mean_agree']:>10.1f}  "
              f"{s['top1']:>2}/{s['prompts']:<3}  {s['kv_cpp']:.2e}, {s['kv_cpp_max']:.2e}          "
              f"{s['kv_ref']:.2e}, {s['cpp_ref']:.2e}       {s['splits']}: {s['ties']}, {s['kv_right']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
