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
Every split is explained: after the common prefix, the float64 reference
gives both candidates' logits, and each engine's largest error against the
reference at that step is measured. A gap within both errors is a near-tie;
within one engine's error only, that engine strays from the reference by
more than the gap. Either is arithmetic rather than a bug; a gap larger
than both errors is not, and the line says so. The line also says which
token the reference picks. (llama.cpp's CPU path quantizes activations to
8 bits for K-quant weights, so its error is the larger one.)

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
    "Photosynthesis converts light energy into",
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
        # Without logits_all, llama-cpp-python keeps no scores: read the context's last row.
        row = np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(self.llm.n_vocab(),))
        return row.astype(np.float64)

    def run(self, ids, n):
        """(the logits before each of the n greedy tokens, the tokens)."""
        self.llm.reset()
        self.llm.eval(ids)
        steps, out = [self.last_logits()], []
        for _ in range(n):
            t = int(np.argmax(steps[-1]))
            out.append(t)
            self.llm.eval([t])
            steps.append(self.last_logits())
        return steps[:n], out


def prompts_for(ref):
    enc = model_reference.encoder(ref)
    prompts = model_reference.real_prompts(ref, few=False, long=600 if any(ref.hp.windows) else 0)
    prompts += [(f"text {t[:30]!r}", enc(t)) for t in EXTRA_TEXTS]
    return prompts


def explain(ref, kv, workdir, n_vocab, ids, common, a, b, cpp_logits):
    """A split: kvfleet chose a, llama.cpp b after ids + common. Returns the
    line, whether the gap lies within an engine's error (arithmetic), and
    whether the reference picks kvfleet's token."""
    prefix = list(ids) + common
    logits = ref.logits(prefix, dtype=np.float64)
    kv_err = float(np.max(np.abs(kv.logits(prefix, n_vocab, workdir) - logits)))
    cpp_err = float(np.max(np.abs(cpp_logits - logits)))
    gap = float(logits[a] - logits[b])
    top = int(np.argmax(logits))
    sides = "kvfleet" if top == a else "llama.cpp" if top == b else f"neither (it picks {top})"
    # Whose error the gap lies within: both engines' (a near-tie), or only
    # one's (that engine strays from the reference by more than the gap).
    explained = abs(gap) <= max(kv_err, cpp_err)
    within = ("near-tie" if abs(gap) <= min(kv_err, cpp_err) else
              "within llama.cpp's error" if abs(gap) <= cpp_err else
              "within kvfleet's error" if explained else "NOT explained by arithmetic")
    return (f"{within}: reference {a}: {logits[a]:.4f}, {b}: {logits[b]:.4f} "
            f"(gap {gap:+.4f}); max error vs reference there: kvfleet {kv_err:.4f}, llama.cpp {cpp_err:.4f}; "
            f"the reference picks {sides}"), explained, top == a


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
        cpp_steps, cpp_tokens = cpp.run(ids, args.tokens)
        cpp_first = cpp_steps[0]
        ref_first = ref.logits(ids, dtype=np.float64)
        same = next((j for j, (x, y) in enumerate(zip(kv_tokens, cpp_tokens)) if x != y), args.tokens)
        row = dict(label=label, n=len(ids), agree=same, top1=int(np.argmax(kv_first)) == int(np.argmax(cpp_first)),
                   kv_cpp=nmse(kv_first, cpp_first), kv_ref=nmse(kv_first, ref_first),
                   cpp_ref=nmse(cpp_first, ref_first))
        note = ""
        if same < args.tokens:
            text, explained, kv_right = explain(ref, kv, workdir, n_vocab, ids, kv_tokens[:same], kv_tokens[same],
                                          cpp_tokens[same], cpp_steps[same])
            splits.append(dict(label=label, step=same, explained=explained, kv_right=kv_right, text=text))
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
                   explained=sum(s["explained"] for s in splits), kv_right=sum(s["kv_right"] for s in splits),
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
          "top-1   NMSE kv-cpp (median, max)  NMSE vs float64: kv, cpp  splits: within an engine's error, reference = kvfleet")
    for s in summaries:
        print(f"{s['model']:<42} {s['prompts']:>7}  {s['identical']:>5}/{s['prompts']:<5} {s['mean_agree']:>10.1f}  "
              f"{s['top1']:>2}/{s['prompts']:<3}  {s['kv_cpp']:.2e}, {s['kv_cpp_max']:.2e}          "
              f"{s['kv_ref']:.2e}, {s['cpp_ref']:.2e}       {s['splits']}: {s['explained']}, {s['kv_right']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
