"""How often kvfleet's greedy continuations agree with a float64 reference,
with float32 activations and with 8-bit activations (--cpu-activations),
and with an 8-bit KV cache (--kv-cache-dtype; modes f32+kv-int8,
f32+kv-fp8_e4m3).

For each of 24 prompts (chat, code, JSON, SQL, other languages), rendered
through the model's chat template: 32 greedy tokens (ignore_eos) from
`kvfleet generate --local` in each mode, and from the numpy implementation
in tests/reference/llama_numpy.py computed in float64. Reports, per mode,
how many continuations equal the reference's token for token, and the mean
number of tokens before the first difference.

  .venv/bin/python bench/activation_accuracy.py --kvfleet build/tools/kvfleet/kvfleet
  .venv/bin/python bench/activation_accuracy.py --modes f32,f32+kv-int8,f32+kv-fp8_e4m3
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "reference"))
import llama_numpy as ln  # noqa: E402

PROMPTS = [
    "What is the capital of France?",
    "Name three colors of the rainbow.",
    "Write one sentence about the sea.",
    "What is 12 plus 30?",
    "Give me a tip for sleeping better.",
    "Explain what a CPU does in two sentences.",
    "Write a haiku about autumn leaves.",
    "Summarize the story of Cinderella in one sentence.",
    "Write a Python function that returns the factorial of n.",
    "Write a C function that reverses a string in place.",
    "What does `git rebase` do?",
    "Write a JavaScript snippet that sums an array.",
    'Return a JSON object with the fields "name" and "age" for a 30-year-old named Ada.',
    "Convert this to JSON: city Paris, country France, population 2.1 million.",
    "Write an SQL query that selects all users older than 30 from the table users.",
    "Write an SQL query counting orders per customer in the table orders.",
    "Quelle est la capitale de l'Espagne ?",
    "¿Cuántos días tiene una semana?",
    "Was ist die Hauptstadt von Deutschland?",
    "Qual è il colore del cielo?",
    "Translate to French: Good morning, how are you?",
    "List the first five prime numbers.",
    "Repeat exactly: The quick brown fox jumps over the lazy dog.",
    "What is the boiling point of water in Celsius?",
]


def kvfleet_greedy(binary, model, ids, tokens, mode, threads):
    """mode: the activations (f32, q8), optionally +kv-DTYPE for the KV cache."""
    activations, _, kv_dtype = mode.partition("+kv-")
    cmd = [binary, "generate", "--local", "--model", model, "--prompt-token-ids", ",".join(map(str, ids)),
           "--max-tokens", str(tokens), "--ignore-eos", "--temperature", "0", "--output", "ids",
           "--threads", str(threads), "--device", "cpu", "--cpu-activations", activations,
           "--kv-cache-dtype", kv_dtype or "f16"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    return [int(t) for t in out.split(",")]


def q8_emulated(x):
    """x quantized as kvfleet's q8 does: per 32 values, 127 / max|x|, ties to even."""
    x = np.asarray(x, dtype=np.float32)
    blocks = x.reshape(x.shape[0], -1, 32)
    amax = np.max(np.abs(blocks), axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(amax > 0, np.rint(blocks * (127.0 / amax)), 0)
    return (q * (amax / 127.0)).reshape(x.shape).astype(x.dtype)


def emulation(ref, ids):
    """How far 8-bit activations move the reference's logits (relative L2),
    every linear layer's input quantized, then with each group in float."""
    exact = ref.logits(ids)
    linear = ref._linear
    rows = []
    for keep in ("", "ffn_down", "attn_output", "ffn_gate|ffn_up", "attn_q|attn_k|attn_v"):
        kept = [k for k in keep.split("|") if k]
        ref._linear = lambda x, name, kept=kept: linear(
            x if any(name.endswith(k) for k in kept) else q8_emulated(x), name)
        shifted = ref.logits(ids)
        rows.append((keep or "(none)", float(np.linalg.norm(exact - shifted) / np.linalg.norm(exact))))
    ref._linear = linear
    return rows


def encoder_for(reader, model, tokenize_dump):
    """Token ids of a rendered prompt: the numpy reference's byte-level BPE,
    or, for other vocabularies (Gemma's SentencePiece), kvfleet's own
    tokenizer through tests/reference's tokenize_dump (checked against
    Hugging Face's by the tokenizer reference tests)."""
    try:
        tokenizer = ln.build_tokenizer(reader)
        return lambda text: tokenizer.encode(text, add_special_tokens=False).ids
    except ValueError:
        pass

    def encode(text):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            src, out = os.path.join(tmp, "in.hex"), os.path.join(tmp, "out.tsv")
            with open(src, "w") as f:
                f.write(text.encode().hex() + "\n")
            subprocess.run([tokenize_dump, "encode", "--model", model, "--input", src, "--output", out],
                           check=True, capture_output=True)
            with open(out) as f:
                return [int(t) for t in f.readline().split("\t")[0].split(",") if t]
    return encode


def agreement(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvfleet", default=os.path.join(REPO, "build", "tools", "kvfleet", "kvfleet"))
    ap.add_argument("--model", default=os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=len(PROMPTS))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tokenize-dump", default=os.path.join(REPO, "build", "tests", "reference", "tokenize_dump"),
                    help="kvfleet's tokenizer, for vocabularies the numpy reference cannot build (SentencePiece)")
    ap.add_argument("--modes", default="f32,q8",
                    help="comma-separated: f32, q8, and either with +kv-int8 or +kv-fp8_e4m3 (an 8-bit KV cache)")
    ap.add_argument("--emulation", action="store_true",
                    help="also: the logit shift of a numpy emulation of q8 on the first prompt, per matmul group in float")
    args = ap.parse_args()
    # Weights held in float64 (exact: every dequantized value is a float32):
    # the float64 passes then cast nothing per call, which on a 1.5B model
    # is most of the time (memory: 8 bytes a weight).
    ref = ln.LlamaReference(args.model, np.float64)
    reader = ln.GGUFReader(args.model)
    encode = encoder_for(reader, args.model, args.tokenize_dump)
    modes = args.modes.split(",")
    rows = []
    start = time.time()
    for text in PROMPTS[: args.prompts]:
        ids = encode(ln.chat_prompt(reader, text))
        reference, _ = ref.greedy(ids, args.tokens, prompt_dtype=np.float64, decode_dtype=np.float64)
        row = {"prompt": text, "reference": reference}
        for mode in modes:
            row[mode] = kvfleet_greedy(args.kvfleet, args.model, ids, args.tokens, mode, args.threads)
            row[mode + "_agree"] = agreement(row[mode], reference)
        rows.append(row)
        scores = "  ".join(f"{mode} {row[mode + '_agree']:2d}/{args.tokens}" for mode in modes)
        print(f"{time.time() - start:6.0f} s  {scores}  {text[:60]}", flush=True)
    print(f"\n{len(rows)} prompts, {args.tokens} greedy tokens each, against the float64 reference:")
    print(f"  {'mode':<16} {'identical':>10} {'mean tokens before the first difference':>42}")
    summary = {}
    for mode in modes:
        same = sum(r[mode + "_agree"] == args.tokens for r in rows)
        mean = sum(r[mode + "_agree"] for r in rows) / len(rows)
        summary[mode] = {"identical": same, "share": same / len(rows), "mean_agreeing_tokens": mean}
        print(f"  {mode:<16} {same:>4} of {len(rows):<3} ({100 * same / len(rows):5.1f}%) {mean:>30.1f}")
    if "f32" in summary and "q8" in summary:
        gap = 100 * (summary["f32"]["share"] - summary["q8"]["share"])
        print(f"  q8 is {gap:.1f} points below f32 (greedy agreement: a second view; the default follows the KL gate "
              "of the model's calibration record)")
    for mode in modes:
        base = mode.partition("+kv-")[0]
        if "+kv-" in mode and base in summary:
            behind = summary[base]["identical"] - summary[mode]["identical"]
            print(f"  {mode}: {behind} prompt(s) below {base}'s float16 cache")
    if args.emulation:
        ids = encode(ln.chat_prompt(reader, PROMPTS[0]))
        print("\nnumpy emulation of q8 on the first prompt: relative L2 shift of the next-token logits")
        for keep, shift in emulation(ref, ids):
            print(f"  float32 inputs kept for {keep:<22} {shift:.3f}")
    if args.json:
        print(json.dumps({"summary": summary, "rows": rows}))


if __name__ == "__main__":
    main()
