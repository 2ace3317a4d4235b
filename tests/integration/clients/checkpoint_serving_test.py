#!/usr/bin/env python3
"""`kvfleet up --model DIR` serving a Hugging Face checkpoint of real weights.

Qwen2.5-Coder-0.5B-Instruct is written as a two-shard bf16 checkpoint
(`kvfleet export-hf`) in a directory named like a fine-tune; `kvfleet up`
serves it through the real router, cachemanager and worker over gRPC, and the
official `openai` client asks it for completions. Checked:
- the model is listed under the directory's name;
- greedy completions (whole, streamed, and again from the prefix cache)
  equal `kvfleet generate --local` on the same checkpoint (its ids
  detokenized by the router);
- chat renders through the checkpoint's own Qwen template (read from its
  tokenizer_config.json) and answers; a malformed chat is refused with a
  400 naming the field, and the cluster keeps serving afterwards.

  checkpoint_serving_test.py --cli kvfleet --model qwen.gguf
"""
import argparse
import os
import subprocess
import sys
import tempfile

import openai

from kvfleet_up import Failure, check, detokenized, local_greedy_ids, run_against_cluster

# The first is long enough to fill whole KV blocks, so its second run hits the prefix cache.
PROMPTS = ["import math\n\n\ndef is_prime(n):\n    \"\"\"True when n is a prime number.\"\"\"\n    if n < 2:\n"
           "        return False\n    for d in range(2, int(math.sqrt(n)) + 1):\n        if n % d == 0:\n"
           "            return False\n    return True\n\n\ndef quicksort(items):\n    ",
           "The capital of France is"]
TOKENS = 16


def checks(cli, ckpt, name):
    def run(cluster):
        client = openai.OpenAI(base_url=f"http://{cluster.http}/v1", api_key="none", max_retries=0)
        listed = [m.id for m in client.models.list().data]
        check(listed == [name], f"models listed {listed}, expected the directory's name {name!r}")
        for prompt in PROMPTS:
            expected = detokenized(cluster.http, local_greedy_ids(cli, ckpt, prompt, TOKENS))
            ask = dict(model=name, prompt=prompt, max_tokens=TOKENS, temperature=0, extra_body={"ignore_eos": True})
            whole = client.completions.create(**ask)
            check(whole.usage.completion_tokens == TOKENS, f"{whole.usage}")
            check(whole.choices[0].text == expected, f"{prompt!r}: served {whole.choices[0].text!r}, local {expected!r}")
            again = client.completions.create(**ask)
            cached = again.usage.prompt_tokens_details.cached_tokens if again.usage.prompt_tokens_details else 0
            check(again.choices[0].text == expected, f"{prompt!r} again ({cached} cached): {again.choices[0].text!r}")
            check(prompt != PROMPTS[0] or cached > 0, f"the long prompt's second run hit no cached block: {again.usage}")
            streamed = "".join(c.choices[0].text for c in client.completions.create(**ask, stream=True) if c.choices)
            check(streamed == expected, f"streamed {streamed!r} != {expected!r}")
            print(f"  {prompt!r} -> {expected!r}: equal to the local run (whole, streamed, {cached} prompt tokens "
                  "cached)")
        reply = client.chat.completions.create(model=name, messages=[{"role": "user", "content": "Say hi."}],
                                               max_tokens=8, temperature=0)
        check(reply.choices[0].message.content and reply.choices[0].finish_reason in ("stop", "length"), f"{reply}")
        print(f"  chat through the checkpoint's template: {reply.choices[0].message.content!r}")
        try:
            client.chat.completions.create(model=name, messages=[{"role": "tool", "content": "4"}], max_tokens=4)
            raise Failure("a tool message answering no call was served")
        except openai.BadRequestError as e:
            check("tool_call_id" in str(e), f"refused unclearly: {e}")
            print(f"  malformed chat refused: {e.status_code} {str(e)[:120]}")
        after = client.completions.create(model=name, prompt=PROMPTS[1], max_tokens=2, temperature=0)
        check(after.choices[0].text, "the cluster stopped serving after a refused request")
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True, help="the Qwen2.5-Coder-0.5B GGUF the checkpoint is made from")
    args = ap.parse_args()
    if not os.path.exists(args.model):
        print(f"skipped: {args.model} not found (scripts/fetch_model.sh qwen2.5-coder-0.5b-instruct)")
        return 77
    with tempfile.TemporaryDirectory(prefix="kvfleet_ckpt_serving_") as tmp:
        name = "qwen2.5-coder-0.5b-ft"
        ckpt = os.path.join(tmp, name)
        made = subprocess.run([args.cli, "export-hf", "--model", args.model, "--out", ckpt, "--dtype", "bf16",
                               "--shards", "2"], capture_output=True, text=True)
        if made.returncode != 0:
            print(f"FAILED: export-hf: {made.stderr}")
            return 1
        try:
            return run_against_cluster(args.cli, ckpt + "/", os.path.join(tmp, "logs"), checks(args.cli, ckpt, name))
        except Failure as e:
            print(f"FAILED: {e}")
            return 1


if __name__ == "__main__":
    sys.exit(main())
