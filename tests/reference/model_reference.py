#!/usr/bin/env python3
"""Compares kvfleet's model executor against the independent numpy reference.

For each prompt (a list of token ids):
  1. next-token logits: `kvfleet logits` vs llama_numpy.LlamaReference, every
     vocabulary entry within the tolerance below;
  2. greedy continuation of --gen-tokens tokens: `kvfleet generate --local
     --temperature 0 --ignore-eos` vs the reference's greedy loop (which keeps
     its own KV cache), token for token.

Two kinds of model:
  --model PATH          a real GGUF (ctest: the default SmolLM2-135M-Instruct
                        Q4_1, Qwen2.5-Coder-0.5B-Instruct and Gemma 3 270M
                        Q4_K_M); 20+ prompts made from English text and chat
                        turns by a tokenizer built from the GGUF's own
                        vocabulary (HF `tokenizers` for byte-level BPE,
                        `sentencepiece` for SentencePiece), 1..200 tokens;
                        --few takes 5 of them, --long N adds a prompt of N
                        tokens (past Gemma 3's 512-token window).
  --tiny-dtype DTYPE    a random-weight tiny model written by `kvfleet
                        tiny-model` with tensors of DTYPE, or of every type
                        kvfleet reads (all, the list kvfleet gives); of one
                        architecture or all (--tiny-arch); a handful of
                        seeded random prompts.

Tolerance on logits:  |kvfleet - reference| <= ATOL + RTOL * max|reference|
with RTOL = 2e-3 and ATOL = 1e-5 (a floor only), per prompt: the bound scales
with that prompt's largest |logit|, so one rule fits SmolLM2 (logits 15..35,
bound about 0.03..0.07) and tiny random models with much smaller logits.
Why this bound:
  - Both sides use the same dequantized weights (dequantization is exact in
    float32), so what remains is arithmetic: kvfleet computes in float32 with
    its own summation order; the reference computes the prompt pass, whose
    logits are compared, in float64 (--precision float32 makes it float32),
    and its greedy decode steps in float32 (--precision float64: float64).
  - Both round K and V to float16 for the KV cache. A float32-level
    difference in a K or V value can flip its float16 rounding by one ulp
    (2^-11 relative), which is far larger than float32 noise; 30 layers
    carry it to the logits.
  - Measured on the 21 SmolLM2 prompts: a float32 run of the reference
    against its float64 run differs by up to 1.1e-2 (logits up to 35), about
    0.22 of the bound; so an honest float32 engine sits ~5x inside it.
    kvfleet itself (first run, 21 prompts): max |delta| 8.6e-3, at most 0.23
    of the bound; all 21 greedy continuations identical for 32 tokens.
    Tiny random models (logits ~3): max |delta| below 7e-5, 0.01 of the bound.
  - Real bugs land far outside it (measured, max |delta| / bound): RoPE base
    1e4 instead of 1e5: 120x; RoPE on halves instead of adjacent pairs:
    500x; q head h reading kv head h % n_kv instead of h // group: 770x; a
    causal mask that hides the token's own position: 490x; even one layer's
    ffn_norm weights off by 1%: 2.4x. (Too small to see, by design: an RMSNorm
    epsilon of 1e-6 instead of 1e-5, or skipping the float16 rounding of
    K/V: 0.5x and 0.25x, the size of float32 noise.)
Greedy continuations must be identical. The one exception is a genuine tie:
if the two diverge at step j, kvfleet's logits for the common prefix are
fetched and must match the reference's within the tolerance, and the two
tokens' reference logits must lie within 2x the tolerance of each other; then
either choice is right within the arithmetic precision, the divergence is
printed as a tie, and the comparison of that prompt stops at step j.

Prints the largest |delta| seen and the tolerance; exits 1 on any mismatch
with the prompt, position and values in the message.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import subprocess
import sys
import tempfile
import time

# One BLAS thread: kvfleet runs beside the reference (and ctest runs tests in
# parallel); an oversubscribed threaded BLAS slows the reference down tenfold.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_numpy  # noqa: E402  (the reference sits next to this script)

ATOL = 1e-5
RTOL = 2e-3

# Original text (written for this test), long enough for a 200-token prompt.
_PASSAGE = (
    "The old lighthouse stood at the end of a narrow spit of rock, and for a hundred "
    "years its keepers had written the weather into a leather book every evening. "
    "When the light was automated, the last keeper carried the books up the hill to "
    "the village library, where they sat on a shelf until a student of climate found "
    "them. She counted the storms, the fogs and the calm days, decade by decade, and "
    "drew a chart that surprised everyone: the winters had grown wetter, the summers "
    "windier, and the number of days on which the keepers wrote simply 'clear' had "
    "fallen by a third. The village argued about the chart for a season. Some said the "
    "keepers had grown lazy with their words; others said the sea itself had changed. "
    "In the end they agreed to keep writing, and a retired teacher now climbs the "
    "hill each evening with a notebook, looks west across the water, and records what "
    "she sees in plain sentences, exactly as the keepers did, so that another student "
    "in another century can count again."
)
_TEXTS = [
    "The",
    "Hello",
    "Once upon a time",
    "def fibonacci(n):\n    ",
    "1, 2, 3, 4, 5,",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "Water boils at 100 degrees Celsius at sea level, but on a high mountain",
    "import numpy as np\n\nx = np.arange(10)\nprint(",
    "Translate to French: I would like a cup of coffee, please.\nFrench:",
    "A list of prime numbers: 2, 3, 5, 7, 11,",
]
_CHATS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain what a KV cache is in one sentence.",
    "How many legs does a spider have?",
    "Give me three tips for learning to play the guitar.",
    "What is 17 times 23?",
]
_PASSAGE_LENGTHS = (9, 33, 64, 128, 200)


class Failure(Exception):
    pass


def tolerance(ref_logits: np.ndarray) -> float:
    return ATOL + RTOL * float(np.max(np.abs(ref_logits)))


# --- kvfleet CLI ---------------------------------------------------------

class Kvfleet:
    def __init__(self, binary: str, model: str, threads: int):
        self.binary, self.model, self.threads = binary, model, threads

    def _run(self, args, what):
        cmd = [self.binary] + args
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as e:
            raise Failure(f"{what}: cannot run {self.binary}: {e}")
        if p.returncode != 0:
            raise Failure(f"{what}: `{' '.join(cmd)[:300]}` exited {p.returncode}\n"
                          f"stderr:\n{p.stderr[-2000:]}")
        return p.stdout

    def logits(self, ids, n_vocab, workdir):
        fd, out = tempfile.mkstemp(suffix=".f32", dir=workdir)
        os.close(fd)
        try:
            self._run(["logits", "--model", self.model, "--prompt-token-ids",
                       ",".join(map(str, ids)), "--out", out, "--threads", str(self.threads)],
                      "kvfleet logits")
            data = np.fromfile(out, dtype="<f4")
        finally:
            os.unlink(out)
        if data.size != n_vocab:
            raise Failure(f"kvfleet logits wrote {data.size} float32 values, expected "
                          f"vocab size {n_vocab}")
        return data.astype(np.float64)

    def generate(self, ids, n):
        out = self._run(["generate", "--local", "--model", self.model, "--prompt-token-ids",
                         ",".join(map(str, ids)), "--max-tokens", str(n),
                         "--temperature", "0", "--ignore-eos", "--output", "ids",
                         "--threads", str(self.threads)],
                        "kvfleet generate")
        lines = [l.strip() for l in out.splitlines() if l.strip()]
        try:
            return [int(t) for t in lines[-1].split(",") if t.strip()] if lines else []
        except ValueError:
            raise Failure(f"kvfleet generate printed {lines[-1]!r}, expected comma-separated ids")

    def tiny_model(self, path, dtype, seed, arch="llama", layers=2, extra=()):
        self._run(["tiny-model", "--out", path, "--dtype", dtype, "--seed", str(seed), "--arch", arch,
                   "--layers", str(layers), *extra], "kvfleet tiny-model")


# --- prompts -------------------------------------------------------------

def encoder(ref: llama_numpy.LlamaReference):
    """Text -> ids by an oracle built from the GGUF's vocabulary, BOS first when the file asks."""
    if llama_numpy.field(ref.reader, "tokenizer.ggml.model") == "llama":
        from tokenizer_spm_gguf_reference import oracle_from_gguf
        sp, _ = oracle_from_gguf(ref.path)
        enc = lambda s: sp.encode(s, out_type=int)  # noqa: E731
    else:
        tok = llama_numpy.build_tokenizer(ref.reader)
        enc = lambda s: tok.encode(s, add_special_tokens=False).ids  # noqa: E731
    bos = llama_numpy.field(ref.reader, "tokenizer.ggml.bos_token_id")
    if llama_numpy.field(ref.reader, "tokenizer.ggml.add_bos_token", False) and bos is not None:
        return lambda s: [int(bos)] + enc(s)
    return enc


def real_prompts(ref: llama_numpy.LlamaReference, few: bool, long: int):
    enc = encoder(ref)
    prompts = []
    texts = [_TEXTS[i] for i in (0, 3, 6)] if few else _TEXTS
    for t in texts:
        prompts.append((f"text {t[:30]!r}", enc(t)))
    if llama_numpy.field(ref.reader, "tokenizer.chat_template"):  # base models have none
        for c in _CHATS[:1] if few else _CHATS:
            prompts.append((f"chat {c[:30]!r}", enc(llama_numpy.chat_prompt(ref.reader, c))))
    passage = enc(_PASSAGE)
    if len(passage) < max(_PASSAGE_LENGTHS):
        raise Failure(f"test passage tokenizes to {len(passage)} tokens, "
                      f"fewer than {max(_PASSAGE_LENGTHS)}")
    for n in (64,) if few else _PASSAGE_LENGTHS:
        prompts.append((f"passage[:{n}]", passage[:n]))
    if long:
        text = enc(" ".join([_PASSAGE] * (long // 150 + 2)))
        prompts.append((f"passage x{long // 150 + 2}[:{long}]", text[:long]))
    return prompts


def random_prompts(n_vocab: int, n_ctx: int, gen: int, count: int, seed: int):
    rng = np.random.default_rng(seed)
    longest = max(1, min(100, n_ctx - gen))
    lengths = [1, 2, 7, 31, longest][:count]
    while len(lengths) < count:
        lengths.append(int(rng.integers(1, longest + 1)))
    return [(f"random[{n}]", rng.integers(0, n_vocab, size=n).tolist()) for n in lengths]


# --- comparison ----------------------------------------------------------

def describe(label, ids):
    head = ",".join(map(str, ids[:12])) + (",..." if len(ids) > 12 else "")
    return f"prompt {label} ({len(ids)} tokens: {head})"


def compare_logits(label, ids, ours, ref, what="next-token logits"):
    tol = tolerance(ref)
    delta = np.abs(ours - ref)
    i = int(np.argmax(delta))
    if not np.all(np.isfinite(ours)):
        bad = int(np.flatnonzero(~np.isfinite(ours))[0])
        raise Failure(f"{describe(label, ids)}: {what}: kvfleet logit[{bad}] = {ours[bad]}")
    if delta[i] > tol:
        n_bad = int(np.sum(delta > tol))
        raise Failure(
            f"{describe(label, ids)}: {what}: |delta| {delta[i]:.5g} > tolerance {tol:.5g} "
            f"at vocab index {i}: kvfleet {ours[i]:.6f}, reference {ref[i]:.6f} "
            f"({n_bad} of {ref.size} entries out of tolerance; kvfleet argmax "
            f"{int(np.argmax(ours))}, reference argmax {int(np.argmax(ref))})")
    return float(delta[i]), tol


def compare_greedy(kv, workdir, label, ids, ours, ref_tokens, ref_steps, n_vocab):
    """Returns (steps that agree, tie note or None)."""
    if len(ours) != len(ref_tokens):
        raise Failure(f"{describe(label, ids)}: kvfleet generated {len(ours)} tokens, "
                      f"expected {len(ref_tokens)}: {ours}")
    for j, (a, b) in enumerate(zip(ours, ref_tokens)):
        if a == b:
            continue
        prefix = list(ids) + ref_tokens[:j]
        ref = ref_steps[j]
        tol = tolerance(ref)
        gap = abs(ref[b] - ref[a])
        msg = (f"{describe(label, ids)}: greedy continuation differs at step {j} "
               f"(position {len(prefix)}): kvfleet chose {a}, reference chose {b}; "
               f"reference logits {b}: {ref[b]:.6f}, {a}: {ref[a]:.6f} (gap {gap:.5g}, "
               f"tolerance {tol:.5g})\n  kvfleet  : {ours}\n  reference: {ref_tokens}")
        if gap > 2 * tol:
            raise Failure(msg)
        compare_logits(label, prefix, kv.logits(prefix, n_vocab, workdir), ref,
                       what=f"logits at greedy step {j}")
        return j, f"tie at step {j}: {a} vs {b}, reference gap {gap:.3g}"
    return len(ours), None


def run(kv: Kvfleet, ref: llama_numpy.LlamaReference, prompts, gen: int, workdir: str,
        dtypes):
    """dtypes: the reference's (prompt pass, decode step) compute dtypes."""
    n_vocab = ref.w["token_embd.weight"].shape[0]
    worst, worst_tol, worst_where = 0.0, 0.0, ""  # largest |delta| relative to its bound
    max_abs = 0.0
    failures, ties = [], []
    # kvfleet runs on one worker thread while numpy computes the reference.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        jobs = [(pool.submit(kv.logits, ids, n_vocab, workdir), pool.submit(kv.generate, ids, gen))
                for _, ids in prompts]
        for (label, ids), (logits_job, gen_job) in zip(prompts, jobs):
            t0 = time.perf_counter()
            ref_tokens, ref_steps = ref.greedy(ids, gen, prompt_dtype=dtypes[0],
                                               decode_dtype=dtypes[1])
            t_ref = time.perf_counter() - t0
            try:
                d, tol = compare_logits(label, ids, logits_job.result(), ref_steps[0])
                max_abs = max(max_abs, d)
                if d / tol > (worst / worst_tol if worst_tol else -1):
                    worst, worst_tol, worst_where = d, tol, label
                agreed, tie = compare_greedy(kv, workdir, label, ids, gen_job.result(),
                                             ref_tokens, ref_steps, n_vocab)
                if tie:
                    ties.append(f"{label}: {tie}")
                status = f"ok  |delta| {d:.2e} (tol {tol:.2e}), greedy {agreed}/{gen}"
            except Failure as e:
                failures.append(str(e))
                status = "FAIL"
            print(f"  {status:<48} {label} [{len(ids)} tokens, ref {t_ref:.1f}s]", flush=True)
    return max_abs, (worst, worst_tol, worst_where), failures, ties


# Cases of an architecture beyond its plain tiny model (extra `kvfleet
# tiny-model` flags): the architectures themselves come from kvfleet's
# registry (`kvfleet tiny-model --list-architectures`), so one added there
# runs here too, and fails until llama_numpy.py has its forward pass.
TINY_VARIANTS = {"llama": [("llama3", ["--llama3-rope"])]}


def registry(kvfleet: str, what: str) -> list[str]:
    """kvfleet's own list: `kvfleet tiny-model --list-architectures` or `--list-types`."""
    out = subprocess.run([kvfleet, "tiny-model", f"--list-{what}"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise Failure(f"kvfleet tiny-model --list-{what} failed: {out.stderr.strip()}")
    return out.stdout.split()


def tiny_cases(kvfleet: str, arch: str, dtype: str, llama3_rope: bool):
    """[(label, architecture, extra tiny-model flags, tensor type)] for --tiny-arch and
    --tiny-dtype (each a name or "all")."""
    dtypes = registry(kvfleet, "types") if dtype == "all" else [dtype]
    if arch != "all":
        archs = [(arch, arch, ["--llama3-rope"] if llama3_rope else [])]
    else:
        archs = []
        for name in registry(kvfleet, "architectures"):
            archs.append((name, name, []))
            archs += [(label, name, flags) for label, flags in TINY_VARIANTS.get(name, [])]
    return [(label if len(dtypes) == 1 else f"{label} {t}", name, flags, t)
            for label, name, flags in archs for t in dtypes]


def check(args, workdir, tiny=None) -> int:
    """Compares one model (args.model, or tiny = (label, arch, flags)): 0 passed, 1 failed, 77 skipped."""
    prompt_dtype = np.float32 if args.precision == "float32" else np.float64
    decode_dtype = np.float64 if args.precision == "float64" else np.float32
    t0 = time.perf_counter()
    try:
        if args.model:
            if not os.path.exists(args.model):
                print(f"SKIP: model {args.model} not found (scripts/fetch_model.sh fetches it)")
                return 77  # ctest's SKIP_RETURN_CODE, as the other reference tests
            model = args.model
        else:
            label, arch, extra, dtype = tiny
            model = os.path.join(workdir, f"tiny_{label.replace(' ', '_')}.gguf")
            # kvfleet tiny-model widens the rows for a type with wider blocks (the K-quants').
            Kvfleet(args.kvfleet, model, args.threads).tiny_model(
                model, dtype, args.seed, arch, args.tiny_layers, extra)
        ref = llama_numpy.LlamaReference(model, np.float32)
        kv = Kvfleet(args.kvfleet, model, args.threads)
        if args.model:
            prompts = real_prompts(ref, args.few, args.long)
        else:
            types = sorted(set(ref.tensor_types.values()))
            print(f"tiny model {tiny[0]}: tensor types {types}")
            prompts = random_prompts(ref.w["token_embd.weight"].shape[0], ref.hp.n_ctx,
                                     args.gen_tokens, args.prompts, args.seed)
    except (Failure, ValueError) as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    hp = ref.hp
    print(f"model {os.path.basename(model)}: {hp.arch}, {hp.n_layer} layers, hidden "
          f"{hp.n_embd}, heads {hp.n_head}/{hp.n_head_kv}, vocab {hp.n_vocab}; reference in "
          f"{args.precision} precision; {len(prompts)} prompts x {args.gen_tokens} greedy tokens")
    max_abs, (worst, worst_tol, where), failures, ties = run(kv, ref, prompts, args.gen_tokens, workdir,
                                                             (prompt_dtype, decode_dtype))
    print(f"largest |delta| over all prompts: {max_abs:.3e}; closest to its tolerance: "
          f"{worst:.3e} on {where}, tolerance there {worst_tol:.3e} "
          f"(= {ATOL:g} + {RTOL:g} * max|logit|), ratio {worst / max(worst_tol, 1e-30):.3f}")
    for t in ties:
        print(f"near-tie: {t}")
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    print(f"{len(prompts) - len(failures)} passed, {len(failures)} failed "
          f"({time.perf_counter() - t0:.0f}s)")
    return 1 if failures else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvfleet", required=True, help="path to the kvfleet binary")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="GGUF model to compare on")
    src.add_argument("--tiny-dtype",
                     help="generate a tiny random model of this tensor type with kvfleet tiny-model, "
                          "or all: every type kvfleet reads (`kvfleet tiny-model --list-types`)")
    ap.add_argument("--seed", type=int, default=7, help="tiny-model seed and prompt seed")
    ap.add_argument("--tiny-arch", default="llama",
                    help="the tiny model's architecture, or all: every one kvfleet registers, and their variants")
    ap.add_argument("--tiny-layers", type=int, default=2,
                    help="the tiny model's layers (6 gives gemma3 one global layer among its windowed ones)")
    ap.add_argument("--tiny-llama3-rope", action="store_true", help="a tiny llama with Llama 3's scaled RoPE")
    ap.add_argument("--prompts", type=int, default=8, help="number of random prompts (tiny model)")
    ap.add_argument("--gen-tokens", type=int, default=32)
    ap.add_argument("--few", action="store_true", help="a real model: 5 of its prompts (CI time)")
    ap.add_argument("--long", type=int, default=0, help="a real model: add a prompt of this many tokens")
    ap.add_argument("--threads", type=int, default=1,
                    help="kvfleet --threads (kvfleet runs beside the numpy reference)")
    ap.add_argument("--precision", choices=("mixed", "float64", "float32"), default="mixed",
                    help="reference compute dtype: mixed = float64 for the prompt pass (whose "
                         "logits are compared) and float32 for greedy decode steps")
    args = ap.parse_args(argv)

    if not os.access(args.kvfleet, os.X_OK):
        print(f"FAIL: kvfleet binary {args.kvfleet} is not executable", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="kvfleet_model_reference_") as workdir:
        if args.model:
            return check(args, workdir)
        try:
            cases = tiny_cases(args.kvfleet, args.tiny_arch, args.tiny_dtype, args.tiny_llama3_rope)
        except Failure as e:
            print(f"FAIL: {e}", file=sys.stderr)
            return 1
        failed = [case[0] for case in cases if check(args, workdir, case) != 0]
    if len(cases) > 1:
        print(f"{len(cases) - len(failed)} of {len(cases)} tiny models agree with the reference"
              + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
