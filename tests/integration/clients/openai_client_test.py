"""The OpenAI-compatible HTTP API with the official `openai` Python package
(PyPI, pinned in scripts/setup.sh) against a real cluster started by
`kvfleet up` with the real default model:

- chat and completions, streamed and whole: the concatenated deltas equal
  the whole text (greedy); usage equals the gRPC API's for the same request,
  cached tokens included on a repeated prompt; stop; seed reproducibility;
  logprobs; /v1/models; /tokenize and /detokenize;
- errors (malformed JSON, unknown model, n = 2, a prompt longer than the
  context, an unsupported value) have the right status and an OpenAI-shaped
  body the client raises as the right exception class;
- `curl -N` shows the SSE framing;
- a client that disconnects mid-stream leaves the worker's KV blocks back
  at baseline at once;
- a second router on the same cluster with TLS, tenant tokens and a quota:
  the client verifies the certificate (and refuses a wrong CA), a missing
  token is 401, a request past --http-request-timeout 504, a quota's
  refusal 429 with Retry-After.

The clients run with max_retries=0: the package retries 429 and 5xx by
default, which would hide the statuses under test.

Exit 0: passed; 1: failed; 77: skipped (the default model is not fetched).
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

import grpc
import httpx2 as httpx  # the HTTP library the openai package is built on
import openai

from kvfleet_up import Failure, check, free_port, generate_stubs, run_against_cluster

MESSAGES = [{"role": "system", "content": "You are a concise assistant."},
            {"role": "user", "content": "What is the capital of France?"}]


def used_kv_blocks(worker_metrics):
    with urllib.request.urlopen(worker_metrics, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith('kvfleet_worker_kv_blocks{') and 'state="used"' in line:
                return float(line.split()[-1])
    raise Failure(f"no kvfleet_worker_kv_blocks{{state=\"used\"}} at {worker_metrics}")


def check_generation(client, model, http, pb, stub):
    # Chat, whole and streamed: the same greedy text, token for token.
    whole = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=16, temperature=0)
    text = whole.choices[0].message.content
    print(f"chat: {text!r} usage {whole.usage}")
    check("Paris" in text, f"chat answered {text!r}")
    check(whole.object == "chat.completion" and whole.choices[0].message.role == "assistant", f"{whole}")
    check(whole.choices[0].finish_reason in ("stop", "length"), f"finish {whole.choices[0].finish_reason}")
    chunks = list(client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=16, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    check(streamed == text, f"streamed {streamed!r} != whole {text!r}")
    check(chunks[0].choices[0].delta.role == "assistant", "the stream does not open with the assistant role")
    check(chunks[-1].usage is not None and not chunks[-1].choices, "include_usage sent no final usage chunk")
    check(chunks[-1].usage.completion_tokens == whole.usage.completion_tokens, "stream usage differs")

    # Usage equals the gRPC API's for the same request; a repeated prompt is
    # served from the cache on both (the first call above warmed it).
    request = pb.ChatRequest(messages=[pb.ChatMessage(role=m["role"], content=m["content"]) for m in MESSAGES],
                             options=pb.GenerationOptions(stopping={"max_tokens": 16}))
    grpc_messages = list(stub.Chat(request, timeout=120))
    grpc_usage = grpc_messages[-1].usage
    again = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=16, temperature=0)
    print(f"gRPC usage: {grpc_usage}; HTTP again: {again.usage}")
    check("".join(m.text for m in grpc_messages) == text, "gRPC's text differs from HTTP's")
    check(again.usage.prompt_tokens == grpc_usage.prompt_tokens, "prompt_tokens differ from gRPC's")
    check(again.usage.completion_tokens == grpc_usage.generated_tokens, "completion_tokens differ from gRPC's")
    check(again.usage.total_tokens == grpc_usage.prompt_tokens + grpc_usage.generated_tokens, "total_tokens")
    cached = again.usage.prompt_tokens_details.cached_tokens
    check(cached > 0 and cached == grpc_usage.cached_prompt_tokens,
          f"cached_tokens {cached}, gRPC's cached_prompt_tokens {grpc_usage.cached_prompt_tokens}")

    # Completions, whole and streamed, with a text prompt and with its token ids.
    prompt = "The three primary colors are"
    completion = client.completions.create(model=model, prompt=prompt, max_tokens=12, temperature=0,
                                           extra_body={"ignore_eos": True})
    ctext = completion.choices[0].text
    check(completion.choices[0].finish_reason == "length" and completion.usage.completion_tokens == 12,
          f"{completion}")
    cstream = "".join(c.choices[0].text for c in client.completions.create(
        model=model, prompt=prompt, max_tokens=12, temperature=0, stream=True, extra_body={"ignore_eos": True})
        if c.choices)
    check(cstream == ctext, f"streamed completion {cstream!r} != {ctext!r}")
    tokenized = httpx.post(f"http://{http}/tokenize", json={"prompt": prompt}).json()
    check(tokenized["count"] == completion.usage.prompt_tokens, f"/tokenize {tokenized} vs usage {completion.usage}")
    by_ids = client.completions.create(model=model, prompt=tokenized["tokens"], max_tokens=12, temperature=0,
                                       extra_body={"ignore_eos": True})
    check(by_ids.choices[0].text == ctext, "a token-id prompt completes differently from its text")
    detok = httpx.post(f"http://{http}/detokenize", json={"tokens": tokenized["tokens"]})
    check(detok.json()["prompt"] == prompt, f"/detokenize gave {detok.text}")
    print(f"completion: {ctext!r}")

    # stop: the text ends before the stop string, finish_reason stop.
    stopped = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=16, temperature=0,
                                             stop=["Paris"])
    check("Paris" not in stopped.choices[0].message.content and stopped.choices[0].finish_reason == "stop",
          f"stop: {stopped.choices[0]}")

    # seed: the same sampled text twice, streamed or not.
    sampled = [client.completions.create(model=model, prompt="Once upon a time", max_tokens=16, temperature=0.9,
                                         seed=1234).choices[0].text for _ in range(2)]
    sampled.append("".join(c.choices[0].text for c in client.completions.create(
        model=model, prompt="Once upon a time", max_tokens=16, temperature=0.9, seed=1234, stream=True)
        if c.choices))
    check(len(set(sampled)) == 1, f"seed 1234 gave different texts: {sampled}")

    # logprobs in each endpoint's shape.
    lp = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=4, temperature=0, logprobs=True,
                                        top_logprobs=3).choices[0].logprobs.content
    check(len(lp) == 4 and all(len(t.top_logprobs) == 3 and t.logprob <= 0 for t in lp), f"chat logprobs {lp}")
    check(lp[0].top_logprobs[0].logprob >= lp[0].top_logprobs[1].logprob, "top_logprobs not most likely first")
    clp = client.completions.create(model=model, prompt=prompt, max_tokens=4, temperature=0, logprobs=2)
    check(len(clp.choices[0].logprobs.tokens) == 4 and len(clp.choices[0].logprobs.top_logprobs[0]) == 2,
          f"completions logprobs {clp.choices[0].logprobs}")

    models = client.models.list().data
    check([m.id for m in models] == [model], f"/v1/models: {models}")
    check(client.models.retrieve(model).id == model, "/v1/models/{id}")


def check_errors(client, model, http):
    def raises(exception, call, needle):
        try:
            call()
        except exception as e:
            body = e.body if isinstance(e.body, dict) else {}
            check(needle in str(e), f"{type(e).__name__} does not mention {needle!r}: {e}")
            check("message" in body and "type" in body, f"not OpenAI's error shape: {e.body}")
            print(f"  {type(e).__name__} {e.status_code}: {body['message'][:100]}")
            return
        raise Failure(f"expected {exception.__name__} ({needle})")

    chat = client.chat.completions.create
    raises(openai.NotFoundError, lambda: chat(model="no-such-model", messages=MESSAGES), "no-such-model")
    raises(openai.BadRequestError, lambda: chat(model=model, messages=MESSAGES, n=2), "`n`")
    raises(openai.BadRequestError, lambda: chat(model=model, messages=MESSAGES,
                                                response_format={"type": "xml"}), "response_format")
    raises(openai.BadRequestError, lambda: client.completions.create(model=model, prompt="word " * 9000,
                                                                     max_tokens=4), "context")
    raises(openai.BadRequestError, lambda: chat(model=model, messages=[{"role": "tool", "content": "x"}]),
           "tool_call_id")
    raises(openai.BadRequestError, lambda: chat(model=model, messages=[{"role": "narrator", "content": "x"}]), "role")
    # Unknown fields are ignored, as LangChain-style clients send them.
    ok = chat(model=model, messages=MESSAGES, max_tokens=2, extra_body={"metadata": {"a": 1}, "tool_choice": None})
    check(ok.choices[0].message.content, "a request with unknown fields was not served")
    # Malformed JSON, below the client.
    bad = httpx.post(f"http://{http}/v1/chat/completions", content=b"{not json",
                     headers={"Content-Type": "application/json"})
    check(bad.status_code == 400 and "not valid JSON" in bad.json()["error"]["message"], f"{bad} {bad.text}")
    check(httpx.get(f"http://{http}/v1/nothing").status_code == 404, "an unknown path")
    check(httpx.get(f"http://{http}/v1/chat/completions").status_code == 405, "GET on a POST endpoint")
    big = httpx.post(f"http://{http}/v1/completions", content=b"x" * (5 << 20))
    check(big.status_code == 413 and big.json()["error"]["message"], f"a 5 MiB body: {big.status_code}")


def check_sse_framing(http, model):
    body = json.dumps({"model": model, "messages": MESSAGES, "max_tokens": 4, "temperature": 0, "stream": True})
    out = subprocess.run(["curl", "-sN", "-i", f"http://{http}/v1/chat/completions", "-H",
                          "Content-Type: application/json", "-d", body], capture_output=True, timeout=60)
    # Bytes: text mode would turn the head's CRLFs into newlines.
    head, _, events = out.stdout.decode().partition("\r\n\r\n")
    check("content-type: text/event-stream" in head.lower(), f"SSE head: {head}")
    check("transfer-encoding: chunked" in head.lower(), f"SSE head: {head}")
    frames = [f for f in events.split("\n\n") if f.strip()]
    check(all(f.startswith("data: ") for f in frames), f"frames not `data: ` lines: {frames}")
    check(frames[-1] == "data: [DONE]", f"the stream ends with {frames[-1]!r}")
    json.loads(frames[0][len("data: "):])
    print(f"curl -N: {len(frames)} frames, the last {frames[-1]!r}")


def check_disconnect(client, model, worker_metrics):
    baseline = used_kv_blocks(worker_metrics)
    stream = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=2000, temperature=0,
                                            stream=True, extra_body={"ignore_eos": True})
    received = 0
    for chunk in stream:
        received += 1
        if received == 5:
            break
    during = used_kv_blocks(worker_metrics)
    stream.close()  # the connection goes; 2,000 tokens would take minutes
    deadline = time.time() + 15
    while time.time() < deadline and used_kv_blocks(worker_metrics) > baseline:
        time.sleep(0.1)
    after = used_kv_blocks(worker_metrics)
    print(f"KV blocks used: {baseline} before, {during} streaming, {after} after the disconnect")
    check(during > baseline, "the stream held no KV blocks")
    check(after == baseline, f"{after} KV blocks still used after the client went (baseline {baseline})")


def make_certificate(directory):
    key, cert = os.path.join(directory, "http.key"), os.path.join(directory, "http.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return cert, key


def check_tls_auth_quota(router_binary, model_path, cluster, model, tmp):
    """A second router on the same workers: HTTPS, tenant tokens, a quota."""
    cert, key = make_certificate(tmp)
    token = "sk-tenant-a-0123456789"
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        f.write(f"{hashlib.sha256(token.encode()).hexdigest()} tenant-a\n")
    http = f"127.0.0.1:{free_port()}"
    log = open(os.path.join(tmp, "router2.log"), "w")
    router = subprocess.Popen(
        [router_binary, "--model", model_path, "--cachemanager", cluster.cachemanager, "--listen", "127.0.0.1:0",
         "--metrics-port", "0", "--http-listen", http, "--tls-cert", cert, "--tls-key", key, "--auth-tokens", tokens,
         "--tenant-requests-per-second", "0.2", "--tenant-request-burst", "2", "--http-request-timeout", "1500"],
        stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        for line in router.stdout:
            if line.startswith("kvfleet-router ready"):
                break
        secure = openai.OpenAI(base_url=f"https://{http}/v1", api_key=token, max_retries=0,
                               http_client=httpx.Client(verify=cert))
        deadline = time.time() + 30
        while time.time() < deadline and not httpx.get(f"https://{http}/health", verify=cert).is_success:
            time.sleep(0.2)  # the router learns the workers from the cachemanager
        answer = secure.chat.completions.create(model=model, messages=MESSAGES, max_tokens=4, temperature=0)
        check(answer.choices[0].message.content, "no answer over HTTPS with a token")
        try:
            openai.OpenAI(base_url=f"https://{http}/v1", api_key=token, max_retries=0).models.list()
            raise Failure("a client that does not trust the certificate connected")
        except openai.APIConnectionError as e:
            print(f"  wrong CA: {type(e).__name__}: {e.__cause__}")
        try:
            openai.OpenAI(base_url=f"https://{http}/v1", api_key="sk-wrong", max_retries=0,
                          http_client=httpx.Client(verify=cert)).models.list()
            raise Failure("an unknown token was served")
        except openai.AuthenticationError as e:
            print(f"  unknown token: {e.status_code}")
        # HTTP has no deadline of its own: the router's (1.5 s here) ends a long request with 504.
        start = time.time()
        try:
            secure.chat.completions.create(model=model, messages=MESSAGES, max_tokens=4000, temperature=0,
                                           extra_body={"ignore_eos": True})
            raise Failure("a request longer than --http-request-timeout was not ended")
        except openai.InternalServerError as e:
            check(e.status_code == 504 and "--http-request-timeout" in e.body["message"], f"{e.status_code}: {e}")
            print(f"  past --http-request-timeout: {e.status_code} after {time.time() - start:.1f} s")
        # The tenant's burst of 2 is spent: the next request is refused with a hint.
        try:
            secure.chat.completions.create(model=model, messages=MESSAGES, max_tokens=1, temperature=0)
            raise Failure("the tenant's request rate was not enforced")
        except openai.RateLimitError as e:
            retry = e.response.headers.get("retry-after")
            check(retry is not None and int(retry) >= 1, f"429 without Retry-After: {e.response.headers}")
            print(f"  over the quota: 429, Retry-After {retry} s: {e.body['message'][:80]}")
    finally:
        router.terminate()
        router.wait(timeout=60)
        log.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--router", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--proto-dir", required=True)
    args = parser.parse_args()
    if not os.path.exists(args.model):
        print(f"skipped: {args.model} not found (scripts/fetch_model.sh)")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        pb, _, pb_grpc = generate_stubs(args.proto_dir, os.path.join(tmp, "stubs"))

        def checks(cluster):
            client = openai.OpenAI(base_url=f"http://{cluster.http}/v1", api_key="none", max_retries=0)
            model = client.models.list().data[0].id
            with grpc.insecure_channel(cluster.router) as channel:
                check_generation(client, model, cluster.http, pb, pb_grpc.InferenceStub(channel))
            check_errors(client, model, cluster.http)
            check_sse_framing(cluster.http, model)
            check_disconnect(client, model, cluster.worker_metrics)
            check_tls_auth_quota(args.router, args.model, cluster, model, tmp)

        return run_against_cluster(args.cli, args.model, os.path.join(tmp, "logs"), checks)

if __name__ == "__main__":
    sys.exit(main())
