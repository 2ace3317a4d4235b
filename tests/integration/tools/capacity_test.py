#!/usr/bin/env python3
"""`kvfleet capacity` against the worker it plans for, and on the example
everyone sizes by.

1. For each model (a GGUF, a sliding-window GGUF, a Hugging Face checkpoint
   directory) and KV budget, a real kvfleet-worker starts with that
   --kv-cache-memory and logs its memory plan; the planner, given the same
   budget, prints the same number of blocks.
2. A bare config.json of the Llama 3 70B shape: 327,680 bytes a token at
   16 bits, about 2.6 GB for an 8,000-token conversation, about 42 GB for
   sixteen, and the weights estimated at about 141 GB in bf16.

  capacity_test.py --cli kvfleet --worker kvfleet-worker --model M.gguf [--model ...] [--checkpoint-from Q.gguf]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

BUDGETS = ["64MiB", "300MiB"]


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def planner(cli, *args):
    out = subprocess.run([cli, "capacity", *args], capture_output=True, text=True)
    check(out.returncode == 0, f"kvfleet capacity {' '.join(args)}: exit {out.returncode}: {out.stderr}")
    return out.stdout


def planned_blocks(cli, model, budget):
    text = planner(cli, "--model", model, "--kv-cache-memory", budget)
    # A sliding-window model's cache is counted in pages (a block of a page
    # group's layers), which is what the worker's memory plan allocates.
    m = re.search(r"^KV (?:blocks|pages):\s+([\d,]+) per device", text, re.M)
    check(m is not None, f"no 'KV blocks:' or 'KV pages:' line in:\n{text}")
    return int(m.group(1).replace(",", "")), text


def worker_blocks(worker, model, budget, log_path):
    """Starts a worker, reads the block count its memory plan logs, stops it."""
    with open(log_path, "w") as log:
        p = subprocess.Popen([worker, "--model", model, "--listen", "127.0.0.1:0", "--metrics-port", "0",
                              "--kv-cache-memory", budget, "--threads", "1", "--device", "cpu"],
                             stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            with open(log_path) as f:
                m = re.search(r"memory plan on .* = (\d+) blocks of (\d+) tokens", f.read())
            if m:
                return int(m.group(1))
            check(p.poll() is None, f"the worker exited {p.returncode} before its memory plan: {open(log_path).read()}")
            time.sleep(0.2)
        raise Failure(f"no memory plan logged within 120 s: {open(log_path).read()}")
    finally:
        p.kill()
        p.wait()


def seventy_b(cli, tmp):
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
              "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80, "num_attention_heads": 64,
              "num_key_value_heads": 8, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
              "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
              "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
    path = os.path.join(tmp, "config.json")
    with open(path, "w") as f:
        json.dump(config, f)
    text = planner(cli, "--model", path, "--device-memory", "141GB", "--devices", "2", "--context", "8000",
                   "--concurrency", "16")
    print(text)
    check("327,680 bytes" in text, "KV per token is not 327,680 bytes")
    check(re.search(r"^KV per conversation: 2\.62 GB .* for 8,000 tokens", text, re.M), "8,000 tokens ≠ 2.62 GB")
    check(re.search(r"^KV for 16 at once:\s+41\.94 GB", text, re.M), "sixteen conversations ≠ 41.94 GB")
    check(re.search(r"^weights:\s+141\.\d+ GB .*estimated: 70,5\d\d,\d{3},\d{3} parameters at bf16", text, re.M),
          "the 70B weight estimate")
    check("do not fit one device" in text, "141 GB of weights on a 141 GB device should not fit")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--checkpoint-from", help="a GGUF to export as a checkpoint directory and plan for too")
    args = ap.parse_args()
    models = [m for m in args.model if os.path.exists(m)]
    missing = [m for m in args.model if not os.path.exists(m)]
    if missing:
        print(f"skipped: {missing} not found (scripts/fetch_model.sh)")
        return 77
    try:
        with tempfile.TemporaryDirectory(prefix="kvfleet_capacity_") as tmp:
            if args.checkpoint_from and os.path.exists(args.checkpoint_from):
                ckpt = os.path.join(tmp, "checkpoint")
                subprocess.run([args.cli, "export-hf", "--model", args.checkpoint_from, "--out", ckpt, "--shards", "2"],
                               check=True, capture_output=True)
                models.append(ckpt)
            for model in models:
                for budget in BUDGETS:
                    planned, text = planned_blocks(args.cli, model, budget)
                    started = worker_blocks(args.worker, model, budget, os.path.join(tmp, "worker.log"))
                    print(f"{os.path.basename(model.rstrip('/'))} at {budget}: planner {planned} blocks, "
                          f"worker {started}")
                    check(planned == started, f"the planner's {planned} blocks are not the worker's {started}")
                if "less than keeping every block" in text:
                    print("  " + next(l.strip() for l in text.splitlines() if "less than keeping every block" in l))
            seventy_b(args.cli, tmp)
    except (Failure, subprocess.CalledProcessError) as e:
        print(f"FAILED: {e}")
        return 1
    print("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
