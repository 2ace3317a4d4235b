#!/usr/bin/env python3
"""`kvfleet eval` against the float64 numpy reference (llama_numpy.py).

A text of the repository, tokenized by Hugging Face `tokenizers` built from
the GGUF, is cut into windows by llama.cpp's perplexity rule (windows of
--ctx tokens, the first replaced by BOS when the model adds one, the
second half scored). The numpy reference runs each window in float64 and
writes its distributions in kvfleet's reference format (tools/eval/
reference_file.h: float16 log-probabilities); kvfleet then evaluates the same
tokens in f32 and reads that file back:

  - its perplexity must equal numpy's within 1e-3 (relative);
  - its mean KL divergence from the float64 distributions must stay under
    1e-4, and its top token must equal float64's at 98% of positions or more
    (a near-tie can go either way: the reference is float16 on disk).

The 8-bit activation mode is measured against the same file and printed.
"""

import argparse
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_numpy  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))


def run_eval(kvfleet, model, ids_path, ctx, extra):
    cmd = [kvfleet, "eval", "--model", model, "--tokens", ids_path, "--ctx", str(ctx), "--threads", "2"] + extra
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{out.stderr}")
    print(out.stdout.strip())
    ppl = float(re.search(r"perplexity ([\d.]+)", out.stdout).group(1))
    kl = re.search(r"mean ([\d.e+-]+),", out.stdout)
    top = re.search(r"same top token ([\d.]+)%", out.stdout)
    return ppl, float(kl.group(1)) if kl else None, float(top.group(1)) if top else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvfleet", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", default=os.path.join(ROOT, "docs", "design.md"))
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--ctx", type=int, default=256)
    args = ap.parse_args()

    ref = llama_numpy.LlamaReference(args.model, np.float64)
    tok = llama_numpy.build_tokenizer(ref.reader)
    with open(args.text, encoding="utf-8") as f:
        ids = tok.encode(f.read(), add_special_tokens=False).ids[: args.tokens]
    vocab = ref.hp.n_vocab
    bos = llama_numpy.field(ref.reader, "tokenizer.ggml.bos_token_id")
    add_bos = llama_numpy.field(ref.reader, "tokenizer.ggml.add_bos_token", False) and bos is not None
    ctx = args.ctx
    nll = []
    with tempfile.TemporaryDirectory() as tmp:
        ids_path = os.path.join(tmp, "ids.txt")
        with open(ids_path, "w") as f:
            f.write(",".join(str(i) for i in ids))
        ref_path = os.path.join(tmp, "float64.ref")
        with open(ref_path, "wb") as f:
            f.write(b"KVFEVAL1" + struct.pack("<Iqq", 1, vocab, 0))
            positions = 0
            for start in range(0, len(ids) - ctx + 1, ctx):
                window = list(ids[start:start + ctx])
                if add_bos:
                    window[0] = int(bos)
                logits = ref.forward(window, ref.new_cache(), all_logits=True, dtype=np.float64)
                lp = log_softmax(logits)
                for pos in range(ctx // 2, ctx - 1):
                    nxt = window[pos + 1]
                    nll.append(-lp[pos, nxt])
                    f.write(struct.pack("<i", nxt))
                    f.write(lp[pos].astype(np.float16).tobytes())
                    positions += 1
            f.seek(8 + 4 + 8)
            f.write(struct.pack("<q", positions))
        ppl_np = float(np.exp(np.mean(nll)))
        print(f"numpy float64: perplexity {ppl_np:.6f} over {positions} positions")
        ppl, kl, top = run_eval(args.kvfleet, args.model, ids_path, ctx, ["--reference", ref_path])
        run_eval(args.kvfleet, args.model, ids_path, ctx, ["--reference", ref_path, "--cpu-activations", "q8"])
    ok = abs(ppl - ppl_np) / ppl_np < 1e-3 and kl is not None and kl < 1e-4 and top >= 98.0
    print(f"f32 against float64: perplexity {ppl:.6f} vs {ppl_np:.6f}, mean KL {kl:.3g}, same top {top:.2f}%: "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
