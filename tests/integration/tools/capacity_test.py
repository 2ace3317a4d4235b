#!/usr/bin/env python3
"""`kvfleet capacity` against the worker it plans for, and on the example
everyone sizes by.

1. For each model (a GGUF, a sliding-window GGUF, a Hugging Face checkpoint
   directory) and KV budget, a real kvfleet-worker starts with that
   --kv-cache-memory and logs its memory plan; the planner, given the same
   budget, prints the same number of blocks.
2. The KV format `--kv-dtype auto` counts is the one the worker runs: the
   comparison above passes through each model's calibration record when
   one sits beside it (both choose from it), and a record written here
   with an 8-bit KV mode passing is followed by both, on the CPU; a cuda
   plan stays f16, and a --calibration that does not exist is refused.
3. A bare config.json of the Llama 3 70B shape: 327,680 bytes a token at
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


def worker_blocks(worker, model, budget, log_path, extra=()):
    """Starts a worker, reads the block count its memory plan logs, stops it."""
    with open(log_path, "w") as log:
        p = subprocess.Popen([worker, "--model", model, "--listen", "127.0.0.1:0", "--metrics-port", "0",
                              "--kv-cache-memory", budget, "--threads", "1", "--device", "cpu", *extra],
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


def record_for(cli, model, path, tmp):
    """A calibration record in which only f32 + int8_rotated passes, for `model`."""
    fingerprint = subprocess.run([cli, "model-info", "--model", model, "--fingerprint"], capture_output=True,
                                 text=True)
    check(fingerprint.returncode == 0, f"kvfleet model-info --fingerprint: {fingerprint.stderr}")
    fp = fingerprint.stdout.strip().split()[-1]
    modes = []
    for a, prefix in (("f32", "cpu/1"), ("q8", "cpu-q8/3")):
        for kv in ("f16", "int8", "int8_rotated", "fp8_e4m3"):
            kl = 0.0 if (a, kv) == ("f32", "f16") else (0.001 if (a, kv) == ("f32", "int8_rotated") else 0.5)
            modes.append({"cpu_activations": a, "kv_cache_dtype": kv,
                          "numerics": prefix + ("" if kv == "f16" else f"+kv-{kv}"), "perplexity": 10.0,
                          "mean_kl": kl, "median_kl": kl, "p99_kl": kl, "max_kl": kl, "same_top1": 0.9,
                          "tokens_per_second": 1.0, "passes": kl <= 0.002})
    with open(path, "w") as f:
        json.dump({"format": "kvfleet-calibration-v1", "model_fingerprint": fp, "backend": "cpu",
                   "text": {"name": "test", "sha256": "0", "positions": 1, "context": 16}, "reference": "test",
                   "gate": {"activations_mean_kl": 0.002, "kv_mean_kl": 0.002, "source": "test"},
                   "modes": modes, "command": "capacity_test.py"}, f)


def check_auto(cli, worker, model, tmp):
    record = os.path.join(tmp, "record.json")
    record_for(cli, model, record, tmp)
    text = planner(cli, "--model", model, "--kv-cache-memory", "64MiB", "--calibration", record)
    check("int8_rotated)" in text and "f32 activations, int8_rotated KV from" in text,
          f"--kv-dtype auto did not count the record's int8_rotated:\n{text}")
    planned = int(re.search(r"^KV (?:blocks|pages):\s+([\d,]+) per device", text, re.M).group(1).replace(",", ""))
    started = worker_blocks(worker, model, "64MiB", os.path.join(tmp, "auto.log"), ["--calibration", record])
    check(planned == started, f"with the record: the planner's {planned} blocks are not the worker's {started}")
    print(f"{os.path.basename(model)} with a record choosing int8_rotated: planner {planned} blocks, worker {started}")
    gpu = planner(cli, "--model", model, "--kv-cache-memory", "64MiB", "--calibration", record, "--device", "cuda")
    check(", f16)" in gpu and "measured on the cpu backend" in gpu, f"a cuda plan should stay f16:\n{gpu}")
    missing = subprocess.run([cli, "capacity", "--model", model, "--calibration", os.path.join(tmp, "none.json")],
                             capture_output=True, text=True)
    check(missing.returncode != 0 and "--calibration " in missing.stderr and "none.json" in missing.stderr,
          f"a missing --calibration was not refused by name: {missing.returncode} {missing.stderr}")


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
            check_auto(args.cli, args.worker, models[0], tmp)
            seventy_b(args.cli, tmp)
    except (Failure, subprocess.CalledProcessError) as e:
        print(f"FAILED: {e}")
        return 1
    print("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
