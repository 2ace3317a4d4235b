#!/usr/bin/env python3
"""Chat prompts with tools, end to end: what the router hands a chat
template must be what the client sent, so its prompt equals Hugging Face's
pipeline token for token.

The reference is that pipeline built from code kvfleet did not write:
jinja2 configured as transformers' apply_chat_template (tests/reference/
jinja_hf.py) renders the template over the request's messages and tools as
the client sent them (an assistant call's JSON arguments as an object, as
transformers' own examples and vLLM pass them), and Hugging Face
`tokenizers`, built from the GGUF's vocabulary and merges with the `gguf`
package (tests/reference/tokenizer_reference.py), encodes it.

Templates: Qwen2.5-Coder's own (from its GGUF, through `kvfleet up`), and
Llama 3.1's, Mistral Nemo's and Hermes 3's tool-use templates (llama.cpp's
template corpus, fetched as tests/reference/jinja_reference.py fetches it),
each through a second router on the same worker with --chat-template.
Conversations: one tool; a richer tool (two properties, one with its own
description) after a system message; tools whose keys come in an unusual
order; an assistant tool call answered by a tool result. For each, through
the official `openai` client and the HTTP API:
  - `usage.prompt_tokens` of a chat completion equals the reference's count;
  - POST /tokenize with the same `messages`, `tools` (and
    `chat_template_kwargs`) returns the reference's token ids.

Exit 0: passed; 1: failed; 77: skipped (the model or the corpus cannot be had).
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time

import httpx2 as httpx  # the HTTP library the openai package is built on
import openai

from kvfleet_up import Failure, check, free_port, run_against_cluster

REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference")
sys.path.insert(0, REFERENCE)
from jinja_hf import render  # noqa: E402
from jinja_reference import corpus_templates  # noqa: E402
from tokenizer_gguf import read_tokenizer_metadata  # noqa: E402
from tokenizer_reference import build_oracle  # noqa: E402

CORPUS = {"llama-3.1": "meta-llama-Llama-3.1-8B-Instruct",
          "mistral-nemo": "mistralai-Mistral-Nemo-Instruct-2407",
          "hermes-3": "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"}

WEATHER = {"type": "function",
           "function": {"name": "get_weather", "description": "Get the current weather in a city",
                        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                       "required": ["city"]}}}
FORECAST = {"type": "function",
            "function": {"name": "get_forecast", "description": "The forecast for the coming days",
                         "parameters": {"type": "object",
                                        "properties": {"city": {"type": "string",
                                                                "description": "The city, e.g. Paris"},
                                                       "days": {"type": "integer"}},
                                        "required": ["city", "days"]}}}
# Keys in an order no rebuilt object would have: parameters before the
# description, required before properties.
UNUSUAL = {"function": {"parameters": {"required": ["zone"], "type": "object",
                                       "properties": {"zone": {"description": "An IANA zone", "type": "string"}}},
                        "name": "get_time", "description": "The time in a zone"},
           "type": "function"}

CALL_ID = "a1B2c3D4e"  # nine alphanumerics: Mistral's templates require it
CONVERSATIONS = {
    "one tool": ([{"role": "user", "content": "What is the weather in Paris?"}], [WEATHER]),
    "richer tool, system": ([{"role": "system", "content": "You are a terse assistant."},
                             {"role": "user", "content": "Will it rain in Lyon this week?"}], [WEATHER, FORECAST]),
    "unusual key order": ([{"role": "user", "content": "What time is it in Tokyo?"}], [UNUSUAL, WEATHER]),
    "call and result": ([{"role": "system", "content": "You are a terse assistant."},
                         {"role": "user", "content": "What is the weather in Paris?"},
                         {"role": "assistant", "content": None,
                          "tool_calls": [{"id": CALL_ID, "type": "function",
                                          "function": {"name": "get_weather",
                                                       "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
                         {"role": "tool", "tool_call_id": CALL_ID,
                          "content": "{\"temperature\": 21, \"sky\": \"clear\"}"}], [WEATHER, FORECAST]),
}


def as_template_sees(messages):
    """The messages as the reference renders them: each call's arguments as an object."""
    out = copy.deepcopy(messages)
    for m in out:
        for call in m.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


class Reference:
    def __init__(self, model):
        meta = read_tokenizer_metadata(model)
        self.oracle = build_oracle(meta, "qwen2")
        self.bos = meta["tokens"][meta["bos_token_id"]] if "bos_token_id" in meta else ""
        self.eos = meta["tokens"][meta["eos_token_id"]] if "eos_token_id" in meta else ""
        self.own_template = meta["chat_template"]

    def ids(self, template, messages, tools, kwargs=None):
        context = {"messages": as_template_sees(messages), "tools": tools, "documents": None,
                   "add_generation_prompt": True, "bos_token": self.bos, "eos_token": self.eos, **(kwargs or {})}
        ok, text = render(template, context, now=int(time.time()))
        check(ok, f"jinja2 could not render the reference: {text}")
        return self.oracle.encode(text, add_special_tokens=False).ids


def check_router(name, template, http, model, reference):
    client = openai.OpenAI(base_url=f"http://{http}/v1", api_key="none", max_retries=0)
    for what, (messages, tools) in CONVERSATIONS.items():
        want = reference.ids(template, messages, tools)
        answer = client.chat.completions.create(model=model, messages=messages, tools=tools, max_tokens=1,
                                                temperature=0)
        check(answer.usage.prompt_tokens == len(want),
              f"{name}, {what}: the chat request reports {answer.usage.prompt_tokens} prompt tokens; "
              f"Hugging Face's pipeline gives {len(want)}")
        tokenized = httpx.post(f"http://{http}/tokenize",
                               json={"model": model, "messages": messages, "tools": tools}, timeout=30)
        check(tokenized.is_success, f"{name}, {what}: /tokenize answered {tokenized.status_code}: {tokenized.text}")
        got = tokenized.json()["tokens"]
        if got != want:
            at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            raise Failure(f"{name}, {what}: /tokenize differs from Hugging Face's pipeline at token {at} "
                          f"({len(got)} against {len(want)}): kvfleet "
                          f"{reference.oracle.decode(got[max(0, at - 8):at + 8])!r}, reference "
                          f"{reference.oracle.decode(want[max(0, at - 8):at + 8])!r}")
        print(f"  {name}, {what}: {len(want)} tokens, identical")
    # chat_template_kwargs reach the template in the chat and in /tokenize
    # alike: Llama 3.1's template prints `date_string` (the others ignore
    # it), and a reserved name is refused with the field named.
    messages, tools = CONVERSATIONS["one tool"]
    kwargs = {"date_string": "05 Dec 2026"}
    want = reference.ids(template, messages, tools, kwargs)
    if name == "llama-3.1":
        check(want != reference.ids(template, messages, tools),
              f"{name}: the reference ignores date_string, so this check would not bite")
    with_kwargs = httpx.post(f"http://{http}/tokenize", json={"model": model, "messages": messages, "tools": tools,
                                                              "chat_template_kwargs": kwargs}, timeout=30)
    check(with_kwargs.is_success and with_kwargs.json()["tokens"] == want,
          f"{name}: /tokenize with chat_template_kwargs differs from Hugging Face's pipeline: {with_kwargs.text[:200]}")
    answer = client.chat.completions.create(model=model, messages=messages, tools=tools, max_tokens=1, temperature=0,
                                            extra_body={"chat_template_kwargs": kwargs})
    check(answer.usage.prompt_tokens == len(want),
          f"{name}: with chat_template_kwargs the chat reports {answer.usage.prompt_tokens} prompt tokens; "
          f"Hugging Face's pipeline gives {len(want)}")
    refused = httpx.post(f"http://{http}/tokenize", json={"model": model, "messages": messages, "tools": tools,
                                                          "chat_template_kwargs": {"tools": []}}, timeout=30)
    check(refused.status_code == 400 and "tools" in refused.text,
          f"{name}: chat_template_kwargs replacing `tools` was not refused: {refused.status_code} {refused.text}")


def start_router(router_binary, model_path, template_path, cluster, log_dir, name):
    http = f"127.0.0.1:{free_port()}"
    log = open(os.path.join(log_dir, f"router-{name}.log"), "w")
    router = subprocess.Popen(
        [router_binary, "--model", model_path, "--cachemanager", cluster.cachemanager, "--listen", "127.0.0.1:0",
         "--metrics-port", "0", "--http-listen", http, "--chat-template", template_path],
        stdout=subprocess.PIPE, stderr=log, text=True)
    for line in router.stdout:
        if line.startswith("kvfleet-router ready"):
            break
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if httpx.get(f"http://{http}/health", timeout=5).is_success:
                return router, http
        except httpx.TransportError:
            pass
        time.sleep(0.2)  # the router learns the worker from the cachemanager
    router.kill()
    raise Failure(f"the router with {name}'s template never became healthy (log {log.name})")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cli", required=True)
    parser.add_argument("--router", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--corpus-cache", required=True)
    args = parser.parse_args()
    if not os.path.exists(args.model):
        print(f"SKIP: {args.model} is not fetched (scripts/fetch_model.sh qwen2.5-coder-0.5b-instruct)")
        return 77
    os.makedirs(args.corpus_cache, exist_ok=True)
    corpus = {t.name: t.text for t in corpus_templates(args.corpus_cache)}
    missing = [n for n in CORPUS.values() if n not in corpus]
    if missing:
        print(f"SKIP: llama.cpp's template corpus lacks {missing} (no network?)")
        return 77
    reference = Reference(args.model)

    def checks(cluster):
        model = openai.OpenAI(base_url=f"http://{cluster.http}/v1", api_key="none").models.list().data[0].id
        check_router("Qwen2.5-Coder (its own)", reference.own_template, cluster.http, model, reference)
        for name, corpus_name in CORPUS.items():
            path = os.path.join(cluster.log_dir, f"{name}.jinja")
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(corpus[corpus_name])
            router, http = start_router(args.router, args.model, path, cluster, cluster.log_dir, name)
            try:
                check_router(name, corpus[corpus_name], http, model, reference)
            finally:
                router.terminate()
                router.wait(timeout=60)

    with tempfile.TemporaryDirectory(prefix="kvfleet-chat-template-") as tmp:
        return run_against_cluster(args.cli, args.model, tmp, checks)

if __name__ == "__main__":
    sys.exit(main())
