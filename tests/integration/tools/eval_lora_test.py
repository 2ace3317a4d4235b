#!/usr/bin/env python3
"""`kvfleet eval --lora`: a mode judged under a LoRA adapter.

On SmolLM2 and its trained adapter (models/lora/smollm2-answer-format):
the adapter changes the text's perplexity; 8-bit activations under the
adapter, against a reference saved under it, stay as close as the base's
own 8-bit run is to its reference (KL within 2x of the base's and the top
token agreeing at 90% of positions or more); and a reference saved without
the adapter is far from the adapter's run. (Every mode under an adapter
against float64 with the adapter merged, by the gate:
tests/reference/eval_reference.py --lora.)

  eval_lora_test.py --cli kvfleet --model SmolLM2.gguf --adapter models/lora/smollm2-answer-format --text docs/design.md
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def evaluate(cli, model, text, extra):
    out = subprocess.run([cli, "eval", "--model", model, "--text", text, "--ctx", "128", "--max-windows", "4",
                          "--threads", "2", "--device", "cpu", "--kv-cache-dtype", "f16", *extra],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"kvfleet eval {' '.join(extra)} failed: {out.stderr[-1500:]}")
    ppl = float(re.search(r"perplexity ([0-9.]+) \+/-", out.stdout).group(1))
    kl = re.search(r"KL divergence from the reference: mean ([0-9.e-]+)", out.stdout)
    top = re.search(r"same top token ([0-9.]+)%", out.stdout)
    return ppl, float(kl.group(1)) if kl else None, float(top.group(1)) if top else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--adapter", required=True)
    ap.add_argument("--text", required=True)
    a = ap.parse_args()
    for path in (a.model, a.text):
        if not os.path.exists(path):
            print(f"SKIP: no {path} (scripts/fetch_model.sh, scripts/fetch_eval_texts.sh)")
            return 77
    with tempfile.TemporaryDirectory() as tmp:
        base_ref, lora_ref = os.path.join(tmp, "base.ref"), os.path.join(tmp, "lora.ref")
        base_ppl, _, _ = evaluate(a.cli, a.model, a.text, ["--cpu-activations", "f32", "--save-reference", base_ref])
        lora = ["--lora", a.adapter]
        lora_ppl, _, _ = evaluate(a.cli, a.model, a.text, ["--cpu-activations", "f32", "--save-reference", lora_ref, *lora])
        _, base_kl, _ = evaluate(a.cli, a.model, a.text, ["--cpu-activations", "q8", "--reference", base_ref])
        _, lora_kl, lora_top = evaluate(a.cli, a.model, a.text, ["--cpu-activations", "q8", "--reference", lora_ref, *lora])
        _, cross_kl, _ = evaluate(a.cli, a.model, a.text, ["--cpu-activations", "f32", "--reference", base_ref, *lora])
        print(f"perplexity: base {base_ppl}, under the adapter {lora_ppl}; q8 KL from f32: base {base_kl}, "
              f"under the adapter {lora_kl} (same top token {lora_top}%); the adapter from the base's reference {cross_kl}")
        failures = []
        if lora_ppl == base_ppl:
            failures.append("the adapter did not change the perplexity")
        if not lora_kl < 2 * base_kl or not lora_top >= 90:
            failures.append(f"q8 under the adapter is far from its reference: KL {lora_kl} vs base {base_kl}")
        if not cross_kl > 10 * lora_kl:
            failures.append(f"a base reference is as close to the adapter's run as its own: {cross_kl}")
        for f in failures:
            print(f"FAILED: {f}")
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
