#!/usr/bin/env python3
"""kvfleet's modes and llama.cpp's default path against float64, on one text.

The same tokens (Hugging Face `tokenizers` built from the GGUF), the same
windows (llama.cpp's perplexity rule: windows of --ctx, BOS first when the
model adds one, the second half scored):

  - float64: the numpy reference (tests/reference/llama_numpy.py), written
    in kvfleet's reference format;
  - llama.cpp: llama-cpp-python's logits for every position (its default
    CPU path: 8-bit activations for quantized weights, f16 KV), scored here;
  - kvfleet: `kvfleet eval --reference` in each mode.

Prints perplexity and KL divergence from float64 for each. Not run in CI:
llama-cpp-python is a benchmark dependency (scripts/setup.sh
--with-benchmarks builds it without AMX, which crashes on VMs that report
it). llama.cpp runs in a child process, so a crash there names itself.

  .venv/bin/python bench/eval_vs_llamacpp.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf
"""

import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import llama_numpy  # noqa: E402

# Run under llama-cpp-python's interpreter: every window's logits, saved as .npy.
LLAMA_SNIPPET = r"""
import json, sys
import numpy as np
from llama_cpp import Llama
args = json.loads(sys.argv[1])
llm = Llama(model_path=args["model"], n_ctx=args["ctx"], logits_all=True, n_threads=args["threads"],
            n_batch=args["ctx"], verbose=False)
for i, window in enumerate(args["windows"]):
    llm.reset()
    llm.eval(window)
    np.save(f"{args['out']}/llama_{i}.npy", np.array(llm.scores[: len(window)], dtype=np.float32))
"""


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvfleet", default="build/tools/kvfleet/kvfleet")
    ap.add_argument("--model", required=True)
    ap.add_argument("--llama-python", default=sys.executable, help="an interpreter with llama_cpp")
    ap.add_argument("--text", default="docs/design.md")
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    ref = llama_numpy.LlamaReference(args.model, np.float64)
    tok = llama_numpy.build_tokenizer(ref.reader)
    with open(args.text, encoding="utf-8") as f:
        ids = tok.encode(f.read(), add_special_tokens=False).ids[: args.tokens]
    bos = llama_numpy.field(ref.reader, "tokenizer.ggml.bos_token_id")
    add_bos = llama_numpy.field(ref.reader, "tokenizer.ggml.add_bos_token", False) and bos is not None
    ctx, vocab = args.ctx, ref.hp.n_vocab
    windows = []
    for start in range(0, len(ids) - ctx + 1, ctx):
        w = [int(t) for t in ids[start:start + ctx]]
        if add_bos:
            w[0] = int(bos)
        windows.append(w)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([args.llama_python, "-c", LLAMA_SNIPPET,
                        json.dumps({"model": args.model, "ctx": ctx, "threads": args.threads, "windows": windows,
                                    "out": tmp})], check=True)
        ref_path = os.path.join(tmp, "float64.ref")
        nll64, nll_llama, kl_llama, top_llama = [], [], [], []
        with open(ref_path, "wb") as f:
            f.write(b"KVFEVAL1" + struct.pack("<Iqq", 1, vocab, 0))
            positions = 0
            for i, w in enumerate(windows):
                lp64 = log_softmax(ref.forward(w, ref.new_cache(), all_logits=True, dtype=np.float64))
                lpl = log_softmax(np.load(os.path.join(tmp, f"llama_{i}.npy"))[:, :vocab])
                for pos in range(ctx // 2, ctx - 1):
                    nxt = w[pos + 1]
                    nll64.append(-lp64[pos, nxt])
                    nll_llama.append(-lpl[pos, nxt])
                    p = np.exp(lp64[pos])
                    kl_llama.append(float((p * (lp64[pos] - lpl[pos])).sum()))
                    top_llama.append(int(np.argmax(lp64[pos]) == np.argmax(lpl[pos])))
                    f.write(struct.pack("<i", nxt))
                    f.write(lp64[pos].astype(np.float16).tobytes())
                    positions += 1
            f.seek(8 + 4 + 8)
            f.write(struct.pack("<q", positions))
        rows.append(("float64 (numpy)", float(np.exp(np.mean(nll64))), 0.0, 0.0, 100.0))
        kl = np.array(kl_llama)
        rows.append(("llama.cpp default", float(np.exp(np.mean(nll_llama))), float(kl.mean()),
                     float(np.quantile(kl, 0.99)), 100.0 * float(np.mean(top_llama))))
        ids_path = os.path.join(tmp, "ids.txt")
        with open(ids_path, "w") as f:
            f.write(",".join(str(i) for i in ids))
        for name, flags in [("kvfleet f32", []), ("kvfleet q8 activations", ["--cpu-activations", "q8"]),
                            ("kvfleet int8 KV", ["--kv-cache-dtype", "int8"])]:
            out = subprocess.run([args.kvfleet, "eval", "--model", args.model, "--tokens", ids_path, "--ctx", str(ctx),
                                  "--threads", str(args.threads), "--reference", ref_path] + flags,
                                 capture_output=True, text=True, check=True).stdout
            m = re.search(r"mean ([\d.e+-]+), median [\d.e+-]+, p99 ([\d.e+-]+)", out)
            rows.append((name, float(re.search(r"perplexity ([\d.]+)", out).group(1)), float(m.group(1)),
                         float(m.group(2)), float(re.search(r"same top token ([\d.]+)%", out).group(1))))
    print(f"{os.path.basename(args.model)}, {os.path.basename(args.text)}, {len(windows)} windows of {ctx}; "
          "KL divergence from float64")
    print("| path | perplexity | mean KL | p99 KL | same top-1 |")
    print("|---|---|---|---|---|")
    for name, ppl, kl, p99, top in rows:
        print(f"| {name} | {ppl:.4f} | {kl:.3g} | {p99:.3g} | {top:.2f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
