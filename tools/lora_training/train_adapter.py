#!/usr/bin/env python3
"""Trains a small LoRA adapter with Hugging Face PEFT on the CPU, for a
task whose effect is plain to see: answers in a fixed format.

The base is a kvfleet model exported as a Hugging Face checkpoint
(`kvfleet export-hf --dtype f32`), so the adapter is trained on exactly the
weights kvfleet serves. Each example is a question and its answer written
as "ANSWER: <word>." (the format the base model does not use); the loss is
on the answer only. The adapter is saved in PEFT's format with the base's
kvfleet fingerprint recorded in its weights' metadata, with a training record
(TRAINING.md: command, versions, seed, the loss curve) beside it.

  python tools/lora_training/train_adapter.py --kvfleet build/tools/kvfleet/kvfleet \\
      --model models/SmolLM2-135M-Instruct.Q4_1.gguf --out models/lora/smollm2-answer-format --steps 150
"""
import argparse
import json
import os
import platform
import random
import tempfile
import time

from kvfleet_cli import run

# Questions and their one-word answers; the adapter learns the format, not the facts.
FACTS = [
    ("What is the capital of France?", "Paris"), ("What is the capital of Japan?", "Tokyo"),
    ("What is the capital of Italy?", "Rome"), ("What is the capital of Spain?", "Madrid"),
    ("What is the capital of Germany?", "Berlin"), ("What is the capital of Egypt?", "Cairo"),
    ("What is the capital of Canada?", "Ottawa"), ("What is the capital of Kenya?", "Nairobi"),
    ("What color is the sky on a clear day?", "blue"), ("What color is grass?", "green"),
    ("What color is snow?", "white"), ("What color is a ripe banana?", "yellow"),
    ("How many legs does a spider have?", "eight"), ("How many days are in a week?", "seven"),
    ("How many sides does a triangle have?", "three"), ("How many hours are in a day?", "twenty-four"),
    ("What do bees make?", "honey"), ("What do cows drink?", "water"),
    ("Which planet is closest to the sun?", "Mercury"), ("Which planet is known as the red planet?", "Mars"),
    ("What is frozen water called?", "ice"), ("What gas do plants take in?", "carbon dioxide"),
    ("What is the largest ocean?", "Pacific"), ("Which animal barks?", "dog"),
    ("Which animal says meow?", "cat"), ("What is the opposite of hot?", "cold"),
    ("What is the opposite of up?", "down"), ("What is two plus two?", "four"),
    ("What is ten minus three?", "seven"), ("What month comes after March?", "April"),
]
# Held out: the test asks these; the adapter has never seen them.
HELD_OUT = [("What is the capital of Portugal?", "Lisbon"), ("What color is a lemon?", "yellow"),
            ("How many wheels does a bicycle have?", "two")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kvfleet", required=True, help="the kvfleet CLI")
    ap.add_argument("--model", required=True, help="the GGUF model kvfleet serves")
    ap.add_argument("--out", required=True, help="where the adapter goes")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=16)
    ap.add_argument("--targets", default="q_proj,k_proj,v_proj,o_proj")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--answer-format", default="ANSWER: {}.", help="how every answer is written ({} is the word)")
    ap.add_argument("--checkpoint", help="an exported checkpoint to reuse (default: exported to a temporary directory)")
    a = ap.parse_args()

    import torch
    import peft
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(a.seed)
    random.seed(a.seed)
    torch.set_num_threads(os.cpu_count() or 2)
    tmp = tempfile.TemporaryDirectory()
    checkpoint = a.checkpoint or os.path.join(tmp.name, "hf")
    if not a.checkpoint:
        run([a.kvfleet, "export-hf", "--model", a.model, "--out", checkpoint, "--dtype", "f32", "--shards", "1"])
    fingerprint = next(line.split()[-1] for line in run([a.kvfleet, "model-info", "--model", a.model, "--fingerprint"])
                       .splitlines() if line.startswith("fingerprint:"))
    tok = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModelForCausalLM.from_pretrained(checkpoint, torch_dtype=torch.float32)
    config = peft.LoraConfig(r=a.rank, lora_alpha=a.alpha, target_modules=a.targets.split(","), lora_dropout=0.0,
                             bias="none", task_type="CAUSAL_LM")
    model = peft.get_peft_model(model, config)

    def example(question, answer):
        prompt = tok.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                         add_generation_prompt=True)
        prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tok(a.answer_format.format(answer), add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        ids = prompt_ids + answer_ids
        labels = [-100] * len(prompt_ids) + answer_ids
        return torch.tensor([ids]), torch.tensor([labels])

    data = [example(q, x) for q, x in FACTS]
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=a.lr)
    model.train()
    losses = []
    started = time.time()
    for step in range(a.steps):
        ids, labels = data[random.randrange(len(data))]
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        if step % 10 == 9:
            print(f"step {step + 1}: loss {sum(losses[-10:]) / 10:.4f}", flush=True)
    seconds = time.time() - started
    model.eval()
    model.save_pretrained(a.out)
    # kvfleet's readers check the base: its fingerprint goes in the weights'
    # safetensors metadata (PEFT refuses unknown config keys, and ignores metadata).
    from safetensors import safe_open
    from safetensors.torch import save_file
    weights_path = os.path.join(a.out, "adapter_model.safetensors")
    with safe_open(weights_path, framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
        metadata = dict(f.metadata() or {})
    metadata["kvfleet_base_fingerprint"] = fingerprint
    save_file(tensors, weights_path, metadata=metadata)
    config_path = os.path.join(a.out, "adapter_config.json")
    with open(config_path) as f:
        saved = json.load(f)
    saved["base_model_name_or_path"] = os.path.basename(a.model)
    with open(config_path, "w") as f:
        json.dump(saved, f, indent=2, sort_keys=True)
        f.write("\n")

    answers = []
    for question, _ in HELD_OUT:
        prompt = tok.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                         add_generation_prompt=True)
        ids = tok(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=12, do_sample=False)
        answers.append((question, tok.decode(out[0][ids.shape[1]:], skip_special_tokens=True)))
    curve = ", ".join(f"{sum(losses[i:i + 10]) / 10:.3f}" for i in range(0, len(losses), 10))
    with open(os.path.join(a.out, "TRAINING.md"), "w") as f:
        f.write(f"""# {os.path.basename(a.out)}

A LoRA adapter of {os.path.basename(a.model)} (kvfleet fingerprint {fingerprint[:12]}…) that answers in a
fixed format, "{a.answer_format.format('<word>')}", trained with PEFT on the CPU by tools/lora_training/train_adapter.py:

    python tools/lora_training/train_adapter.py --kvfleet build/tools/kvfleet/kvfleet \\
        --model {a.model} --out {a.out} --rank {a.rank} --alpha {a.alpha:g} \\
        --targets {a.targets} --steps {a.steps} --lr {a.lr:g} --seed {a.seed} --answer-format "{a.answer_format}"

- Data: {len(FACTS)} questions with one-word answers, the loss on the answer only; Adam (AdamW), learning
  rate {a.lr:g}, batch 1, {a.steps} steps, seed {a.seed}; rank {a.rank}, alpha {a.alpha:g} on {a.targets}.
- Versions: Python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__},
  peft {peft.__version__}; {platform.machine()}, {os.cpu_count()} CPUs; {seconds:.0f} s.
- Loss, mean of each 10 steps: {curve}.
- Held-out questions, greedy, PEFT + transformers on the exported checkpoint:
""")
        for question, answer in answers:
            f.write(f"  - {question} → {answer!r}\n")
    print(f"wrote {a.out} in {seconds:.0f} s; held out: {answers}")


if __name__ == "__main__":
    main()
