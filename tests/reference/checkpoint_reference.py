#!/usr/bin/env python3
"""The checkpoint path on real weights and real tokenizers.

1. Qwen2.5-Coder-0.5B-Instruct Q4_K_M is written as a Hugging Face
   checkpoint by `kvfleet export-hf` (bf16, two safetensors shards with an
   index, tokenizer.json, tokenizer_config.json with the chat template,
   generation_config.json), then:
   - its tokenizer.json, loaded by Hugging Face `tokenizers` (which shares
     no code with kvfleet), and kvfleet's reading of the same file give
     identical ids on generated strings, specials parsed and not;
   - kvfleet on the checkpoint and on the GGUF: next-token logits within
     the bound below, and greedy continuations compared (agreement
     reported; a split must be a near-tie of the GGUF's own logits).
2. Gemma 3 270M's SentencePiece vocabulary is written as tokenizer.json
   alone (merges synthesized from its scores, as transformers' converter
   does): Hugging Face `tokenizers` on it, kvfleet on it, and the
   sentencepiece library on a ModelProto from the GGUF all agree.

Bound on logits: the checkpoint holds the GGUF's dequantized weights
rounded to bfloat16 (8 significant bits, a relative error up to 2^-9 per
weight), so |checkpoint - gguf| <= 0.02 * max|logit| (measured about 0.006).

  checkpoint_reference.py --kvfleet kvfleet --dump tokenize_dump --qwen Q.gguf --gemma G.gguf
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_spm_gguf_reference import extra_strings, oracle_from_gguf  # noqa: E402
from tokenizer_strings import generate  # noqa: E402

RELATIVE_BOUND = 0.02
PROMPTS = [
    "def fibonacci(n):\n    ",
    "The capital of France is",
    "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
    "import numpy as np\n\nx = np.arange(10)\nprint(",
    "A list of prime numbers: 2, 3, 5, 7, 11,",
]


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)[:200]}` exited {p.returncode}: {p.stderr[-2000:]}")
    return p.stdout


def dump_ids(dump, model, texts, parse_special, tmp, tag):
    inp, out = os.path.join(tmp, f"{tag}.hex"), os.path.join(tmp, f"{tag}.tsv")
    with open(inp, "w") as f:
        for s in texts:
            f.write(s.encode("utf-8").hex() + "\n")
    cmd = [dump, "encode", "--model", model, "--input", inp, "--output", out]
    if not parse_special:
        cmd.append("--no-parse-special")
    run(cmd)
    with open(out) as f:
        return [[int(x) for x in line.split("\t")[0].split(",")] if line.split("\t")[0] else [] for line in f]


def compare_ids(label, texts, ours, theirs):
    same = sum(1 for a, b in zip(ours, theirs) if a == b)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            print(f"  [{label} #{i}] {texts[i]!r}: kvfleet {a[:12]} vs oracle {b[:12]}")
            break
    print(f"{label}: {same}/{len(texts)} identical")
    return same == len(texts)


def logits(kvfleet, model, ids, tmp):
    out = os.path.join(tmp, "l.f32")
    run([kvfleet, "logits", "--model", model, "--prompt-token-ids", ",".join(map(str, ids)), "--out", out,
         "--threads", "2"])
    return np.fromfile(out, dtype="<f4").astype(np.float64)


def greedy(kvfleet, model, ids, n):
    out = run([kvfleet, "generate", "--local", "--model", model, "--prompt-token-ids", ",".join(map(str, ids)),
               "--max-tokens", str(n), "--temperature", "0", "--ignore-eos", "--output", "ids", "--threads", "2"])
    return [int(t) for t in out.strip().splitlines()[-1].split(",")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvfleet", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--qwen", required=True)
    ap.add_argument("--gemma", required=True)
    ap.add_argument("--gen-tokens", type=int, default=32)
    args = ap.parse_args()
    for m in (args.qwen, args.gemma):
        if not os.path.exists(m):
            print(f"SKIP: model {m} not found (scripts/fetch_model.sh fetches it)")
            return 77
    ok = True
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="kvfleet_checkpoint_") as tmp:
        ckpt = os.path.join(tmp, "qwen")
        print(run([args.kvfleet, "export-hf", "--model", args.qwen, "--out", ckpt, "--dtype", "bf16",
                   "--shards", "2"]).strip(), f"({time.time() - t0:.0f} s)")
        shards = sorted(f for f in os.listdir(ckpt) if f.endswith(".safetensors"))
        print(f"checkpoint files: {sorted(os.listdir(ckpt))}")
        ok &= len(shards) == 2 and os.path.exists(os.path.join(ckpt, "model.safetensors.index.json"))

        # The tokenizer: Hugging Face on the file vs kvfleet on the file.
        hf = Tokenizer.from_file(os.path.join(ckpt, "tokenizer.json"))
        texts = generate(800, 21)
        ours = dump_ids(args.dump, ckpt, texts, True, tmp, "special")
        ok &= compare_ids("qwen tokenizer.json, specials parsed", texts, ours,
                          [hf.encode(s, add_special_tokens=False).ids for s in texts])
        hf.encode_special_tokens = True
        ours = dump_ids(args.dump, ckpt, texts, False, tmp, "plain")
        ok &= compare_ids("qwen tokenizer.json, specials as text", texts, ours,
                          [hf.encode(s, add_special_tokens=False).ids for s in texts])
        hf.encode_special_tokens = False

        # The weights: the checkpoint against the GGUF.
        worst, agree, total = 0.0, 0, 0
        for text in PROMPTS:
            ids = hf.encode(text, add_special_tokens=False).ids
            a, b = logits(args.kvfleet, args.qwen, ids, tmp), logits(args.kvfleet, ckpt, ids, tmp)
            rel = float(np.max(np.abs(a - b)) / np.max(np.abs(a)))
            worst = max(worst, rel)
            ga, gb = greedy(args.kvfleet, args.qwen, ids, args.gen_tokens), greedy(args.kvfleet, ckpt, ids,
                                                                                    args.gen_tokens)
            same = next((j for j, (x, y) in enumerate(zip(ga, gb)) if x != y), len(ga))
            agree += same == len(ga)
            total += 1
            note = "identical" if same == len(ga) else f"split at step {same}"
            if same < len(ga):
                # A split must be a near-tie of the GGUF's own logits at that step.
                step = logits(args.kvfleet, args.qwen, ids + ga[:same], tmp)
                gap = abs(step[ga[same]] - step[gb[same]])
                note += f" (GGUF logits {ga[same]}: {step[ga[same]]:.4f}, {gb[same]}: {step[gb[same]]:.4f}, gap {gap:.4f})"
                ok &= gap <= 2 * RELATIVE_BOUND * float(np.max(np.abs(step)))
            print(f"  {text[:40]!r}: |logits| differ by {rel:.4f} of the largest; greedy {args.gen_tokens}: {note}")
            ok &= rel <= RELATIVE_BOUND
        print(f"qwen checkpoint vs GGUF: largest relative difference {worst:.4f} (bound {RELATIVE_BOUND}); "
              f"greedy identical on {agree}/{total} prompts")

        # Gemma 3's SentencePiece vocabulary as tokenizer.json.
        gtok = os.path.join(tmp, "gemma")
        run([args.kvfleet, "export-hf", "--model", args.gemma, "--out", gtok, "--tokenizer-only"])
        hf = Tokenizer.from_file(os.path.join(gtok, "tokenizer.json"))
        sp, _ = oracle_from_gguf(args.gemma)
        texts = generate(600, 22) + extra_strings(22, 300)
        ours = dump_ids(args.dump, gtok, texts, False, tmp, "gemma")
        hf.encode_special_tokens = True
        ok &= compare_ids("gemma tokenizer.json: kvfleet vs Hugging Face", texts, ours,
                          [hf.encode(s, add_special_tokens=False).ids for s in texts])
        ok &= compare_ids("gemma tokenizer.json: kvfleet vs sentencepiece on the GGUF", texts, ours,
                          [sp.encode(s, out_type=int) for s in texts])
    print(f"{'passed' if ok else 'FAILED'} ({time.time() - t0:.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
