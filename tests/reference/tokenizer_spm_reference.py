#!/usr/bin/env python3
"""SentencePiece BPE reference: kvfleet's "llama" tokenizer vs the sentencepiece library.

Trains a small BPE model with the `sentencepiece` package on generated text
(identity normalisation, byte fallback, dummy space prefix: Llama 2's
settings), writes its pieces, scores and piece types into a GGUF file with
the `gguf` package, and compares sentencepiece's ids with kvfleet's
(tokenize_dump encode, specials not parsed) on seeded strings that mix
scripts, emoji, whitespace, digits and code. kvfleet's Decode and its
streamed detokenization must also give the string back. --no-byte-fallback
trains without byte pieces, so unknown characters become <unk> (a run of
them one <unk>, as sentencepiece does).
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile

import gguf
import sentencepiece as spm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_strings import WORDS, generate  # noqa: E402

NORMAL, UNKNOWN, CONTROL, UNUSED, BYTE = 1, 2, 3, 5, 6


def training_sentences(seed, count=4000):
    rng = random.Random(seed)
    english = ("the quick brown fox jumps over the lazy dog while we're reading it's 2024 and "
               "numbers like 42 or 3.14 appear in code such as def f(x): return x").split()
    out = []
    for _ in range(count):
        words = []
        for _ in range(rng.randint(3, 15)):
            if rng.random() < 0.75:
                words.append(rng.choice(english))
            else:
                words.append(rng.choice(WORDS[rng.choice(list(WORDS))]))
        out.append(" ".join(words))
    return out


def train(workdir, seed, byte_fallback):
    prefix = os.path.join(workdir, "spm")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(training_sentences(seed)), model_prefix=prefix, model_type="bpe",
        vocab_size=1500, hard_vocab_limit=False, byte_fallback=byte_fallback, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, split_digits=True, character_coverage=0.999,
        allow_whitespace_only_pieces=True, num_threads=1, minloglevel=2)
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


def write_gguf(sp, path):
    n = sp.get_piece_size()
    types = []
    for i in range(n):
        if sp.is_unknown(i):
            types.append(UNKNOWN)
        elif sp.is_control(i):
            types.append(CONTROL)
        elif sp.is_byte(i):
            types.append(BYTE)
        elif sp.is_unused(i):
            types.append(UNUSED)
        else:
            types.append(NORMAL)
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list([sp.id_to_piece(i) for i in range(n)])
    w.add_token_scores([sp.get_score(i) for i in range(n)])
    w.add_token_types(types)
    w.add_bos_token_id(sp.bos_id())
    w.add_eos_token_id(sp.eos_id())
    w.add_unk_token_id(sp.unk_id())
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--count", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--no-byte-fallback", action="store_true",
                    help="train without byte pieces: characters outside the vocabulary become <unk>")
    args = ap.parse_args()
    texts = generate(args.count, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        sp = train(tmp, args.seed, not args.no_byte_fallback)
        model = os.path.join(tmp, "spm.gguf")
        write_gguf(sp, model)
        inp, out = os.path.join(tmp, "in.hex"), os.path.join(tmp, "out.tsv")
        with open(inp, "w") as f:
            for s in texts:
                f.write(s.encode("utf-8").hex() + "\n")
        proc = subprocess.run([args.dump, "encode", "--model", model, "--no-parse-special", "--input", inp,
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
        decoded, streamed = bytes.fromhex(decoded), bytes.fromhex(streamed)
        problems = []
        if got == want:
            same += 1
        else:
            problems.append(f"ids: kvfleet {[sp.id_to_piece(t) for t in got][:12]} vs "
                            f"sentencepiece {[sp.id_to_piece(t) for t in want][:12]}")
        # Without byte pieces, text with an unknown character cannot come back.
        lossless = sp.unk_id() not in want
        if not lossless or (decoded == s.encode("utf-8") and streamed == decoded):
            exact += 1
        else:
            problems.append(f"decode {decoded!r} / streamed {streamed!r}")
        if problems and shown < 10:
            shown += 1
            print(f"[#{i}] {s!r}\n    " + "\n    ".join(problems))
    unk = sum(1 for s in texts if sp.unk_id() in sp.encode(s, out_type=int))
    print(f"tokenizer reference (sentencepiece bpe{'' if not args.no_byte_fallback else ', no byte fallback'}, "
          f"{sp.get_piece_size()} pieces): {same}/{len(texts)} identical; decode(encode(s)) == s for "
          f"{exact - unk}/{len(texts) - unk} strings without <unk>")
    return 0 if same == len(texts) and exact == len(texts) else 1


if __name__ == "__main__":
    sys.exit(main())
