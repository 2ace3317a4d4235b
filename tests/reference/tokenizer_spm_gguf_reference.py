#!/usr/bin/env python3
"""A real SentencePiece vocabulary: kvfleet's tokenizer vs the sentencepiece library.

The oracle is the `sentencepiece` package running a ModelProto built from
the GGUF's own pieces, scores and piece types (read with the `gguf`
package): BPE, byte fallback when the vocabulary has byte pieces, the
file's add_space_prefix as the dummy prefix, identity normalisation with
spaces escaped to "▁". Gemma 3's 262,144 pieces include 165 user-defined
ones (runs of newlines and of spaces, HTML tags) that both sides take as
whole tokens; in the ModelProto their spaces are escaped as the normaliser
escapes the text they match. The unknown token is marked UNKNOWN there
(sentencepiece needs one; the GGUF calls Gemma's a control token).

The ModelProto is encoded by hand (field numbers of sentencepiece_model.proto)
because the package's generated module needs a newer protobuf runtime than
the one the project pins.

For every generated string (scripts, emoji, whitespace runs, digits, code,
HTML): ids must be identical (specials not parsed), and kvfleet's Decode
and streamed detokenization must give the string back.

  tokenizer_spm_gguf_reference.py --dump tokenize_dump --model gemma-3-270m.Q4_K_M.gguf
"""

import argparse
import os
import random
import struct
import subprocess
import sys
import tempfile
import time

import sentencepiece as spm
from gguf import GGUFReader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_strings import generate  # noqa: E402

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
BPE = 2


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, wire, payload):
    key = varint((number << 3) | wire)
    if wire == 0:
        return key + varint(payload)
    if wire == 5:
        return key + struct.pack("<f", payload)
    return key + varint(len(payload)) + payload  # wire 2


def model_proto(pieces, trainer, normalizer):
    out = bytearray()
    for piece, score, kind in pieces:
        out += field(1, 2, field(1, 2, piece.encode("utf-8")) + field(2, 5, score) + field(3, 0, kind))
    out += field(2, 2, trainer) + field(3, 2, normalizer)
    return bytes(out)


def oracle_from_gguf(path):
    r = GGUFReader(path)
    get = lambda k, d=None: r.fields[k].contents() if k in r.fields else d  # noqa: E731
    if get("tokenizer.ggml.model") != "llama":
        raise SystemExit(f"{path}: not a SentencePiece ('llama') vocabulary")
    tokens, scores, types = get("tokenizer.ggml.tokens"), get("tokenizer.ggml.scores"), get("tokenizer.ggml.token_type")
    unk = int(get("tokenizer.ggml.unknown_token_id", 0))
    pieces = []
    for i, (t, s, ty) in enumerate(zip(tokens, scores, types)):
        if i == unk:
            ty = UNKNOWN
        if ty == USER_DEFINED:
            t = t.replace(" ", "\u2581")
        pieces.append((t, float(s), int(ty)))
    trainer = (field(3, 0, BPE) + field(35, 0, int(BYTE in types)) + field(40, 0, unk)
               + field(41, 0, int(get("tokenizer.ggml.bos_token_id", 1)))
               + field(42, 0, int(get("tokenizer.ggml.eos_token_id", 2))))
    add_prefix = bool(get("tokenizer.ggml.add_space_prefix", True))
    normalizer = (field(1, 2, b"identity") + field(3, 0, int(add_prefix)) + field(4, 0, 0) + field(5, 0, 1))
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(model_proto(pieces, trainer, normalizer))
    return sp, len(tokens)


def extra_strings(seed, count):
    """What a Gemma vocabulary's user-defined pieces are about."""
    rng = random.Random(seed)
    parts = ["\n", "\n\n", "\n\n\n", "  ", "   ", "    ", "\t", "<table>", "</td>", "<h1>", "<b>", "<code>", "</div>",
             "hello", " world", "def f(x):", "    return x", "café", "日本語", "42", "<start_of_turn>", "[multimodal]"]
    return ["".join(rng.choice(parts) for _ in range(rng.randint(1, 12))) for _ in range(count)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dump", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    if not os.path.exists(args.model):
        print(f"SKIP: model {args.model} not found (scripts/fetch_model.sh fetches it)")
        return 77
    t0 = time.time()
    sp, n = oracle_from_gguf(args.model)
    texts = generate(args.count, args.seed) + extra_strings(args.seed, args.count // 2)
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = os.path.join(tmp, "in.hex"), os.path.join(tmp, "out.tsv")
        with open(inp, "w") as f:
            for s in texts:
                f.write(s.encode("utf-8").hex() + "\n")
        proc = subprocess.run([args.dump, "encode", "--model", args.model, "--no-parse-special", "--input", inp,
                               "--output", out], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"tokenize_dump failed ({proc.returncode}): {proc.stderr}")
        print(proc.stdout.strip())
        with open(out) as f:
            rows = [line.rstrip("\n").split("\t") for line in f]
    same = exact = shown = 0
    for i, (s, (ids, decoded, streamed)) in enumerate(zip(texts, rows)):
        got = [int(x) for x in ids.split(",")] if ids else []
        want = sp.encode(s, out_type=int)
        problems = []
        if got == want:
            same += 1
        else:
            problems.append(f"ids: kvfleet {[sp.id_to_piece(t) for t in got][:14]} vs "
                            f"sentencepiece {[sp.id_to_piece(t) for t in want][:14]}")
        if bytes.fromhex(decoded) == s.encode("utf-8") and bytes.fromhex(streamed) == s.encode("utf-8"):
            exact += 1
        else:
            problems.append(f"decode {bytes.fromhex(decoded)!r} / streamed {bytes.fromhex(streamed)!r}")
        if problems and shown < 10:
            shown += 1
            print(f"[#{i}] {s!r}\n    " + "\n    ".join(problems))
    print(f"tokenizer reference (sentencepiece from {os.path.basename(args.model)}, {n} pieces): "
          f"{same}/{len(texts)} identical; decode(encode(s)) == s for {exact}/{len(texts)}; {time.time() - t0:.1f} s")
    return 0 if same == len(texts) and exact == len(texts) else 1


if __name__ == "__main__":
    sys.exit(main())
