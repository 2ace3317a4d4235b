#!/usr/bin/env python3
"""Byte-level BPE reference: kvfleet's tokenizer vs Hugging Face `tokenizers`.

The oracle is built only from the GGUF's data (read with the `gguf` package):
tokens and merges go into tokenizers.models.BPE, the pre-tokenizer is
assembled from Hugging Face's own components, and the control tokens are
added as special tokens. Nothing of kvfleet's pre-tokenization is reused.

  --pre smollm     Sequence[Digits(individual_digits), ByteLevel(use_regex)]  (SmolLM2's tokenizer.json)
  --pre llama-bpe  Sequence[Split(Llama 3 regex, isolated), ByteLevel(use_regex=False)], ignore_merges
                   (Llama 3's tokenizer.json), over the same vocabulary
  --pre dbrx       the Llama 3 split with every merge applied (OLMo 2's tokenizer.json), over the
                   same vocabulary
  --pre qwen2      Sequence[Split(Qwen2 regex, isolated), ByteLevel(use_regex=False)] (Qwen2.5's
                   tokenizer.json, less its NFC normalizer, which llama.cpp does not apply either)

For every generated string: ids must be identical (specials parsed on both
sides, and again for the chat strings with specials not parsed), and
kvfleet's Decode and its streamed detokenization must give back the string.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_gguf import read_tokenizer_metadata  # noqa: E402
from tokenizer_strings import generate  # noqa: E402

# Llama 3's pre-tokenizer pattern, as in Meta-Llama-3's tokenizer.json.
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# Qwen2's, as in Qwen2.5's tokenizer.json: Llama 3's with single digits.
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")

CONTROL, USER_DEFINED = 3, 4


def build_oracle(meta, pre):
    tokens = meta["tokens"]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    merges = [tuple(m.split(" ", 1)) for m in meta["merges"]]
    if pre == "smollm":
        model = models.BPE(vocab, merges)
        pre_tok = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ])
    elif pre in ("llama-bpe", "qwen2", "dbrx"):
        model = models.BPE(vocab, merges, ignore_merges=(pre == "llama-bpe"))
        pre_tok = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_PATTERN if pre == "qwen2" else LLAMA3_PATTERN),
                                 behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    else:
        raise SystemExit(f"unknown --pre {pre}")
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tok
    tok.decoder = decoders.ByteLevel()
    types = meta["token_type"]
    # Control tokens are special (text when specials are not parsed);
    # user-defined ones are added tokens that are always matched.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == CONTROL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False)
                    for t, ty in zip(tokens, types) if ty == USER_DEFINED])
    return tok


def run_dump(dump, model, pre, texts, parse_special, workdir, tag):
    inp = os.path.join(workdir, f"{tag}.hex")
    out = os.path.join(workdir, f"{tag}.tsv")
    with open(inp, "w") as f:
        for s in texts:
            f.write(s.encode("utf-8").hex() + "\n")
    cmd = [dump, "encode", "--model", model, "--pre", pre, "--input", inp, "--output", out]
    if not parse_special:
        cmd.append("--no-parse-special")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"tokenize_dump failed ({proc.returncode}): {proc.stderr}")
    results = []
    with open(out) as f:
        for line in f:
            ids, decoded, streamed = line.rstrip("\n").split("\t")
            results.append(([int(x) for x in ids.split(",")] if ids else [],
                            bytes.fromhex(decoded), bytes.fromhex(streamed)))
    if len(results) != len(texts):
        raise SystemExit(f"tokenize_dump wrote {len(results)} lines for {len(texts)} inputs")
    return results, proc.stdout.strip()


def droppable_bytes(meta):
    """Bytes whose byte-level character is not in the vocabulary.

    GPT-2's alphabet (bytes_to_unicode in its encoder.py) shows every byte as a
    printable character; a vocabulary may lack some of them (SmolLM2 has no
    token for 0x04, 0xF1, 0xF2, ...), and then the byte cannot be encoded:
    Hugging Face drops it (no unk token), and so must kvfleet.
    """
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
                 + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    shown, extra = {}, 0
    for b in range(256):
        if b in printable:
            shown[b] = chr(b)
        else:
            shown[b] = chr(256 + extra)
            extra += 1
    vocab = set(meta["tokens"])
    return {b for b in range(256) if shown[b] not in vocab}


def compare(oracle, texts, results, label, dropped):
    """Returns (identical ids, exact round trips, strings with droppable bytes)."""
    same_ids = exact = lossy = shown = 0
    for i, (s, (ids, decoded, streamed)) in enumerate(zip(texts, results)):
        want = oracle.encode(s, add_special_tokens=False).ids
        raw = s.encode("utf-8")
        expected = bytes(b for b in raw if b not in dropped)
        problems = []
        if ids == want:
            same_ids += 1
        else:
            first = next((k for k, (a, b) in enumerate(zip(ids, want)) if a != b), min(len(ids), len(want)))
            problems.append(f"ids differ at {first}: kvfleet {ids[max(0, first - 2):first + 4]} "
                            f"vs HF {want[max(0, first - 2):first + 4]} (lengths {len(ids)}/{len(want)})")
        if expected != raw:
            lossy += 1
        if decoded != expected:
            problems.append(f"decode gives {decoded!r}, expected {expected!r}")
        elif expected == raw:
            exact += 1
        # The stream never sends a broken character; it shows what is broken
        # as U+FFFD, exactly where Python's errors="replace" does.
        if streamed != decoded.decode("utf-8", errors="replace").encode("utf-8"):
            problems.append(f"streamed detokenization gives {streamed!r}")
        if problems:
            shown += 1
            if shown <= 10:
                print(f"[{label} #{i}] {s!r}:\n    " + "\n    ".join(problems))
    return same_ids, exact, lossy


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump", required=True, help="path of the tokenize_dump binary")
    ap.add_argument("--model", required=True, help="GGUF file with a gpt2 (byte-level BPE) vocabulary")
    ap.add_argument("--pre", default="smollm", choices=["smollm", "llama-bpe", "qwen2", "dbrx"])
    ap.add_argument("--count", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not os.path.exists(args.model):
        print(f"SKIP: model {args.model} not found (scripts/fetch_model.sh fetches it)")
        return 77  # ctest's SKIP_RETURN_CODE

    t0 = time.time()
    meta = read_tokenizer_metadata(args.model)
    oracle = build_oracle(meta, args.pre)
    texts = generate(args.count, args.seed)
    chat_texts = [s for s in texts if "<|im_" in s]
    with tempfile.TemporaryDirectory() as tmp:
        results, timing = run_dump(args.dump, args.model, args.pre, texts, True, tmp, "special")
        print(timing)
        dropped = droppable_bytes(meta)
        ok, exact, lossy = compare(oracle, texts, results, "parse_special", dropped)
        # Specials not parsed: both sides must tokenize "<|im_start|>" as text.
        oracle.encode_special_tokens = True
        plain_results, _ = run_dump(args.dump, args.model, args.pre, chat_texts, False, tmp, "plain")
        plain_ok, plain_exact, plain_lossy = compare(oracle, chat_texts, plain_results, "no_parse_special", dropped)
    total_tokens = sum(len(r[0]) for r in results)
    print(f"decode(encode(s)) == s: {exact}/{len(texts) - lossy} strings the vocabulary can represent; "
          f"{lossy} strings hold bytes without a token ({' '.join(hex(b) for b in sorted(dropped))}), "
          f"dropped identically on both sides")
    print(f"tokenizer reference ({args.pre}): {ok}/{len(texts)} identical "
          f"({total_tokens} tokens, {sum(len(s.encode()) for s in texts)} bytes); "
          f"specials as text: {plain_ok}/{len(chat_texts)} identical; {time.time() - t0:.1f} s")
    passed = (ok == len(texts) and exact == len(texts) - lossy and plain_ok == len(chat_texts)
              and plain_exact == len(chat_texts) - plain_lossy)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
