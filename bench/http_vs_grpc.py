"""The cost of the OpenAI-compatible HTTP layer over the gRPC API, same run,
same cluster, same load.

Starts `kvfleet up` (one worker) and sends the same streamed chat requests
through both front ends of its router, alternating gRPC and HTTP rounds so
that drift in the machine hits both alike, at each concurrency. Reports, per
front end, time to first token and end-to-end latency (p50, p99) and the
aggregate output tokens/s, then HTTP's added latency and throughput ratio
against gRPC's in the same run; and the round trip of a call that does no
generation (ListModels vs GET /v1/models), which is the layers' own cost.

Both clients are Python: grpcio for gRPC, httpx2 (the library the openai
package uses; the package's pydantic parsing would add client cost that is
not the server's) for HTTP, each on its own connection per thread.

  .venv/bin/python bench/http_vs_grpc.py --cli build/tools/kvfleet/kvfleet \
      --model models/SmolLM2-135M-Instruct.Q4_1.gguf --proto-dir proto
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import httpx2 as httpx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration", "clients"))
from kvfleet_up import Cluster, generate_stubs  # noqa: E402


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def prompt(i):
    return f"Request {i}: name one thing a lighthouse keeper does every day."


class GrpcClient:
    def __init__(self, pb, pb_grpc, address):
        self.pb = pb
        self.local = threading.local()
        self.address = address
        self.pb_grpc = pb_grpc

    def stub(self):
        if not hasattr(self.local, "stub"):
            self.local.channel = grpc.insecure_channel(self.address)
            self.local.stub = self.pb_grpc.InferenceStub(self.local.channel)
        return self.local.stub

    def chat(self, i, max_tokens):
        pb = self.pb
        request = pb.ChatRequest(messages=[pb.ChatMessage(role="user", content=prompt(i))],
                                 options=pb.GenerationOptions(stopping={"max_tokens": max_tokens,
                                                                        "ignore_eos": True}))
        start, first, tokens = time.perf_counter(), None, 0
        for message in self.stub().Chat(request, timeout=300):
            if message.token_ids and first is None:
                first = time.perf_counter()
            tokens += len(message.token_ids)
        return first - start, time.perf_counter() - start, tokens

    def null_call(self):
        start = time.perf_counter()
        self.stub().ListModels(self.pb.ListModelsRequest(), timeout=30)
        return time.perf_counter() - start


class HttpClient:
    def __init__(self, address, model):
        self.base = f"http://{address}"
        self.model = model
        self.local = threading.local()

    def client(self):
        if not hasattr(self.local, "client"):
            self.local.client = httpx.Client(timeout=300)
        return self.local.client

    def chat(self, i, max_tokens):
        body = {"model": self.model, "messages": [{"role": "user", "content": prompt(i)}], "max_tokens": max_tokens,
                "temperature": 0, "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
        start, first, tokens = time.perf_counter(), None, 0
        with self.client().stream("POST", f"{self.base}/v1/chat/completions", json=body) as r:
            r.raise_for_status()
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    tokens = chunk["usage"]["completion_tokens"]
                elif first is None and chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                    first = time.perf_counter()
        return first - start, time.perf_counter() - start, tokens

    def null_call(self):
        start = time.perf_counter()
        self.client().get(f"{self.base}/v1/models").raise_for_status()
        return time.perf_counter() - start


def run_round(client, concurrency, requests, max_tokens, offset):
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(lambda i: client.chat(offset + i, max_tokens), range(requests)))
    wall = time.perf_counter() - start
    return results, wall


def summarize(rounds):
    ttft = [r[0] for results, _ in rounds for r in results]
    e2e = [r[1] for results, _ in rounds for r in results]
    tokens = sum(r[2] for results, _ in rounds for r in results)
    wall = sum(w for _, w in rounds)
    return {"ttft_p50": percentile(ttft, 0.5), "ttft_p99": percentile(ttft, 0.99), "e2e_p50": percentile(e2e, 0.5),
            "e2e_p99": percentile(e2e, 0.99), "tokens_per_s": tokens / wall, "requests": len(e2e)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--proto-dir", required=True)
    parser.add_argument("--concurrency", default="1,8", help="comma-separated stream counts")
    parser.add_argument("--requests", type=int, default=16, help="requests per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per front end and concurrency (alternating)")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--null-calls", type=int, default=500)
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pb, _, pb_grpc = generate_stubs(args.proto_dir, os.path.join(tmp, "stubs"))
        cluster = Cluster(args.cli, args.model, os.path.join(tmp, "logs"))
        try:
            model = httpx.get(f"http://{cluster.http}/v1/models").json()["data"][0]["id"]
            clients = {"grpc": GrpcClient(pb, pb_grpc, cluster.router), "http": HttpClient(cluster.http, model)}
            report = {"null_call": {}, "load": []}
            for name, client in clients.items():
                client.null_call()  # connect
                times = [client.null_call() for _ in range(args.null_calls)]
                report["null_call"][name] = {"p50": percentile(times, 0.5), "p99": percentile(times, 0.99)}
            for concurrency in [int(c) for c in args.concurrency.split(",")]:
                rounds = {"grpc": [], "http": []}
                offset = 0
                for _ in range(args.rounds):
                    for name in ("grpc", "http"):
                        rounds[name].append(run_round(clients[name], concurrency, args.requests, args.max_tokens,
                                                      offset))
                        offset += args.requests
                report["load"].append({"concurrency": concurrency,
                                       **{name: summarize(r) for name, r in rounds.items()}})
        finally:
            cluster.stop()
    ms = lambda s: f"{s * 1000:8.2f}"  # noqa: E731
    print(f"\nnull call (no generation), {args.null_calls} calls each, one connection:")
    for name, t in report["null_call"].items():
        print(f"  {name:5} p50 {ms(t['p50'])} ms   p99 {ms(t['p99'])} ms")
    g, h = report["null_call"]["grpc"], report["null_call"]["http"]
    print(f"  HTTP - gRPC: p50 {ms(h['p50'] - g['p50'])} ms, p99 {ms(h['p99'] - g['p99'])} ms")
    print(f"\nstreamed chat, {args.max_tokens} tokens each, {args.rounds} alternating rounds of {args.requests}:")
    print(f"  {'streams':>7} {'api':5} {'TTFT p50':>9} {'TTFT p99':>9} {'e2e p50':>9} {'e2e p99':>9} {'tok/s':>8}")
    for row in report["load"]:
        for name in ("grpc", "http"):
            r = row[name]
            print(f"  {row['concurrency']:>7} {name:5} {ms(r['ttft_p50'])}  {ms(r['ttft_p99'])}  "
                  f"{ms(r['e2e_p50'])}  {ms(r['e2e_p99'])}  {r['tokens_per_s']:8.1f}")
        g, h = row["grpc"], row["http"]
        print(f"  {row['concurrency']:>7} HTTP added: TTFT p50 {ms(h['ttft_p50'] - g['ttft_p50'])} ms, "
              f"p99 {ms(h['ttft_p99'] - g['ttft_p99'])} ms; e2e p50 {ms(h['e2e_p50'] - g['e2e_p50'])} ms; "
              f"throughput HTTP/gRPC {h['tokens_per_s'] / g['tokens_per_s']:.3f}")
    if args.json:
        print(json.dumps(report))


if __name__ == "__main__":
    main()
