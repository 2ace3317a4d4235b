#!/usr/bin/env python3
"""kvfleet's modes and llama.cpp against float64, and the calibration record.

The same tokens (Hugging Face `tokenizers` built from the GGUF), the same
windows (llama.cpp's perplexity rule: windows of --ctx, BOS first when the
model adds one, the second half scored), over one or more texts (default:
the pinned prose and code of scripts/fetch_eval_texts.sh, --tokens of each,
cut to whole windows so that no window spans two texts):

  - float64: the numpy reference (tests/reference/llama_numpy.py), written
    in kvfleet's reference format;
  - llama.cpp: llama-cpp-python's logits for every position, scored here,
    for its default CPU path (8-bit activations for quantized weights, f16
    KV) and with a q8_0 KV cache (flash attention on, as llama.cpp requires
    for a quantized V cache);
  - kvfleet: `kvfleet eval --reference` in each mode; with --calibrate OUT,
    `kvfleet eval --calibrate` instead, which runs every mode with
    llama.cpp's two mean KL divergences as the gate and writes the model's
    calibration record (docs/operations.md, "Choosing a mode").

With --lora DIR (a PEFT adapter) all three run under it: float64 with the
adapter merged into the weights, llama.cpp with it written as its LoRA GGUF
(tests/reference/lora_numpy.py), kvfleet with --lora. The gate is then
llama.cpp's divergence under the same adapter, and the record names it.

Prints perplexity and KL divergence from float64 for each. Not run in CI: llama-cpp-python
is a benchmark dependency (scripts/setup.sh --with-benchmarks builds it
without AMX, which crashes on VMs that report it). llama.cpp runs in a
child process, so a crash there names itself.

  scripts/fetch_eval_texts.sh
  .venv/bin/python bench/eval_vs_llamacpp.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --calibrate models/SmolLM2-135M-Instruct.Q4_1.gguf.calibration.json
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

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import llama_numpy  # noqa: E402
import lora_numpy  # noqa: E402
from activation_accuracy import encoder_for  # noqa: E402  (bench/, the script's own folder)

# Run under llama-cpp-python's interpreter: every window's logits, saved as .npy.
LLAMA_SNIPPET = r"""
import json, sys
import numpy as np
import llama_cpp
from llama_cpp import Llama
args = json.loads(sys.argv[1])
extra = {"type_k": llama_cpp.GGML_TYPE_Q8_0, "type_v": llama_cpp.GGML_TYPE_Q8_0, "flash_attn": True} \
    if args["kv"] == "q8_0" else {}
if args["lora"]:
    extra["lora_path"] = args["lora"]
llm = Llama(model_path=args["model"], n_ctx=args["ctx"], logits_all=True, n_threads=args["threads"],
            n_batch=args["ctx"], verbose=False, **extra)
for i, window in enumerate(args["windows"]):
    llm.reset()
    llm.eval(window)
    np.save(f"{args['out']}/llama_{args['kv']}_{i}.npy", np.array(llm.scores[: len(window)], dtype=np.float32))
print(llama_cpp.__version__)
"""

LLAMA_PATHS = [("llama.cpp default", "f16"), ("llama.cpp q8_0 KV", "q8_0")]
KVFLEET_MODES = [("kvfleet f32", []), ("kvfleet q8 activations", ["--cpu-activations", "q8"]),
                 ("kvfleet int8 KV", ["--kv-cache-dtype", "int8"]),
                 ("kvfleet int8_rotated KV", ["--kv-cache-dtype", "int8_rotated"]),
                 ("kvfleet fp8_e4m3 KV", ["--kv-cache-dtype", "fp8_e4m3"]),
                 ("kvfleet q8 + int8 KV", ["--cpu-activations", "q8", "--kv-cache-dtype", "int8"])]


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvfleet", default="build/tools/kvfleet/kvfleet")
    ap.add_argument("--model", required=True)
    ap.add_argument("--llama-python", default=sys.executable, help="an interpreter with llama_cpp")
    ap.add_argument("--text", action="append", help="repeatable (default: models/eval/prose.txt and code.py)")
    ap.add_argument("--tokens", type=int, default=2048, help="of each text, cut to whole windows")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--calibrate", metavar="OUT", help="write the model's calibration record here")
    ap.add_argument("--lora", metavar="DIR", help="run everything under this PEFT adapter")
    ap.add_argument("--tokenize-dump", default=os.path.join(ROOT, "build", "tests", "reference", "tokenize_dump"),
                    help="kvfleet's tokenizer, for vocabularies the numpy reference cannot build (SentencePiece)")
    ap.add_argument("--keep", metavar="DIR",
                    help="keep the float64 reference and llama.cpp's figures in DIR, and reuse them when a later run "
                         "asks for the same model, texts and windows (only kvfleet's modes run again)")
    args = ap.parse_args()
    texts = args.text or [os.path.join(ROOT, "models", "eval", "prose.txt"), os.path.join(ROOT, "models", "eval", "code.py")]

    # The tokenizer and shapes only; the float64 weights load when the reference runs.
    reader = llama_numpy.GGUFReader(args.model)
    encode = encoder_for(reader, args.model, args.tokenize_dump)
    hp = llama_numpy.Hparams.from_reader(reader)
    ctx = args.ctx
    vocab = hp.n_vocab or len(llama_numpy.field(reader, "tokenizer.ggml.tokens"))
    ids = []
    for path in texts:
        with open(path, encoding="utf-8") as f:
            text_ids = encode(f.read())[: args.tokens]
        ids += text_ids[: len(text_ids) // ctx * ctx]
    bos = llama_numpy.field(reader, "tokenizer.ggml.bos_token_id")
    add_bos = llama_numpy.field(reader, "tokenizer.ggml.add_bos_token", False) and bos is not None
    windows = []
    for start in range(0, len(ids) - ctx + 1, ctx):
        w = [int(t) for t in ids[start:start + ctx]]
        if add_bos:
            w[0] = int(bos)
        windows.append(w)
    rows = []
    gates = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        key = {"model": os.path.abspath(args.model), "model_bytes": os.path.getsize(args.model),
               "model_mtime_ns": os.stat(args.model).st_mtime_ns,
               "texts": [os.path.abspath(t) for t in texts], "tokens": args.tokens, "ctx": ctx, "ids": len(ids),
               "ids_hash": hash(tuple(ids)) & 0xFFFFFFFF,
               "lora": os.path.abspath(args.lora) if args.lora else None}
        kept_path = os.path.join(work, "kept.json")
        kept = None
        if args.keep and os.path.exists(kept_path):
            with open(kept_path) as f:
                kept = json.load(f)
            if kept.get("key") != key:
                kept = None
        ref_path = os.path.join(work, "float64.ref")
        if kept:
            print(f"reusing the float64 reference and llama.cpp's figures in {work}", file=sys.stderr)
            rows, gates, llama_version, positions = kept["rows"], kept["gates"], kept["llama_version"], kept["positions"]
        else:
            llama_version = ""
            lora_gguf = None
            if args.lora:
                lora_gguf = os.path.join(tmp, "lora.gguf")
                lora_numpy.write_llama_cpp_lora(args.lora, hp, lora_gguf)
            for _, kv in LLAMA_PATHS:
                out = subprocess.run([args.llama_python, "-c", LLAMA_SNIPPET,
                                      json.dumps({"model": args.model, "ctx": ctx, "threads": args.threads,
                                                  "windows": windows, "out": tmp, "kv": kv, "lora": lora_gguf})],
                                     check=True, capture_output=True, text=True)
                llama_version = out.stdout.strip().splitlines()[-1]
            ref = llama_numpy.LlamaReference(args.model, np.float64)
            if args.lora:
                lora_numpy.merge_peft_adapter(ref, args.lora)
            nll64 = []
            llama = {kv: {"nll": [], "kl": [], "top": []} for _, kv in LLAMA_PATHS}
            with open(ref_path, "wb") as f:
                f.write(b"KVFEVAL1" + struct.pack("<Iqq", 1, vocab, 0))
                positions = 0
                for i, w in enumerate(windows):
                    lp64 = log_softmax(ref.forward(w, ref.new_cache(), all_logits=True, dtype=np.float64))
                    for pos in range(ctx // 2, ctx - 1):
                        nll64.append(-lp64[pos, w[pos + 1]])
                        f.write(struct.pack("<i", w[pos + 1]))
                        f.write(lp64[pos].astype(np.float16).tobytes())
                        positions += 1
                    for _, kv in LLAMA_PATHS:
                        path = os.path.join(tmp, f"llama_{kv}_{i}.npy")
                        lpl = log_softmax(np.load(path)[:, :vocab])
                        os.remove(path)
                        for pos in range(ctx // 2, ctx - 1):
                            p = np.exp(lp64[pos])
                            llama[kv]["nll"].append(-lpl[pos, w[pos + 1]])
                            llama[kv]["kl"].append(float((p * (lp64[pos] - lpl[pos])).sum()))
                            llama[kv]["top"].append(int(np.argmax(lp64[pos]) == np.argmax(lpl[pos])))
                    print(f"float64 and llama.cpp: window {i + 1}/{len(windows)}", file=sys.stderr)
                f.seek(8 + 4 + 8)
                f.write(struct.pack("<q", positions))
            rows.append(("float64 (numpy)", float(np.exp(np.mean(nll64))), 0.0, 0.0, 100.0))
            for name, kv in LLAMA_PATHS:
                kl = np.array(llama[kv]["kl"])
                gates[kv] = float(kl.mean())
                rows.append((name, float(np.exp(np.mean(llama[kv]["nll"]))), float(kl.mean()),
                             float(np.quantile(kl, 0.99)), 100.0 * float(np.mean(llama[kv]["top"]))))
            with open(kept_path, "w") as f:
                json.dump({"key": key, "rows": rows, "gates": gates, "llama_version": llama_version,
                           "positions": positions}, f)
        ids_path = os.path.join(tmp, "ids.txt")
        with open(ids_path, "w") as f:
            f.write(",".join(str(i) for i in ids))
        common = [args.kvfleet, "eval", "--model", args.model, "--tokens", ids_path, "--ctx", str(ctx),
                  "--threads", str(args.threads), "--reference", ref_path] + (["--lora", args.lora] if args.lora else [])
        text_name = " + ".join(f"{os.path.basename(t)} ({args.tokens} tokens)" for t in texts)
        if args.calibrate:
            # --calibrate measures every mode itself: the table comes from its record.
            out = subprocess.run(
                common + ["--calibrate", args.calibrate, "--activations-gate", repr(gates["f16"]),
                          "--kv-gate", repr(gates["q8_0"]),
                          "--gate-source", f"llama.cpp {llama_version} (llama-cpp-python) on the same GGUF, text and "
                                           f"windows{', under the same adapter' if args.lora else ''}: its default CPU "
                                           f"path, and with a q8_0 KV cache",
                          "--reference-source", "float64 numpy forward (tests/reference/llama_numpy.py"
                                                + (", the adapter merged by lora_numpy.py" if args.lora else "")
                                                + "), distributions stored as float16"],
                capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"kvfleet eval --calibrate failed: {out.stderr}")
            calibration_summary = out.stdout
            with open(args.calibrate) as f:
                record = json.load(f)
            for m in record["modes"]:
                rows.append((f"kvfleet {m['cpu_activations']}, {m['kv_cache_dtype']} KV", m["perplexity"],
                             m["mean_kl"], m["p99_kl"], 100.0 * m["same_top1"], m["tokens_per_second"]))
            # The record names the texts and this command, not the temporary token file.
            record["text"]["name"] = text_name
            record["command"] = "bench/eval_vs_llamacpp.py " + " ".join(sys.argv[1:])
            with open(args.calibrate, "w") as f:
                json.dump(record, f, indent=2)
                f.write("\n")
        else:
            for name, flags in KVFLEET_MODES:
                out = subprocess.run(common + flags, capture_output=True, text=True, check=True).stdout
                m = re.search(r"mean ([\d.e+-]+), median [\d.e+-]+, p99 ([\d.e+-]+)", out)
                speed = float(re.search(r"([\d.]+) tokens/s", out).group(1))
                rows.append((name, float(re.search(r"perplexity ([\d.]+)", out).group(1)), float(m.group(1)),
                             float(m.group(2)), float(re.search(r"same top token ([\d.]+)%", out).group(1)), speed))
        under = f" under {os.path.basename(os.path.normpath(args.lora))}" if args.lora else ""
        print(f"{os.path.basename(args.model)}{under}, {text_name}, {len(windows)} windows of {ctx}, "
              f"{positions} positions; KL divergence from float64; llama.cpp {llama_version}")
        print("| path | perplexity | mean KL | p99 KL | same top-1 | eval tokens/s |")
        print("|---|---|---|---|---|---|")
        for row in rows:
            name, ppl, kl, p99, top = row[:5]
            speed = f"{row[5]:.0f}" if len(row) > 5 else ""
            print(f"| {name} | {ppl:.4f} | {kl:.3g} | {p99:.3g} | {top:.2f}% | {speed} |")
        if args.calibrate:
            print(calibration_summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
