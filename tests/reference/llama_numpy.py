#!/usr/bin/env python3
"""Independent numpy reference of decoder forward passes (Llama, Qwen2, Qwen3, Gemma 3, Phi-3, OLMo 2), read from a GGUF file.

This is an oracle for kvfleet's model executor. It shares no code with
kvfleet: the file is parsed by the `gguf` PyPI package (GGUFReader) and every
weight is dequantized by that package's own `gguf.quants.dequantize`; the math
below is written from the published Llama architecture:

  x = token_embd[ids]
  per layer:
    h   = rmsnorm(x) * attn_norm                 rmsnorm(x) = x / sqrt(mean(x^2) + eps)
    q,k,v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv)     (biases: Qwen2-style files)
    q,k = rope(q), rope(k)
    k,v rounded to float16                        (kvfleet's KV cache stores float16)
    a   = softmax(q k^T / sqrt(head_dim) + causal mask) v    (grouped-query: q head h
                                                   reads kv head h // (n_head / n_kv_head))
    x   = x + a Wo^T
    h   = rmsnorm(x) * ffn_norm
    x   = x + W_down (silu(W_gate h) * W_up h)
  logits = (rmsnorm(x) * output_norm) W_out^T     (W_out = output.weight, or the tied
                                                   token_embd.weight when absent)

The other architectures, from their published definitions:
  qwen2   the Llama layer with biases on q, k and v (the +bq terms above);
  qwen3   q and k normalised per head, q = rmsnorm(q_h) * attn_q_norm (and k),
          before RoPE; head_dim from attention.key_length;
  gemma3  x = token_embd[ids] * sqrt(n_embd) (in float32); per layer
            h = rmsnorm(x) * attn_norm; q, k, v; q, k normalised per head;
            RoPE with base 10,000 on local layers, freq_base on global ones
            (layer i global iff i % 6 == 5); a local layer's query at q sees
            keys k with q - k < sliding_window; scores * 1/sqrt(head_dim);
            x = x + rmsnorm(a Wo^T) * post_attention_norm
            h = rmsnorm(x) * ffn_norm
            x = x + rmsnorm(W_down (gelu_tanh(W_gate h) * W_up h)) * post_ffw_norm
          (llama.cpp's rules for what the GGUF does not state; its converter
          already added the 1 of Gemma's 1 + w to every norm weight);
  phi3    the Llama layer from fused weights: attn_qkv holds the rows of
          Wq, Wk, Wv in that order, ffn_up the rows of Wgate then Wup; every
          layer sees the sliding_window when it is shorter than the context;
          LongRoPE (Hugging Face's Phi3 rotary): when the context is longer
          than rope.scaling.original_context_length each pair's frequency is
          divided by rope_factors_long, otherwise by rope_factors_short, and
          cos and sin are multiplied by rope.scaling.attn_factor;
  olmo2   no norm before attention or the feed-forward block: q = rmsnorm(x
          Wq^T) * attn_q_norm over the whole projection (all heads together),
          k likewise, before RoPE; x = x + rmsnorm(a Wo^T) * post_attention_norm;
          x = x + rmsnorm(W_down (silu(W_gate x) * W_up x)) * post_ffw_norm.

RoPE follows the GGUF / llama.cpp convention. For arch `llama` it is the
"normal" mode: adjacent pairs (x[2i], x[2i+1]) rotate by pos * base^(-2i/rot_dim)
(the HF->GGUF converter permuted the q/k weights so that this matches HF's
rotate_half). For every other architecture it is the "neox" mode: pairs
(x[i], x[i + rot_dim/2]).
Only the first rope.dimension_count dims of each head rotate; a linear
rope scaling factor divides the position; a rope_freqs.weight tensor (Llama
3.1 files) divides each pair's frequency.

Precision: the dequantized weights are held in float32 (exact: every GGUF
type here dequantizes to float32 values). Each forward pass runs in a compute
dtype of the caller's choice, float64 or float32 (default: the constructor's
`dtype`): activations, matrix products (numpy BLAS), RoPE and attention in
that dtype; RMSNorm statistics and the softmax always in float64. The KV
cache holds the float16-rounded K and V as float32 (exact). `greedy()` can
run the prompt in float64 and the single-token decode steps in float32,
which is what model_reference.py does: the logits it compares come from a
float64 pass, and the decode loop stays fast.

The reference keeps a KV cache of its own (per layer, per position), so a
greedy continuation costs one single-token pass per new token.

Run on its own:
  llama_numpy.py [--model PATH] [--prompt TEXT] [--max-tokens N]
prints the greedy continuation of the chat-formatted prompt; --self-test
checks that the default model answers "What is the capital of France?" with
Paris.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

_HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODEL = os.path.join(
    _HERE, "..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

# GGUF token types (llama.cpp's llama_token_type).
_TOKEN_TYPE_CONTROL = 3
_TOKEN_TYPE_USER_DEFINED = 4


def field(reader: GGUFReader, key: str, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


@dataclasses.dataclass
class Hparams:
    arch: str
    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int
    rms_eps: float
    rope_base: float
    rope_dim: int
    rope_neox: bool
    rope_scale: float  # positions are divided by this (linear scaling)
    n_ctx: int
    n_vocab: int
    windows: list  # per layer: 0 (all keys) or the sliding window
    rope_bases: list  # per layer
    embed_scale: float = 1.0
    gelu: bool = False  # gelu_tanh instead of silu in the feed-forward
    rope_factors: str = "rope_freqs.weight"  # the tensor dividing each pair's frequency, if present
    rope_magnitude: float = 1.0  # cos and sin are multiplied by this (LongRoPE)

    @staticmethod
    def from_reader(reader: GGUFReader) -> "Hparams":
        arch = field(reader, "general.architecture")
        supported = ("llama", "qwen2", "qwen3", "gemma3", "phi3", "olmo2")
        if arch not in supported:
            raise ValueError(f"unsupported architecture {arch!r} ({', '.join(supported)})")

        def req(key):
            v = field(reader, f"{arch}.{key}")
            if v is None:
                raise ValueError(f"GGUF lacks {arch}.{key}")
            return v

        n_embd = int(req("embedding_length"))
        n_head = int(req("attention.head_count"))
        head_dim = int(field(reader, f"{arch}.attention.key_length", n_embd // n_head))
        rope_scale = 1.0
        if field(reader, f"{arch}.rope.scaling.type") == "linear":
            rope_scale = float(field(reader, f"{arch}.rope.scaling.factor", 1.0))
        elif field(reader, f"{arch}.rope.scale_linear") is not None:
            rope_scale = float(field(reader, f"{arch}.rope.scale_linear"))
        tokens = field(reader, "tokenizer.ggml.tokens")
        n_vocab = int(field(reader, f"{arch}.vocab_size", len(tokens) if tokens else 0))
        n_layer = int(req("block_count"))
        base = float(field(reader, f"{arch}.rope.freq_base", 10000.0))
        windows, bases = [0] * n_layer, [base] * n_layer
        if arch == "gemma3":
            window = int(req("attention.sliding_window"))
            for i in range(n_layer):
                if i % 6 != 5:
                    windows[i], bases[i] = window, 10000.0
        n_ctx = int(req("context_length"))
        rope_factors, rope_magnitude = "rope_freqs.weight", 1.0
        if arch == "phi3":
            window = int(field(reader, "phi3.attention.sliding_window", 0))
            if 0 < window < n_ctx:
                windows = [window] * n_layer
            original = field(reader, "phi3.rope.scaling.original_context_length")
            if original is not None:
                rope_factors = ("rope_factors_long.weight" if n_ctx > int(original)
                                else "rope_factors_short.weight")
                scale = n_ctx / int(original)
                default = np.sqrt(1 + np.log(scale) / np.log(int(original))) if scale > 1 else 1.0
                rope_magnitude = float(field(reader, "phi3.rope.scaling.attn_factor", default))
        return Hparams(
            arch=arch,
            n_layer=n_layer,
            n_embd=n_embd,
            n_ff=int(req("feed_forward_length")),
            n_head=n_head,
            n_head_kv=int(field(reader, f"{arch}.attention.head_count_kv", n_head)),
            head_dim=head_dim,
            rms_eps=float(req("attention.layer_norm_rms_epsilon")),
            rope_base=base,
            rope_dim=int(field(reader, f"{arch}.rope.dimension_count", head_dim)),
            rope_neox=(arch != "llama"),
            rope_scale=rope_scale if rope_scale > 0 else 1.0,
            n_ctx=n_ctx,
            n_vocab=n_vocab,
            windows=windows,
            rope_bases=bases,
            embed_scale=float(np.sqrt(np.float32(n_embd))) if arch == "gemma3" else 1.0,
            gelu=(arch == "gemma3"),
            rope_factors=rope_factors,
            rope_magnitude=rope_magnitude,
        )


class KVCache:
    """Per-layer K and V for positions 0..len-1, already rounded to float16."""

    def __init__(self, hp: Hparams, dtype):
        self.k = [np.zeros((0, hp.n_head_kv, hp.head_dim), dtype) for _ in range(hp.n_layer)]
        self.v = [np.zeros((0, hp.n_head_kv, hp.head_dim), dtype) for _ in range(hp.n_layer)]

    def __len__(self) -> int:
        return self.k[0].shape[0]


class LlamaReference:
    def __init__(self, path: str, dtype=np.float32):
        self.path = path
        self.dtype = np.dtype(dtype)  # default compute dtype
        wdtype = np.float64 if self.dtype == np.float64 else np.float32
        self.reader = GGUFReader(path)
        self.hp = Hparams.from_reader(self.reader)
        self.tensor_types = {}
        self.w = {}
        for t in self.reader.tensors:
            self.tensor_types[t.name] = t.tensor_type.name
            arr = dequantize(t.data, t.tensor_type)
            # GGUF lists dims fastest-first; numpy wants slowest-first: a
            # matrix with GGUF shape [in, out] becomes (out, in).
            shape = tuple(int(d) for d in reversed(t.shape))
            self.w[t.name] = np.ascontiguousarray(arr.reshape(shape), dtype=wdtype)
        hp = self.hp
        self._split_fused()
        if hp.n_vocab == 0:
            hp.n_vocab = self.w["token_embd.weight"].shape[0]
        self.out_w = self.w.get("output.weight", self.w["token_embd.weight"])
        # RoPE inverse frequencies, one per rotated pair, per layer's base.
        i = np.arange(hp.rope_dim // 2, dtype=np.float64)
        self.inv_freqs = {}
        for base in set(hp.rope_bases):
            inv_freq = base ** (-2.0 * i / hp.rope_dim)
            # Llama 3.1-style files carry per-pair frequency divisors (Phi-3's
            # LongRoPE two sets, one chosen by the context).
            if hp.rope_factors in self.w:
                inv_freq = inv_freq / self.w[hp.rope_factors].astype(np.float64)
            self.inv_freqs[base] = inv_freq

    def _split_fused(self):
        """Cuts fused matrices (Phi-3) into the separate ones the forward reads."""
        hp = self.hp
        for l in range(hp.n_layer):
            p = f"blk.{l}."
            qkv = self.w.pop(p + "attn_qkv.weight", None)
            if qkv is not None:
                nq, nkv = hp.n_head * hp.head_dim, hp.n_head_kv * hp.head_dim
                assert qkv.shape[0] == nq + 2 * nkv, qkv.shape
                self.w[p + "attn_q.weight"] = qkv[:nq]
                self.w[p + "attn_k.weight"] = qkv[nq:nq + nkv]
                self.w[p + "attn_v.weight"] = qkv[nq + nkv:]
            if p + "ffn_gate.weight" not in self.w and self.w[p + "ffn_up.weight"].shape[0] == 2 * hp.n_ff:
                gate_up = self.w.pop(p + "ffn_up.weight")
                self.w[p + "ffn_gate.weight"] = gate_up[:hp.n_ff]
                self.w[p + "ffn_up.weight"] = gate_up[hp.n_ff:]

    # --- building blocks -------------------------------------------------
    def _rmsnorm(self, x, weight):
        x64 = x.astype(np.float64)
        scale = 1.0 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + self.hp.rms_eps)
        return (x64 * scale).astype(x.dtype) * weight.astype(x.dtype)

    def _linear(self, x, name):
        y = x @ self.w[name + ".weight"].T
        b = self.w.get(name + ".bias")
        return y + b if b is not None else y

    def _rope(self, x, positions, base):
        """x: [T, heads, head_dim]; rotates the first rope_dim dims of each head."""
        hp = self.hp
        pos = positions.astype(np.float64) / hp.rope_scale
        theta = pos[:, None] * self.inv_freqs[base][None, :]  # [T, rope_dim/2]
        cos = np.cos(theta)[:, None, :] * hp.rope_magnitude
        sin = np.sin(theta)[:, None, :] * hp.rope_magnitude
        out = x.astype(np.float64)  # copy
        r = out[..., : hp.rope_dim]
        if hp.rope_neox:
            half = hp.rope_dim // 2
            x0, x1 = r[..., :half].copy(), r[..., half:].copy()
            r[..., :half] = x0 * cos - x1 * sin
            r[..., half:] = x0 * sin + x1 * cos
        else:
            x0, x1 = r[..., 0::2].copy(), r[..., 1::2].copy()
            r[..., 0::2] = x0 * cos - x1 * sin
            r[..., 1::2] = x0 * sin + x1 * cos
        return out.astype(x.dtype)

    def _attention(self, q, k_all, v_all, start, window=0):
        """q: [T, n_head, hd] for positions start..start+T-1; k_all/v_all: [start+T, n_kv, hd]."""
        hp = self.hp
        T = q.shape[0]
        S = k_all.shape[0]
        group = hp.n_head // hp.n_head_kv
        scale = 1.0 / np.sqrt(hp.head_dim)
        # Causal: query at position start+t sees keys 0..start+t (within the window: q - k < window).
        qpos = (start + np.arange(T))[:, None]
        mask = np.arange(S)[None, :] > qpos  # [T, S]
        if window:
            mask |= qpos - np.arange(S)[None, :] >= window
        out = np.empty((T, hp.n_head, hp.head_dim), q.dtype)
        for h in range(hp.n_head):
            kv = h // group
            s = (q[:, h, :] @ k_all[:, kv, :].T).astype(np.float64) * scale  # [T, S]
            s[mask] = -np.inf
            s -= s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            out[:, h, :] = p.astype(q.dtype) @ v_all[:, kv, :]
        return out

    def kv_round(self, k, v):
        """The values the KV cache gives back for K (after RoPE) and V, each
        [T, n_kv, hd]: float16, as kvfleet stores them by default (a
        subclass emulates other formats: bench/kv_quant_emulation.py)."""
        return k.astype(np.float16).astype(np.float32), v.astype(np.float16).astype(np.float32)

    # --- forward ---------------------------------------------------------
    def new_cache(self) -> KVCache:
        return KVCache(self.hp, np.float32)

    def forward(self, token_ids, cache: KVCache, all_logits: bool = False, dtype=None):
        """Runs the new tokens after what `cache` holds; returns the logits of
        the last position ([n_vocab]) or of every new position ([T, n_vocab]),
        computed in `dtype` (default: the constructor's)."""
        hp = self.hp
        cdt = np.dtype(dtype or self.dtype)
        ids = np.asarray(token_ids, dtype=np.int64)
        if ids.size == 0:
            raise ValueError("empty token list")
        if ids.min() < 0 or ids.max() >= self.w["token_embd.weight"].shape[0]:
            raise ValueError(f"token id out of range in {ids.tolist()}")
        start = len(cache)
        T = ids.size
        positions = np.arange(start, start + T)
        x = self.w["token_embd.weight"][ids].astype(cdt)
        if hp.embed_scale != 1.0:
            x = x * cdt.type(hp.embed_scale)
        for l in range(hp.n_layer):
            p = f"blk.{l}."
            h = self._rmsnorm(x, self.w[p + "attn_norm.weight"]) if p + "attn_norm.weight" in self.w else x
            q = self._linear(h, p + "attn_q")
            k = self._linear(h, p + "attn_k")
            v = self._linear(h, p + "attn_v").reshape(T, hp.n_head_kv, hp.head_dim)
            whole = self.w.get(p + "attn_q_norm.weight", np.zeros(0)).size == q.shape[1]
            if whole:  # olmo2: the whole projection normalised, all heads together
                q = self._rmsnorm(q, self.w[p + "attn_q_norm.weight"])
                k = self._rmsnorm(k, self.w[p + "attn_k_norm.weight"])
            q = q.reshape(T, hp.n_head, hp.head_dim)
            k = k.reshape(T, hp.n_head_kv, hp.head_dim)
            if p + "attn_q_norm.weight" in self.w and not whole:  # qwen3, gemma3: each head normalised
                q = self._rmsnorm(q, self.w[p + "attn_q_norm.weight"])
                k = self._rmsnorm(k, self.w[p + "attn_k_norm.weight"])
            q = self._rope(q, positions, hp.rope_bases[l])
            k = self._rope(k, positions, hp.rope_bases[l])
            k, v = self.kv_round(k, v)
            cache.k[l] = np.concatenate([cache.k[l], k])
            cache.v[l] = np.concatenate([cache.v[l], v])
            a = self._attention(q, cache.k[l], cache.v[l], start, hp.windows[l])
            o = self._linear(a.reshape(T, hp.n_head * hp.head_dim), p + "attn_output")
            if p + "post_attention_norm.weight" in self.w:  # gemma3, olmo2
                o = self._rmsnorm(o, self.w[p + "post_attention_norm.weight"])
            x = x + o
            h = self._rmsnorm(x, self.w[p + "ffn_norm.weight"]) if p + "ffn_norm.weight" in self.w else x
            g = self._linear(h, p + "ffn_gate")
            u = self._linear(h, p + "ffn_up")
            if hp.gelu:
                g64 = g.astype(np.float64)
                act = (0.5 * g64 * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (g64 + 0.044715 * g64 ** 3)))).astype(cdt)
            else:
                act = g / (1.0 + np.exp(-g.astype(np.float64))).astype(cdt)
            f = self._linear(act * u, p + "ffn_down")
            if p + "post_ffw_norm.weight" in self.w:  # gemma3, olmo2
                f = self._rmsnorm(f, self.w[p + "post_ffw_norm.weight"])
            x = x + f
        if not all_logits:
            x = x[-1:]
        x = self._rmsnorm(x, self.w["output_norm.weight"])
        logits = x @ self.out_w.T
        return logits if all_logits else logits[0]

    def logits(self, prompt, dtype=None) -> np.ndarray:
        """Next-token logits after `prompt` (list of token ids), as float64."""
        return self.forward(prompt, self.new_cache(), dtype=dtype).astype(np.float64)

    def greedy(self, prompt, n: int, eos: int | None = None, prompt_dtype=None,
               decode_dtype=None):
        """Greedy continuation: returns (tokens, logits per step [n, vocab] float64).
        Step 0's logits are those after the prompt (computed in `prompt_dtype`);
        later steps run in `decode_dtype`. Stops early at `eos` if given."""
        cache = self.new_cache()
        logits = self.forward(prompt, cache, dtype=prompt_dtype)
        out, steps = [], []
        for _ in range(n):
            steps.append(logits.astype(np.float64))
            tok = int(np.argmax(logits))
            out.append(tok)
            if eos is not None and tok == eos:
                break
            if len(out) < n:
                logits = self.forward([tok], cache, dtype=decode_dtype)
        return out, np.array(steps)


# --- tokenizer (Hugging Face `tokenizers`, built from the GGUF vocabulary) --

_GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def build_tokenizer(reader: GGUFReader):
    """A byte-level BPE tokenizer from tokenizer.ggml.{tokens,merges,token_type}.
    Control and user-defined tokens become special tokens, matched whole."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    model = field(reader, "tokenizer.ggml.model")
    if model != "gpt2":
        raise ValueError(f"only byte-level BPE ('gpt2') vocabularies are supported, got {model!r}")
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)
    merges = [tuple(m.split(" ", 1)) for m in field(reader, "tokenizer.ggml.merges") or []]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False,
                               ignore_merges=False))
    pre = field(reader, "tokenizer.ggml.pre", "default")
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if pre in ("smollm", "starcoder", "refact", "codeshell"):
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    elif pre in ("llama-bpe", "llama3", "smaug-bpe"):
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(_LLAMA3_REGEX), behavior="isolated"), byte_level])
    elif pre in ("qwen2",):
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(_QWEN2_REGEX), behavior="isolated"), byte_level])
    else:  # gpt2 / default
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(_GPT2_REGEX), behavior="isolated"), byte_level])
    tok.decoder = decoders.ByteLevel()
    special = [AddedToken(t, special=True, normalized=False)
               for t, ty in zip(tokens, types)
               if ty in (_TOKEN_TYPE_CONTROL, _TOKEN_TYPE_USER_DEFINED)]
    if special:
        tok.add_special_tokens(special)
    return tok


def chat_prompt(reader: GGUFReader, user_text: str) -> str:
    """Renders the GGUF's chat template for one user message (generation prompt on)."""
    import jinja2.sandbox

    template = field(reader, "tokenizer.chat_template")
    if not template:  # ChatML, the SmolLM2 / Qwen2 format
        return f"<|im_start|>user\n{user_text}<|im_end|>\n<|im_start|>assistant\n"
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(
        messages=[{"role": "user", "content": user_text}], add_generation_prompt=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--prompt", default="What is the capital of France?")
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--float64", action="store_true", help="compute in float64")
    ap.add_argument("--self-test", action="store_true",
                    help="fail unless the continuation mentions Paris")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    ref = LlamaReference(args.model, np.float64 if args.float64 else np.float32)
    tok = build_tokenizer(ref.reader)
    text = chat_prompt(ref.reader, args.prompt)
    ids = tok.encode(text, add_special_tokens=False).ids
    t1 = time.perf_counter()
    eos = field(ref.reader, "tokenizer.ggml.eos_token_id")
    out, _ = ref.greedy(ids, args.max_tokens, eos=None if eos is None else int(eos))
    t2 = time.perf_counter()
    answer = tok.decode(out, skip_special_tokens=True)
    print(f"model: {os.path.basename(args.model)} ({ref.hp.arch}, {ref.hp.n_layer} layers, "
          f"vocab {ref.hp.n_vocab}); load {t1 - t0:.1f}s, {len(ids)}+{len(out)} tokens "
          f"in {t2 - t1:.1f}s")
    print(f"prompt ids: {ids}")
    print(f"output ids: {out}")
    print(f"answer: {answer!r}")
    if args.self_test and "Paris" not in answer:
        print("FAIL: expected the answer to mention Paris", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
