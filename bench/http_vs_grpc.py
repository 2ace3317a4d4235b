"""The cost of the OpenAI-compatible HTTP layer over the gRPC API, same run,
same cluster, same load.

Starts `kvfleet up` (one worker) and sends the same streamed chat requests
through both front ends of its router, alternating gRPC and HTTP rounds so
that drift in the machine hits both alike, at each concurrency. Reports, per
front end, time to first token and end-to-end latency (p50, p99) and the
aggregate output tokens/s, then HTTP's added latency and throughput ratio
against gRPC's in the same run; the router's and the client's CPU time per
request, which tells the server's cost from the client's on a machine whose
cores the client, the router and the worker share; and the round trip of a
call that does no generation (ListModels vs GET /v1/models), which is the
layers' own cost.

Both clients are Python: grpcio for gRPC, httpx2 (the library the openai
package uses; the package's pydantic parsing would add client cost that is
not the server's) for HTTP, each stream a process of its own with its own
connection, so that Python's global lock slows neither.

  .venv/bin/python bench/http_vs_grpc.py --cli build/tools/kvfleet/kvfleet \
      --model models/SmolLM2-135M-Instruct.Q4_1.gguf --proto-dir proto
"""
import argparse
import json
import os
import sys
import tempfile
import multiprocessing
import time

import grpc
import httpx2 as httpx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration", "clients"))
from kvfleet_up import Cluster, generate_stubs  # noqa: E402


def router_pid(up_pid):
    """The kvfleet-router process `kvfleet up` started."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if int(fields[1]) == up_pid and comm.startswith("kvfleet-router"):
            return int(entry)
    raise SystemExit("no kvfleet-router under kvfleet up")


def cpu_seconds(pid):
    """User + system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def prompt(i):
    return f"Request {i}: name one thing a lighthouse keeper does every day."


class GrpcClient:
    def __init__(self, address, stubs_dir):
        sys.path.insert(0, stubs_dir)
        import kvfleet.v1.inference_pb2 as pb
        import kvfleet.v1.inference_pb2_grpc as pb_grpc
        self.pb = pb
        self.channel = grpc.insecure_channel(address)
        self._stub = pb_grpc.InferenceStub(self.channel)

    def stub(self):
        return self._stub

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
        self._client = httpx.Client(timeout=300)

    def client(self):
        return self._client

    def chat(self, i, max_tokens):
        body = {"model": self.model, "messages": [{"role": "user", "content": prompt(i)}], "max_tokens": max_tokens,
                "temperature": 0, "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
        start, first, tokens = time.perf_counter(), None, 0
        with self.client().stream("POST", f"{self.base}/v1/chat/completions", json=body) as r:
            r.raise_for_status()
            # Only the usage chunk is parsed: decoding every chunk's JSON would
            # be client cost (gRPC's client decodes in C) on cores the router
            # and the worker share. The first non-empty content is the first token.
            for line in r.iter_lines():
                if first is None and '"content":"' in line and '"content":""' not in line:
                    first = time.perf_counter()
                elif '"usage":{' in line:
                    tokens = json.loads(line[6:])["usage"]["completion_tokens"]
        return first - start, time.perf_counter() - start, tokens

    def null_call(self):
        start = time.perf_counter()
        self.client().get(f"{self.base}/v1/models").raise_for_status()
        return time.perf_counter() - start


# Each stream is a process of its own with its own client and connection,
# so that neither client is slowed by Python's global lock.
_client = None


def _start_client(kind, address, model, stubs_dir):
    global _client
    _client = GrpcClient(address, stubs_dir) if kind == "grpc" else HttpClient(address, model)


def _chat(job):
    i, max_tokens = job
    cpu = time.process_time()
    ttft, e2e, tokens = _client.chat(i, max_tokens)
    return ttft, e2e, tokens, time.process_time() - cpu


def _null_calls(n):
    _client.null_call()  # connect
    return [_client.null_call() for _ in range(n)]


def run_round(pool, requests, max_tokens, offset, router):
    """The round's results, wall time, the router's CPU seconds and the clients'."""
    start, router_cpu = time.perf_counter(), cpu_seconds(router)
    results = pool.map(_chat, [(offset + i, max_tokens) for i in range(requests)], chunksize=1)
    wall = time.perf_counter() - start
    return [r[:3] for r in results], wall, cpu_seconds(router) - router_cpu, sum(r[3] for r in results)


def summarize(rounds):
    ttft = [r[0] for results, *_ in rounds for r in results]
    e2e = [r[1] for results, *_ in rounds for r in results]
    tokens = sum(r[2] for results, *_ in rounds for r in results)
    wall = sum(r[1] for r in rounds)
    return {"ttft_p50": percentile(ttft, 0.5), "ttft_p99": percentile(ttft, 0.99), "e2e_p50": percentile(e2e, 0.5),
            "e2e_p99": percentile(e2e, 0.99), "tokens_per_s": tokens / wall, "requests": len(e2e),
            "router_cpu_ms_per_request": 1000 * sum(r[2] for r in rounds) / len(e2e),
            "client_cpu_ms_per_request": 1000 * sum(r[3] for r in rounds) / len(e2e)}


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
        generate_stubs(args.proto_dir, os.path.join(tmp, "stubs"))
        cluster = Cluster(args.cli, args.model, os.path.join(tmp, "logs"))
        try:
            model = httpx.get(f"http://{cluster.http}/v1/models").json()["data"][0]["id"]
            router = router_pid(cluster.up.pid)
            stubs = os.path.join(tmp, "stubs")
            addresses = {"grpc": cluster.router, "http": cluster.http}
            pool_of = lambda kind, n: multiprocessing.Pool(n, _start_client, (kind, addresses[kind], model, stubs))  # noqa: E731
            report = {"null_call": {}, "load": []}
            for kind in ("grpc", "http"):
                with pool_of(kind, 1) as pool:
                    times = pool.apply(_null_calls, (args.null_calls,))
                report["null_call"][kind] = {"p50": percentile(times, 0.5), "p99": percentile(times, 0.99)}
            for concurrency in [int(c) for c in args.concurrency.split(",")]:
                rounds = {"grpc": [], "http": []}
                pools = {kind: pool_of(kind, concurrency) for kind in ("grpc", "http")}
                offset = 0
                for _ in range(args.rounds):
                    for kind in ("grpc", "http"):
                        rounds[kind].append(run_round(pools[kind], args.requests, args.max_tokens, offset, router))
                        offset += args.requests
                for pool in pools.values():
                    pool.close()
                    pool.join()
                report["load"].append({"concurrency": concurrency,
                                       **{kind: summarize(r) for kind, r in rounds.items()}})
        finally:
            cluster.stop()
    ms = lambda s: f"{s * 1000:8.2f}"  # noqa: E731
    print(f"\nnull call (no generation), {args.null_calls} calls each, one connection:")
    for name, t in report["null_call"].items():
        print(f"  {name:5} p50 {ms(t['p50'])} ms   p99 {ms(t['p99'])} ms")
    g, h = report["null_call"]["grpc"], report["null_call"]["http"]
    print(f"  HTTP - gRPC: p50 {ms(h['p50'] - g['p50'])} ms, p99 {ms(h['p99'] - g['p99'])} ms")
    print(f"\nstreamed chat, {args.max_tokens} tokens each, {args.rounds} alternating rounds of {args.requests}:")
    print(f"  {'streams':>7} {'api':5} {'TTFT p50':>9} {'TTFT p99':>9} {'e2e p50':>9} {'e2e p99':>9} {'tok/s':>8}"
          f" {'router CPU':>10} {'client CPU':>10}  (ms, CPU per request)")
    for row in report["load"]:
        for name in ("grpc", "http"):
            r = row[name]
            print(f"  {row['concurrency']:>7} {name:5} {ms(r['ttft_p50'])}  {ms(r['ttft_p99'])}  "
                  f"{ms(r['e2e_p50'])}  {ms(r['e2e_p99'])}  {r['tokens_per_s']:8.1f}"
                  f"   {r['router_cpu_ms_per_request']:8.2f}   {r['client_cpu_ms_per_request']:8.2f}")
        g, h = row["grpc"], row["http"]
        print(f"  {row['concurrency']:>7} HTTP added: TTFT p50 {ms(h['ttft_p50'] - g['ttft_p50'])} ms, "
              f"p99 {ms(h['ttft_p99'] - g['ttft_p99'])} ms; e2e p50 {ms(h['e2e_p50'] - g['e2e_p50'])} ms; "
              f"throughput HTTP/gRPC {h['tokens_per_s'] / g['tokens_per_s']:.3f}")
    if args.json:
        print(json.dumps(report))


if __name__ == "__main__":
    main()
