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

Then `kvfleet eval --calibrate` runs every CPU mode against the same file
and writes a calibration record: it must list each mode once with its
numerics identity, the exact mode must pass with the f32 run's figures,
and each mode's verdict must follow the gate given (here the gate
llama.cpp measured for SmolLM2 on the pinned texts; the texts differ, so
the verdicts here prove the rule, not the model's record).

With --lora DIR, all of it runs under a PEFT adapter: the float64 reference
merges the adapter into the weights (lora_numpy.py) and every kvfleet run
takes --lora, so the f32 mode must meet the same bar against the merged
weights, and the record (which must name the adapter) judges every mode
under it by the same gate. A run without the adapter must be far from the
adapter's reference, so an adapter that changed nothing cannot pass.

  eval_reference.py --kvfleet build/tools/kvfleet/kvfleet --model M.gguf [--lora DIR]
      [--text FILE]... [--tokens N] [--ctx N] [--gate-record M.gguf.calibration.json]
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_numpy  # noqa: E402
import lora_numpy  # noqa: E402

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


def check_record(record, gate, f32_kl, shape, adapter=None):
    """The record's modes, their identities and verdicts against the gate,
    the key channel scales of a model of `shape` (layers, KV heads,
    head_dim), and the adapter it names (`adapter`: the directory's name,
    None: none)."""
    problems = []
    named = record.get("adapter", "")
    if adapter is None and named:
        problems.append(f"the base model's record names adapter {named!r}")
    if adapter is not None and not re.fullmatch(re.escape(adapter) + r"@[0-9a-f]{64}", named):
        problems.append(f"the record names adapter {named!r}, not {adapter}@<its digest>")
    modes = {(m["cpu_activations"], m["kv_cache_dtype"]): m for m in record["modes"]}
    kvs = ("f16", "int8", "int8_rotated", "int8_rotated_scaled", "fp8_e4m3")
    want = {(a, kv) for a in ("f32", "q8") for kv in kvs}
    if set(modes) != want or len(record["modes"]) != len(want):
        problems.append(f"modes {sorted(modes)} are not every activation mode with every KV format once")
    for (a, kv), m in modes.items():
        numerics = ("cpu-q8/3" if a == "q8" else "cpu/1") + ("" if kv == "f16" else f"+kv-{kv}")
        if m["numerics"] != numerics:
            problems.append(f"{a}+{kv}: numerics {m['numerics']}, expected {numerics}")
        exact = a == "f32" and kv == "f16"
        bar = gate["activations"] if kv == "f16" else gate["kv"]
        if m["passes"] != (exact or m["mean_kl"] <= bar):
            problems.append(f"{a}+{kv}: mean KL {m['mean_kl']:.4g} against a bar of {bar}, but passes={m['passes']}")
    exact = modes.get(("f32", "f16"))
    if exact is None or abs(exact["mean_kl"] - f32_kl) > 1e-3 * max(f32_kl, 1e-9) + 1e-9:
        problems.append(f"the exact mode's mean KL {exact and exact['mean_kl']} is not the f32 run's {f32_kl}")
    if record["gate"]["activations_mean_kl"] != gate["activations"] or record["gate"]["kv_mean_kl"] != gate["kv"]:
        problems.append(f"the record's gate {record['gate']} is not the one given")
    scales = record.get("key_channel_scales", {})
    layers, kv_heads, head_dim = shape
    digits = scales.get("exponents", [])
    if (scales.get("layers"), scales.get("kv_heads"), scales.get("head_dim")) != shape or len(digits) != layers or \
            any(len(d) != kv_heads * head_dim for d in digits):
        problems.append(f"key_channel_scales {str(scales)[:200]} do not fit {layers} layers x {kv_heads} KV heads "
                        f"x {head_dim}")
    if len(record["model_fingerprint"]) != 64:
        problems.append(f"model_fingerprint {record['model_fingerprint']!r} is not a SHA-256")
    for p in problems:
        print(f"calibration record: {p}")
    print(f"calibration record: {len(record['modes'])} modes, "
          f"{sum(m['passes'] for m in record['modes'])} pass: {'PASS' if not problems else 'FAIL'}")
    return not problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvfleet", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", action="append", help="repeatable (default: docs/design.md)")
    ap.add_argument("--tokens", type=int, default=1024, help="of each text, cut to whole windows")
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--lora", metavar="DIR", help="run everything under this PEFT adapter")
    ap.add_argument("--gate-record", metavar="RECORD", help="take the gate from this calibration record")
    args = ap.parse_args()

    ref = llama_numpy.LlamaReference(args.model, np.float64)
    lora_flags, adapter = [], None
    if args.lora:
        merged = lora_numpy.merge_peft_adapter(ref, args.lora)
        lora_flags, adapter = ["--lora", args.lora], os.path.basename(os.path.normpath(args.lora))
        print(f"float64 reference under {adapter}: {merged} weights merged")
    tok = llama_numpy.build_tokenizer(ref.reader)
    ids = []
    for path in args.text or [os.path.join(ROOT, "docs", "design.md")]:
        with open(path, encoding="utf-8") as f:
            text_ids = tok.encode(f.read(), add_special_tokens=False).ids[: args.tokens]
        ids += text_ids[: len(text_ids) // args.ctx * args.ctx]
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
        ppl, kl, top = run_eval(args.kvfleet, args.model, ids_path, ctx, ["--reference", ref_path] + lora_flags)
        apart_ok = True
        if args.lora:
            _, base_kl, _ = run_eval(args.kvfleet, args.model, ids_path, ctx, ["--reference", ref_path])
            apart_ok = base_kl > 100 * max(kl, 1e-7)
            print(f"the base model against the adapter's reference: mean KL {base_kl:.3g} "
                  f"({'far' if apart_ok else 'NOT far'} from the adapter's {kl:.3g})")
        record_path = os.path.join(tmp, "record.json")
        gate = {"activations": 0.00296, "kv": 0.00328}
        if args.gate_record:
            with open(args.gate_record) as f:
                given = json.load(f)["gate"]
            gate = {"activations": given["activations_mean_kl"], "kv": given["kv_mean_kl"]}
        out = subprocess.run([args.kvfleet, "eval", "--model", args.model, "--tokens", ids_path, "--ctx", str(ctx),
                              "--threads", "2", "--reference", ref_path, "--calibrate", record_path,
                              "--activations-gate", repr(gate["activations"]), "--kv-gate", repr(gate["kv"])]
                             + lora_flags, capture_output=True, text=True)
        print(out.stdout.strip())
        if out.returncode != 0:
            sys.exit(f"FAIL: kvfleet eval --calibrate: {out.stderr}")
        with open(record_path) as f:
            record = json.load(f)
    calibration_ok = check_record(record, gate, kl, (ref.hp.n_layer, ref.hp.n_head_kv, ref.hp.head_dim), adapter)
    ok = abs(ppl - ppl_np) / ppl_np < 1e-3 and kl is not None and kl < 1e-4 and top >= 98.0 and calibration_ok \
        and apart_ok
    print(f"f32{' under ' + adapter if adapter else ''} against float64: perplexity {ppl:.6f} vs {ppl_np:.6f}, mean KL {kl:.3g}, same top {top:.2f}%: "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
