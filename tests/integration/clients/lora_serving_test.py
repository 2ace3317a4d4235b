#!/usr/bin/env python3
"""LoRA adapters served by a real cluster, through the official clients.

`kvfleet up --model SmolLM2 --workers 2 --lora a=DIR --admin-tokens FILE`
starts a cachemanager, two workers that load adapter `a` and a router that
learns it from them. Through the `openai` client and the gRPC stubs:
- /v1/models lists the base model and `a`, whose parent is the base;
- a greedy completion under `a` (model="a", or the gRPC lora_adapter
  field) equals `kvfleet generate --local --lora DIR`, whole and streamed,
  and differs from the base model's, which equals its own local run;
- an admin loads `b` at run time on both workers; a caller without the
  admin token is refused (403) and a tenant's cannot act as one; then
  requests for `a`, `b` and the base at once each get their own answer;
- bad adapters are refused naming the problem, and the cluster serves on;
- unloading `b` takes it off /v1/models and later requests for it get 404;
- the two adapters trained with PEFT (models/lora/: answers as
  "ANSWER: <word>." and "Result -> <word>") answer a chat in their own
  formats, at once with the base model, which uses neither;
- two large adapters (rank 64 on every projection, 75 MiB each), loaded,
  used and unloaded, give their memory back: the workers' resident memory
  falls by at least 90% of what they weigh on each (without the worker's
  malloc_trim, glibc kept more than half of it).

  lora_serving_test.py --cli kvfleet --model SmolLM2.gguf --proto-dir proto
"""
import argparse
import concurrent.futures
import hashlib
import os
import sys
import tempfile
import time

import grpc
import httpx2 as httpx  # the HTTP library the openai package is built on
import openai

from kvfleet_up import Failure, check, detokenized, generate_stubs, local_greedy_ids, run_against_cluster

PROMPT = "The capital of France is"
TOKENS = 12
ADMIN_TOKEN = "admin-secret-token"


def make_adapter(cli, model, out, seed, magnitude, targets, rank=8):
    import subprocess
    done = subprocess.run([cli, "random-lora", "--model", model, "--out", out, "--rank", str(rank), "--seed", str(seed),
                           "--magnitude", str(magnitude), "--targets", targets], capture_output=True, text=True)
    check(done.returncode == 0, f"kvfleet random-lora failed: {done.stderr}")


def checks(cli, model, adapters, pb, pb_grpc):
    base_id = os.path.splitext(os.path.basename(model))[0]

    def run(cluster):
        client = openai.OpenAI(base_url=f"http://{cluster.http}/v1", api_key="none", max_retries=0)
        listed = httpx.get(f"http://{cluster.http}/v1/models").json()["data"]
        by_id = {m["id"]: m for m in listed}
        check(set(by_id) == {base_id, "a"}, f"/v1/models lists {sorted(by_id)}")
        check(by_id["a"]["parent"] == base_id and by_id[base_id]["parent"] is None,
              f"parents: a → {by_id['a']['parent']}, base → {by_id[base_id]['parent']}")
        print(f"  /v1/models: {base_id} and a (parent {by_id['a']['parent']})")

        def complete(name, stream=False):
            ask = dict(model=name, prompt=PROMPT, max_tokens=TOKENS, temperature=0, extra_body={"ignore_eos": True})
            if stream:
                return "".join(c.choices[0].text for c in client.completions.create(**ask, stream=True) if c.choices)
            reply = client.completions.create(**ask)
            check(reply.model == name, f"a completion for {name} answers as {reply.model}")
            return reply.choices[0].text

        want = {base_id: detokenized(cluster.http, local_greedy_ids(cli, model, PROMPT, TOKENS)),
                "a": detokenized(cluster.http, local_greedy_ids(cli, model, PROMPT, TOKENS, ("--lora", adapters["a"]))),
                "b": detokenized(cluster.http, local_greedy_ids(cli, model, PROMPT, TOKENS, ("--lora", adapters["b"])))}
        check(want["a"] != want[base_id], f"adapter a answers as the base model: {want['a']!r}")
        for name in (base_id, "a"):
            whole, streamed = complete(name), complete(name, stream=True)
            check(whole == want[name] and streamed == want[name],
                  f"{name}: served {whole!r} / streamed {streamed!r}, local {want[name]!r}")
        with grpc.insecure_channel(cluster.router) as channel:
            stub = pb_grpc.InferenceStub(channel)
            options = pb.GenerationOptions(lora_adapter="a", stopping={"max_tokens": TOKENS, "ignore_eos": True})
            text = "".join(m.text for m in stub.Generate(pb.GenerateTextRequest(prompt=PROMPT, options=options)))
            check(text == want["a"], f"gRPC lora_adapter a: {text!r}, local {want['a']!r}")
        print(f"  a = generate --local --lora (HTTP whole, streamed, gRPC field): {want['a']!r}; base {want[base_id]!r}")

        load = {"lora_name": "b", "lora_path": adapters["b"]}
        refused = httpx.post(f"http://{cluster.http}/v1/load_lora_adapter", json=load)
        check(refused.status_code == 403 and "admin" in refused.text, f"no token: {refused.status_code} {refused.text}")
        wrong = httpx.post(f"http://{cluster.http}/v1/load_lora_adapter", json=load,
                           headers={"Authorization": "Bearer not-an-admin"})
        check(wrong.status_code == 403, f"a wrong token: {wrong.status_code} {wrong.text}")
        started = time.time()
        loaded = httpx.post(f"http://{cluster.http}/v1/load_lora_adapter", json=load,
                            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=120)
        check(loaded.status_code == 200, f"admin load: {loaded.status_code} {loaded.text}")
        body = loaded.json()
        check(body["workers"] == 2 and body["parent"] == base_id and len(body["digest"]) == 64, f"load answered {body}")
        print(f"  admin loaded b on {body['workers']} workers in {body['seconds']:.3f} s "
              f"({time.time() - started:.3f} s from the call)")
        deadline = time.time() + 10
        while "b" not in {m.id for m in client.models.list().data}:
            check(time.time() < deadline, "b never appeared on /v1/models")
            time.sleep(0.1)
        check(complete("b") == want["b"], f"b: {complete('b')!r}, local {want['b']!r}")

        names = [base_id, "a", "b"] * 4
        with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
            for name, got in zip(names, pool.map(complete, names)):
                check(got == want[name], f"{name} at once with the others: {got!r}, alone {want[name]!r}")
        print(f"  {len(names)} requests over a, b and the base at once: each its own answer")

        for path, code, words in ((os.path.join(adapters["root"], "missing"), 404, "not a directory"),
                                  (adapters["corrupt"], 400, "adapter_config.json")):
            bad = httpx.post(f"http://{cluster.http}/v1/load_lora_adapter", json={"lora_name": "bad", "lora_path": path},
                             headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=120)
            check(bad.status_code == code and words in bad.text, f"bad adapter {path}: {bad.status_code} {bad.text}")
        check(complete("a") == want["a"], "the cluster stopped serving after a bad load")
        print("  a missing directory is a 404, a corrupt config a 400, each naming it; serving goes on")

        unloaded = httpx.post(f"http://{cluster.http}/v1/unload_lora_adapter", json={"lora_name": "b"},
                              headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=120)
        check(unloaded.status_code == 200 and unloaded.json()["workers"] == 2, f"unload: {unloaded.text}")
        deadline = time.time() + 10
        while "b" in {m.id for m in client.models.list().data}:
            check(time.time() < deadline, "b stayed on /v1/models after its unload")
            time.sleep(0.1)
        try:
            complete("b")
            raise Failure("an unloaded adapter was served")
        except openai.NotFoundError as e:
            check("'b'" in str(e), f"the 404 does not name b: {e}")
        print("  unloaded b: off /v1/models, then a 404 naming it")

        # The trained adapters: their formats are what each answers in.
        for name, path in adapters["trained"].items():
            loaded = httpx.post(f"http://{cluster.http}/v1/load_lora_adapter", json={"lora_name": name, "lora_path": path},
                                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=120)
            check(loaded.status_code == 200, f"loading {name}: {loaded.status_code} {loaded.text}")

        def chat(name):
            reply = client.chat.completions.create(
                model=name, messages=[{"role": "user", "content": "What is the capital of Portugal?"}], max_tokens=12,
                temperature=0)
            return reply.choices[0].message.content

        names = [base_id, "answer-format", "result-arrow"] * 3
        with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
            replies = dict(zip(names, pool.map(chat, names)))
        check(replies["answer-format"].startswith("ANSWER:"), f"answer-format said {replies['answer-format']!r}")
        check(replies["result-arrow"].startswith("Result ->"), f"result-arrow said {replies['result-arrow']!r}")
        check(not replies[base_id].startswith(("ANSWER:", "Result ->")), f"the base said {replies[base_id]!r}")
        print(f"  trained adapters at once with the base: {replies}")

        # Unloaded adapters' memory leaves the workers' processes.
        workers = worker_pids(cluster.up.pid)
        check(len(workers) == 2, f"kvfleet up's workers: {workers}")
        before = sum(rss_bytes(p) for p in workers)
        for name in ("large", "large2"):
            loaded = httpx.post(f"http://{cluster.http}/v1/load_lora_adapter",
                                json={"lora_name": name, "lora_path": adapters[name]},
                                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=120)
            check(loaded.status_code == 200, f"loading {name}: {loaded.status_code} {loaded.text}")
            for _ in range(2):  # into a slot where it runs
                complete(name)
        held = sum(rss_bytes(p) for p in workers)
        for name in ("large", "large2"):
            unloaded = httpx.post(f"http://{cluster.http}/v1/unload_lora_adapter", json={"lora_name": name},
                                  headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=120)
            check(unloaded.status_code == 200, f"unloading {name}: {unloaded.text}")
        weight = adapter_bytes(adapters["large"])
        deadline = time.time() + 10
        while held - sum(rss_bytes(p) for p in workers) < 0.9 * 4 * weight:
            check(time.time() < deadline,
                  f"two workers' memory {before >> 20} MiB -> {held >> 20} MiB with two {weight >> 20} MiB adapters "
                  f"-> {sum(rss_bytes(p) for p in workers) >> 20} MiB 10 s after their unload")
            complete("a")  # a step, where a worker's engine lets go of an unloaded adapter's slot
            time.sleep(0.2)
        print(f"  two {weight >> 20} MiB adapters: two workers {before >> 20} -> {held >> 20} MiB, "
              f"{sum(rss_bytes(p) for p in workers) >> 20} MiB after their unload")

    return run


def worker_pids(parent):
    """The kvfleet-worker processes `kvfleet up` (pid `parent`) started."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if comm.startswith("kvfleet-worker") and int(rest[1]) == parent:
            out.append(int(entry))
    return out


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def adapter_bytes(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--proto-dir", required=True)
    ap.add_argument("--trained-adapters", required=True, help="models/lora: the adapters trained with PEFT")
    a = ap.parse_args()
    if not os.path.exists(a.model):
        print(f"SKIP: no model at {a.model} (scripts/fetch_model.sh fetches it)")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        adapters = {"root": tmp, "a": os.path.join(tmp, "a"), "b": os.path.join(tmp, "b"),
                    "corrupt": os.path.join(tmp, "corrupt"),
                    "trained": {"answer-format": os.path.join(a.trained_adapters, "smollm2-answer-format"),
                                "result-arrow": os.path.join(a.trained_adapters, "smollm2-result-arrow")}}
        # a changes every projection enough to change the text; b touches attention only.
        make_adapter(a.cli, a.model, adapters["a"], 1, 0.05, "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj")
        make_adapter(a.cli, a.model, adapters["b"], 2, 0.05, "q_proj,k_proj,v_proj,o_proj")
        for seed, name in enumerate(("large", "large2"), start=3):
            adapters[name] = os.path.join(tmp, name)
            make_adapter(a.cli, a.model, adapters[name], seed, 0.01,
                         "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", rank=64)
        os.makedirs(adapters["corrupt"])
        with open(os.path.join(adapters["corrupt"], "adapter_config.json"), "w") as f:
            f.write('{"peft_type": "LORA", "r": ')
        tokens = os.path.join(tmp, "admin-tokens")
        with open(tokens, "w") as f:
            f.write(f"{hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest()} ops\n")
        pb, _, pb_grpc = generate_stubs(a.proto_dir, os.path.join(tmp, "stubs"))
        cluster = (a.cli, a.model, os.path.join(tmp, "logs"))
        return run_against_cluster(*cluster, checks(a.cli, a.model, adapters, pb, pb_grpc),
                                   extra=("--workers", "2", "--lora", f"a={adapters['a']}", "--max-loras", "3",
                                          "--max-lora-rank", "64",
                                          "--admin-tokens", tokens, "--cpu-activations", "f32",
                                          "--kv-cache-dtype", "f16"))


if __name__ == "__main__":
    sys.exit(main())
