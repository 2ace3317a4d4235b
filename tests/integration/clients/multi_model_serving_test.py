#!/usr/bin/env python3
"""Two real models behind one router that reads no model file.

`kvfleet up --model SmolLM2 --model Qwen2.5-Coder-0.5B` starts a
cachemanager, one worker of each model and a router that learns both
models (tokenizer, chat template, context) from their workers. Through the
official `openai` client:
- /v1/models lists both, each with its context length;
- a greedy completion for each model equals `kvfleet generate --local`
  with that model (each detokenized by the router with its own tokenizer),
  whole and streamed, and the answer names the model asked for;
- a chat completion goes through each model's own template: the prompt
  token counts differ as the two templates do, and /tokenize of the same
  messages gives each count;
- requests for both models at once are each served right;
- an unknown model is a 404 naming it and listing the served ones, and a
  request naming no model is a 400 (there are two).

  multi_model_serving_test.py --cli kvfleet --model A.gguf --model B.gguf
"""
import argparse
import concurrent.futures
import os
import sys
import tempfile

import httpx2 as httpx  # the HTTP library the openai package is built on
import openai

from kvfleet_up import Failure, check, detokenized, local_greedy_ids, run_against_cluster

PROMPTS = ["The capital of France is", "def fibonacci(n):\n    "]
TOKENS = 12


def checks(cli, models):
    ids = [os.path.splitext(os.path.basename(m))[0] for m in models]

    def run(cluster):
        client = openai.OpenAI(base_url=f"http://{cluster.http}/v1", api_key="none", max_retries=0)
        listed = {m.id: m for m in client.models.list().data}
        check(set(listed) == set(ids), f"/v1/models lists {sorted(listed)}, not {sorted(ids)}")
        print(f"  /v1/models: {sorted(listed)}")

        def complete(model_id, prompt, stream=False):
            ask = dict(model=model_id, prompt=prompt, max_tokens=TOKENS, temperature=0, extra_body={"ignore_eos": True})
            if stream:
                return "".join(c.choices[0].text for c in client.completions.create(**ask, stream=True) if c.choices)
            reply = client.completions.create(**ask)
            check(reply.model == model_id, f"a completion for {model_id} answers as {reply.model}")
            return reply.choices[0].text

        expected = {}
        for path, model_id in zip(models, ids):
            for p in PROMPTS:
                expected[(model_id, p)] = detokenized(cluster.http, local_greedy_ids(cli, path, p, TOKENS), model_id)
        check(expected[(ids[0], PROMPTS[0])] != expected[(ids[1], PROMPTS[0])], "the two models answer alike")
        for (model_id, p), want in expected.items():
            whole, streamed = complete(model_id, p), complete(model_id, p, stream=True)
            check(whole == want, f"{model_id} {p!r}: served {whole!r}, local {want!r}")
            check(streamed == want, f"{model_id} {p!r}: streamed {streamed!r}, local {want!r}")
        print(f"  {len(expected)} completions equal generate --local, whole and streamed")

        with concurrent.futures.ThreadPoolExecutor(len(expected)) as pool:
            futures = {key: pool.submit(complete, *key) for key in expected}
            for key, f in futures.items():
                check(f.result() == expected[key], f"{key} at once with the others: {f.result()!r}")
        print("  both models at once: every answer unchanged")

        messages = [{"role": "user", "content": "What is the capital of France?"}]
        counts = {}
        for model_id in ids:
            reply = client.chat.completions.create(model=model_id, messages=messages, max_tokens=2, temperature=0)
            tokenized = httpx.post(f"http://{cluster.http}/tokenize", json={"model": model_id, "messages": messages})
            check(tokenized.status_code == 200, f"/tokenize for {model_id}: {tokenized.status_code} {tokenized.text}")
            check(reply.usage.prompt_tokens == tokenized.json()["count"],
                  f"{model_id}: the chat's prompt is {reply.usage.prompt_tokens} tokens, /tokenize says "
                  f"{tokenized.json()['count']}")
            counts[model_id] = reply.usage.prompt_tokens
        check(counts[ids[0]] != counts[ids[1]], f"both chats rendered alike: {counts}")
        print(f"  chat prompts through each model's own template: {counts}")

        try:
            client.completions.create(model="llama-70b", prompt="x", max_tokens=1)
            raise Failure("an unknown model was served")
        except openai.NotFoundError as e:
            check("llama-70b" in str(e) and all(i in str(e) for i in ids), f"the 404 does not name them: {e}")
        reply = httpx.post(f"http://{cluster.http}/v1/completions", json={"prompt": "x", "max_tokens": 1})
        check(reply.status_code == 400 and "name one of" in reply.text, f"no model named: {reply.status_code} {reply.text}")
        print("  an unknown model is a 404 naming the served ones; none named is a 400")

    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", action="append", required=True)
    a = ap.parse_args()
    missing = [m for m in a.model if not os.path.exists(m)]
    if missing:
        print(f"SKIP: no model at {missing} (scripts/fetch_model.sh fetches them)")
        return 77
    with tempfile.TemporaryDirectory() as log_dir:
        # The mode generate --local runs: a calibration record may choose a faster one with other tokens.
        return run_against_cluster(a.cli, a.model, log_dir, checks(a.cli, a.model),
                                   extra=("--cpu-activations", "f32", "--kv-cache-dtype", "f16"))


if __name__ == "__main__":
    sys.exit(main())
