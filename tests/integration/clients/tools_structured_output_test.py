#!/usr/bin/env python3
"""Tool calling and structured outputs, end to end: the official `openai`
client and the gRPC Python client against `kvfleet up` serving
Qwen2.5-Coder-0.5B-Instruct (its own chat template, Hermes tool format).

- A tool round trip: the first turn with tool_choice "required" (and again
  with a named function) must be a call whose arguments validate against
  the tool's schema (the `jsonschema` package), whole and streamed (the
  streamed deltas assemble into the same call); the tool's answer goes
  back as a `tool` message and the model replies in text.
- json_schema outputs on 20 prompts all validate against their schemas and
  equal their streamed concatenation; json_object, regex and choice
  constrain as asked; logit_bias bans a token.
- Errors keep OpenAI's body shape and name the field: an invalid schema
  (its JSON path), a tool_choice naming an absent function, a tool message
  without tool_call_id; the cluster keeps serving.
- The gRPC API does the same in its own terms (tools, ToolChoice,
  OutputConstraint, tool-call deltas).

Exit 0: passed; 1: failed; 77: skipped (the model is not fetched).
"""
import argparse
import json
import os
import sys
import tempfile

import grpc
import httpx2 as httpx  # the HTTP library the openai package is built on
import jsonschema
import openai

from kvfleet_up import Failure, check, generate_stubs, run_against_cluster

WEATHER = {"type": "object",
           "properties": {"city": {"type": "string", "maxLength": 40},
                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"]}
TIME = {"type": "object", "properties": {"timezone": {"type": "string", "maxLength": 40}}, "required": ["timezone"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "Current time in a timezone",
                                           "parameters": TIME}}]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 30},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 150}},
          "required": ["name", "age"], "additionalProperties": False}
CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                         "country": {"type": "string", "maxLength": 30},
                                         "population_millions": {"type": "integer", "minimum": 0, "maximum": 1000}},
        "required": ["city", "country", "population_millions"], "additionalProperties": False}
LIST = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "string", "maxLength": 20},
                                                   "minItems": 1, "maxItems": 4}},
        "required": ["items"], "additionalProperties": False}
VERDICT = {"type": "object", "properties": {"answer": {"type": "boolean"},
                                            "confidence": {"type": "string", "enum": ["low", "medium", "high"]}},
           "required": ["answer", "confidence"], "additionalProperties": False}
JSON_PROMPTS = [
    (PERSON, "Describe a person named Ann who is 31."), (PERSON, "Invent a fictional astronaut."),
    (PERSON, "Who wrote Hamlet? Give name and age at death."), (PERSON, "A child called Tom, age 7."),
    (PERSON, "Make up a chess grandmaster."),
    (CITY, "Tell me about Paris."), (CITY, "Tell me about Tokyo."), (CITY, "Describe the largest city in Brazil."),
    (CITY, "Give facts about Cairo."), (CITY, "What about Sydney?"),
    (LIST, "List three primary colors."), (LIST, "Name some fruits."), (LIST, "Give me two programming languages."),
    (LIST, "List the first four planets."), (LIST, "Some words that rhyme with cat."),
    (VERDICT, "Is the earth round?"), (VERDICT, "Is 7 a prime number?"), (VERDICT, "Can fish fly?"),
    (VERDICT, "Is Python a compiled language?"), (VERDICT, "Is water wet?"),
]


def assembled_stream(stream):
    """(content, tool calls by index, finish_reason) from a streamed chat."""
    content, calls, finish = "", {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            call = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": "", "pieces": 0})
            call["id"] = tc.id or call["id"]
            if tc.function is not None:
                call["name"] += tc.function.name or ""
                call["arguments"] += tc.function.arguments or ""
                call["pieces"] += 1 if tc.function.arguments else 0
        finish = chunk.choices[0].finish_reason or finish
    return content, calls, finish


def check_call(name, arguments, allowed):
    check(name in allowed, f"called {name!r}, not one of {allowed}")
    args = json.loads(arguments)
    jsonschema.validate(args, SCHEMAS[name])
    return args


def check_tools(client, model):
    messages = [{"role": "user", "content": "What's the weather like in Paris today?"}]
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        ask = dict(model=model, messages=messages, tools=TOOLS, tool_choice=choice, temperature=0, max_tokens=120)
        whole = client.chat.completions.create(**ask)
        m = whole.choices[0].message
        check(whole.choices[0].finish_reason == "tool_calls" and m.tool_calls, f"{choice}: no call: {whole}")
        allowed = ["get_weather"] if isinstance(choice, dict) else list(SCHEMAS)
        args = check_call(m.tool_calls[0].function.name, m.tool_calls[0].function.arguments, allowed)
        content, calls, finish = assembled_stream(client.chat.completions.create(**ask, stream=True))
        check(finish == "tool_calls" and len(calls) == len(m.tool_calls), f"streamed {calls} finish {finish}")
        check(calls[0]["name"] == m.tool_calls[0].function.name and
              calls[0]["arguments"] == m.tool_calls[0].function.arguments,
              f"streamed call {calls[0]} != whole {m.tool_calls[0]}")
        # An enforced call's arguments stream as the model writes them.
        check(calls[0]["pieces"] > 3, f"the arguments came in {calls[0]['pieces']} piece(s), not streamed")
        print(f"  tool_choice {json.dumps(choice)}: {m.tool_calls[0].function.name}({args}); "
              f"streamed the same in {calls[0]['pieces']} argument deltas")
    # auto: free text, and any call the model starts is enforced from its
    # start tag on (so valid); streamed and whole agree either way.
    for question in ("What's the weather like in Paris today?", "What time is it in Tokyo? Use a tool.",
                     "Say hello."):
        ask = dict(model=model, messages=[{"role": "user", "content": question}], tools=TOOLS, temperature=0,
                   max_tokens=120)
        whole = client.chat.completions.create(**ask).choices[0]
        for c in whole.message.tool_calls or []:
            check_call(c.function.name, c.function.arguments, list(SCHEMAS))
        content, calls, finish = assembled_stream(client.chat.completions.create(**ask, stream=True))
        check(finish == whole.finish_reason and content == (whole.message.content or "") and
              [(c["name"], c["arguments"]) for _, c in sorted(calls.items())] ==
              [(c.function.name, c.function.arguments) for c in whole.message.tool_calls or []],
              f"auto {question!r}: streamed {content!r} {calls} {finish} != whole {whole}")
        print(f"  tool_choice auto, {question!r}: {len(calls)} call(s), finish {finish}; streamed the same")
    call = m.tool_calls[0]
    round_trip = messages + [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": call.id, "type": "function",
                         "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, "sky": "sunny"})}]
    ask = dict(model=model, messages=round_trip, tools=TOOLS, temperature=0, max_tokens=40)
    reply = client.chat.completions.create(**ask)
    text = reply.choices[0].message.content
    check(text and not reply.choices[0].message.tool_calls, f"the reply after the tool result: {reply}")
    streamed, calls, _ = assembled_stream(client.chat.completions.create(**ask, stream=True))
    check(streamed == text and not calls, f"streamed reply {streamed!r} != {text!r}")
    print(f"  after the tool's answer: {text!r} (streamed the same)")


def check_structured(client, model, http):
    for schema, prompt in JSON_PROMPTS:
        ask = dict(model=model, messages=[{"role": "user", "content": prompt}], temperature=0, max_tokens=120,
                   response_format={"type": "json_schema", "json_schema": {"name": "out", "schema": schema,
                                                                           "strict": True}})
        whole = client.chat.completions.create(**ask)
        text = whole.choices[0].message.content
        check(whole.choices[0].finish_reason == "stop", f"{prompt!r}: finish {whole.choices[0].finish_reason}: {text!r}")
        jsonschema.validate(json.loads(text), schema)
        streamed, _, _ = assembled_stream(client.chat.completions.create(**ask, stream=True))
        check(streamed == text, f"{prompt!r}: streamed {streamed!r} != {text!r}")
    print(f"  json_schema: {len(JSON_PROMPTS)} prompts, every output valid and equal to its stream")
    obj = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Describe a cat."}],
                                         response_format={"type": "json_object"}, temperature=0, max_tokens=80)
    if obj.choices[0].finish_reason == "stop":
        check(isinstance(json.loads(obj.choices[0].message.content), dict), f"json_object: {obj}")
    regex = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "A year?"}],
                                           extra_body={"structured_outputs": {"regex": "(19|20)[0-9]{2}"}},
                                           temperature=0, max_tokens=10)
    check(len(regex.choices[0].message.content) == 4 and regex.choices[0].message.content.isdigit(), f"{regex}")
    choice = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Is fire cold?"}],
                                            extra_body={"structured_outputs": {"choice": ["yes", "no"]}},
                                            temperature=0, max_tokens=5)
    check(choice.choices[0].message.content in ("yes", "no"), f"{choice}")
    free = client.completions.create(model=model, prompt="The capital of France is", max_tokens=1, temperature=0)
    banned = client.completions.create(model=model, prompt="The capital of France is", max_tokens=1, temperature=0,
                                       logit_bias={str(t): -100 for t in free_tokens(http, model, free)})
    check(banned.choices[0].text != free.choices[0].text, f"logit_bias -100 left {free.choices[0].text!r}")
    print(f"  json_object, regex {regex.choices[0].message.content!r}, choice "
          f"{choice.choices[0].message.content!r}, logit_bias: {free.choices[0].text!r} -> {banned.choices[0].text!r}")


def free_tokens(http, model, completion):
    r = httpx.post(f"http://{http}/tokenize", json={"model": model, "prompt": completion.choices[0].text,
                                                   "add_special_tokens": False}, timeout=30)
    return r.json()["tokens"]


def check_errors(client, model):
    def refused(what, param_part, **ask):
        try:
            client.chat.completions.create(model=model, max_tokens=4, **ask)
        except openai.BadRequestError as e:
            check(isinstance(e.body, dict) and "message" in e.body, f"{what}: not OpenAI's shape: {e.body}")
            check(param_part in str(e), f"{what}: {e} does not name {param_part!r}")
            print(f"  {what}: 400 {str(e)[:110]}")
            return
        raise Failure(f"{what} was accepted")
    hi = [{"role": "user", "content": "hi"}]
    refused("invalid schema", "$.properties.a.type", messages=hi,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "x", "schema": {"type": "object",
                                                                     "properties": {"a": {"type": "strin"}}}}})
    refused("absent function", "get_stock", messages=hi, tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "get_stock"}})
    refused("tool message without id", "tool_call_id", messages=hi + [{"role": "tool", "content": "4"}])
    after = client.chat.completions.create(model=model, messages=hi, max_tokens=4, temperature=0)
    check(after.choices[0].message.content, "the cluster stopped serving after refused requests")


def check_grpc(router, proto_dir, model):
    with tempfile.TemporaryDirectory() as stubs:
        pb, types, rpc = generate_stubs(proto_dir, stubs)
        stub = rpc.InferenceStub(grpc.insecure_channel(router))
        request = pb.ChatRequest(
            messages=[pb.ChatMessage(role="user", content="What's the weather like in Paris today?")],
            tools=[pb.Tool(name=t["function"]["name"], description=t["function"]["description"],
                           parameters_json=json.dumps(t["function"]["parameters"])) for t in TOOLS],
            tool_choice=pb.ToolChoice(mode=pb.ToolChoice.REQUIRED),
            options=pb.GenerationOptions(model=model, stopping=types.StoppingParams(max_tokens=120)))
        calls, finish = {}, None
        for r in stub.Chat(request, timeout=120):
            for d in r.tool_calls:
                c = calls.setdefault(d.index, {"id": "", "name": "", "arguments": "", "pieces": 0})
                c["id"] += d.id
                c["name"] += d.name
                c["arguments"] += d.arguments_delta
                c["pieces"] += 1
            finish = r.finish_reason or finish
        check(finish == types.FINISH_REASON_TOOL_CALLS and calls, f"gRPC: finish {finish}, calls {calls}")
        check_call(calls[0]["name"], calls[0]["arguments"], list(SCHEMAS))
        check(calls[0]["id"] and calls[0]["pieces"] > 3, f"gRPC: the call did not stream in pieces: {calls[0]}")
        # The round trip: the call and the tool's answer go back; the model replies in text.
        call = calls[0]
        round_trip = pb.ChatRequest(
            messages=list(request.messages) + [
                pb.ChatMessage(role="assistant", tool_calls=[pb.ToolCall(id=call["id"], name=call["name"],
                                                                         arguments_json=call["arguments"])]),
                pb.ChatMessage(role="tool", tool_call_id=call["id"],
                               content=json.dumps({"temperature": 21, "sky": "sunny"}))],
            tools=request.tools, options=pb.GenerationOptions(model=model, stopping=types.StoppingParams(max_tokens=40)))
        reply, reply_calls = "", 0
        for r in stub.Chat(round_trip, timeout=120):
            reply += r.text
            reply_calls += len(r.tool_calls)
        check(reply.strip() and reply_calls == 0, f"gRPC: the reply after the tool's answer: {reply!r}")
        constrained = pb.ChatRequest(
            messages=[pb.ChatMessage(role="user", content="Tell me about Rome.")],
            options=pb.GenerationOptions(model=model, stopping=types.StoppingParams(max_tokens=120),
                                         constraint=types.OutputConstraint(json_schema=json.dumps(CITY))))
        text = "".join(r.text for r in stub.Chat(constrained, timeout=120))
        jsonschema.validate(json.loads(text), CITY)
        print(f"  gRPC: call {calls[0]['name']}({calls[0]['arguments']}) in {calls[0]['pieces']} deltas; "
              f"reply {reply!r}; json_schema {text}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True, help="Qwen2.5-Coder-0.5B-Instruct GGUF")
    ap.add_argument("--proto-dir", required=True)
    args = ap.parse_args()
    if not os.path.exists(args.model):
        print(f"skipped: {args.model} not found (scripts/fetch_model.sh qwen2.5-coder-0.5b-instruct)")
        return 77
    model = os.path.basename(args.model)[:-len(".gguf")]

    def checks(cluster):
        client = openai.OpenAI(base_url=f"http://{cluster.http}/v1", api_key="none", max_retries=0)
        check_tools(client, model)
        check_structured(client, model, cluster.http)
        check_errors(client, model)
        check_grpc(cluster.router, args.proto_dir, model)

    with tempfile.TemporaryDirectory(prefix="kvfleet_tools_") as tmp:
        return run_against_cluster(args.cli, args.model, os.path.join(tmp, "logs"), checks)


if __name__ == "__main__":
    sys.exit(main())
