"""A Python client of kvfleet's public API, generated from the proto with
grpcio-tools (PyPI), against a real cluster started by `kvfleet up` with the
real default model: Chat, Generate, Complete, Tokenize, Detokenize,
ListModels and a refused call, then Ctrl-C stops the cluster cleanly.

Exit 0: passed; 1: failed; 77: skipped (the default model is not fetched).
"""
import argparse
import os
import sys
import tempfile

import grpc

from kvfleet_up import Failure, check, generate_stubs, run_against_cluster


def run_checks(pb, types, stub):
    # Chat: the real model answers through the router.
    chat = pb.ChatRequest(messages=[pb.ChatMessage(role="user", content="What is the capital of France?")],
                          options=pb.GenerationOptions(stopping={"max_tokens": 16}))
    text, ids, last = "", [], None
    for message in stub.Chat(chat, timeout=120):
        text += message.text
        ids += list(message.token_ids)
        last = message
    print(f"Chat: {text!r}")
    check("Paris" in text, f"Chat answered {text!r}, which does not name Paris")
    check(last.finish_reason in (types.FINISH_REASON_STOP, types.FINISH_REASON_LENGTH), f"finish {last.finish_reason}")
    check(last.usage.generated_tokens == len(ids), f"usage says {last.usage.generated_tokens}, got {len(ids)} ids")
    check(last.worker_id == "worker-0", f"worker_id {last.worker_id!r}")

    # Generate a raw prompt, then the same through Complete: same greedy text.
    request = pb.GenerateTextRequest(prompt="The three primary colors are",
                                     options=pb.GenerationOptions(stopping={"max_tokens": 12, "ignore_eos": True}))
    streamed = list(stub.Generate(request, timeout=120))
    text = "".join(m.text for m in streamed)
    ids = [t for m in streamed for t in m.token_ids]
    check(len(ids) == 12 and streamed[-1].finish_reason == types.FINISH_REASON_LENGTH, f"{len(ids)} ids")
    complete = stub.Complete(request, timeout=120)
    check(complete.text == text and list(complete.token_ids) == ids, "Complete differs from Generate")
    print(f"Generate: {text!r}")

    # Tokenize agrees with the prompt the router counted; Detokenize inverts.
    tokens = stub.Tokenize(pb.TokenizeRequest(text="The three primary colors are", add_bos=True)).token_ids
    check(len(tokens) == streamed[-1].usage.prompt_tokens,
          f"Tokenize gives {len(tokens)} tokens, usage.prompt_tokens {streamed[-1].usage.prompt_tokens}")
    check(stub.Detokenize(pb.DetokenizeRequest(token_ids=ids, skip_special=True)).text == text, "Detokenize")
    special = stub.Tokenize(pb.TokenizeRequest(text="<|im_start|>", parse_special=True)).token_ids
    check(len(special) == 1, f"<|im_start|> parsed as {len(special)} tokens")

    models = stub.ListModels(pb.ListModelsRequest()).models
    check(len(models) == 1 and models[0].live_workers == 1, f"ListModels: {models}")

    # A refused call names the problem.
    try:
        list(stub.Generate(pb.GenerateTextRequest(prompt="x", options=pb.GenerationOptions(model="nope")), timeout=30))
        raise Failure("a request for an unknown model was served")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.NOT_FOUND and models[0].id in e.details(), f"{e.code()}: {e.details()}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--proto-dir", required=True)
    args = parser.parse_args()
    if not os.path.exists(args.model):
        print(f"skipped: {args.model} not found (scripts/fetch_model.sh)")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        pb, types, pb_grpc = generate_stubs(args.proto_dir, os.path.join(tmp, "stubs"))

        def checks(cluster):
            with grpc.insecure_channel(cluster.router) as channel:
                run_checks(pb, types, pb_grpc.InferenceStub(channel))

        # The answers checked are the exact mode's: pinned, since the model's
        # calibration record may choose a faster mode with other tokens.
        return run_against_cluster(args.cli, args.model, os.path.join(tmp, "logs"), checks,
                                   extra=("--cpu-activations", "f32", "--kv-cache-dtype", "f16"))


if __name__ == "__main__":
    sys.exit(main())
