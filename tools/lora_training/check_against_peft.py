#!/usr/bin/env python3
"""Checks kvfleet's LoRA against Hugging Face PEFT + transformers on the
same weights: the base model exported from its GGUF (`kvfleet export-hf
--dtype f32`, the GGUF's values exactly) with the adapter applied by PEFT,
against `kvfleet logits --lora` and `kvfleet generate --local --lora` on the
GGUF. Prints, for each prompt, the next-token logits' largest difference
relative to the largest logit and whether the greedy tokens agree; exits 1
when a difference passes --tolerance or a greedy token differs.

  python tools/lora_training/check_against_peft.py --kvfleet build/tools/kvfleet/kvfleet \\
      --model models/SmolLM2-135M-Instruct.Q4_1.gguf --adapter models/lora/smollm2-answer-format
"""
import argparse
import os
import sys
import tempfile

from kvfleet_cli import run

PROMPTS = ["What is the capital of Portugal?", "How many wheels does a bicycle have?", "Write a haiku about rain."]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kvfleet", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--adapter", required=True)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--tolerance", type=float, default=5e-3, help="largest |Δlogit| / max|logit| allowed")
    ap.add_argument("--checkpoint", help="an exported checkpoint to reuse")
    a = ap.parse_args()

    import numpy as np
    import peft
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = tempfile.TemporaryDirectory()
    checkpoint = a.checkpoint or os.path.join(tmp.name, "hf")
    if not a.checkpoint:
        run([a.kvfleet, "export-hf", "--model", a.model, "--out", checkpoint, "--dtype", "f32", "--shards", "1"])
    tok = AutoTokenizer.from_pretrained(checkpoint)
    base = AutoModelForCausalLM.from_pretrained(checkpoint, torch_dtype=torch.float32)
    model = peft.PeftModel.from_pretrained(base, a.adapter).eval()
    failed = False
    for prompt in PROMPTS:
        text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        # Greedy by hand: generate() would stop or pad at the end-of-turn token, which kvfleet's --ignore-eos passes.
        greedy, margins, x = [], [], torch.tensor([ids])
        with torch.no_grad():
            reference = model(x).logits[0, -1].double().numpy()
            for _ in range(a.tokens):
                top = torch.topk(model(x).logits[0, -1], 2)
                margins.append(float(top.values[0] - top.values[1]))
                greedy.append(int(top.indices[0]))
                x = torch.cat([x, top.indices[:1].view(1, 1)], dim=1)
        out = os.path.join(tmp.name, "logits.bin")
        run([a.kvfleet, "logits", "--model", a.model, "--prompt-token-ids", ",".join(map(str, ids)), "--out", out,
             "--threads", "2", "--device", "cpu", "--lora", a.adapter])
        ours = np.fromfile(out, dtype=np.float32).astype(np.float64)
        relative = float(np.max(np.abs(ours - reference)) / np.max(np.abs(reference)))
        served = run([a.kvfleet, "generate", "--local", "--model", a.model, "--prompt-token-ids", ",".join(map(str, ids)),
                      "--max-tokens", str(a.tokens), "--temperature", "0", "--ignore-eos", "--output", "ids",
                      "--threads", "2", "--device", "cpu", "--lora", a.adapter]).strip().splitlines()[-1]
        ours_greedy = [int(t) for t in served.split(",")]
        agree = ours_greedy == greedy
        failed = failed or relative > a.tolerance or not agree
        print(f"{prompt!r}: max |Δlogit| / max|logit| = {relative:.2e}; argmax {int(np.argmax(ours))} vs "
              f"{int(np.argmax(reference))}; greedy {len(greedy)} tokens {'identical' if agree else 'DIFFER'} "
              f"(smallest top-2 margin {min(margins):.3f}): {tok.decode(ours_greedy)!r}"
              + ("" if agree else f" vs {tok.decode(greedy)!r}"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
