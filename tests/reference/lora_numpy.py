"""A PEFT LoRA adapter merged into the float64 numpy reference (llama_numpy.py).

The reference for numerics under an adapter: each adapted projection's
weight becomes W + scale * B @ A in float64, which is what kvfleet's
float32 W x + scale * B (A x) computes in another order. scale is
lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora.

A GGUF Llama's Wq and Wk rows were permuted by its converter for
adjacent-pair RoPE; PEFT trained B against the Hugging Face checkpoint's
order, so those B rows are permuted the same way before the merge (as
model/lora/peft_adapter_reader.cc does).

write_llama_cpp_lora writes the same adapter as llama.cpp reads one (a
GGUF of general.type "adapter"), so that llama.cpp's divergence under it
can be measured too (bench/eval_vs_llamacpp.py --lora).

  ref = llama_numpy.LlamaReference(model, np.float64)
  merge_peft_adapter(ref, "models/lora/smollm2-answer-format")
"""

import json
import os
import re
import struct

import numpy as np

# PEFT's module names to the GGUF tensors they adapt.
GGUF_NAME = {
    "q_proj": "attn_q",
    "k_proj": "attn_k",
    "v_proj": "attn_v",
    "o_proj": "attn_output",
    "gate_proj": "ffn_gate",
    "up_proj": "ffn_up",
    "down_proj": "ffn_down",
}

TENSOR = re.compile(r"^(?:base_model\.model\.)?model\.layers\.(\d+)\.(?:self_attn|mlp)\.([a-z_]+)\.lora_(A|B)"
                    r"(?:\.[A-Za-z0-9_]+)?\.weight$")


def read_safetensors(path):
    """{name: float64 array} of a safetensors file (F32, F16 or BF16)."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        raw = data[begin:end]
        if t["dtype"] == "F32":
            arr = np.frombuffer(raw, dtype="<f4")
        elif t["dtype"] == "F16":
            arr = np.frombuffer(raw, dtype="<f2")
        elif t["dtype"] == "BF16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: tensor {name} is {t['dtype']}; a LoRA reference reads F32, F16 or BF16")
        out[name] = arr.astype(np.float64).reshape(t["shape"])
    return out


def to_adjacent_pairs(rows, head_dim):
    """Rows of a q or k projection from the checkpoint's order (each head's
    first halves, then its second halves) to adjacent pairs: row 2j + k of a
    head is row k * head_dim / 2 + j of the checkpoint's."""
    heads = rows.shape[0] // head_dim
    return rows.reshape(heads, 2, head_dim // 2, -1).transpose(0, 2, 1, 3).reshape(rows.shape)


def read_peft_adapter(adapter_dir, hp):
    """(scale, {(layer, GGUF name): (A, B)}) of a PEFT adapter for a model of
    hyperparameters `hp` (llama_numpy.Hparams), B's q and k rows in the
    GGUF's order."""
    with open(os.path.join(adapter_dir, "adapter_config.json")) as f:
        config = json.load(f)
    rank = int(config["r"])
    alpha = float(config.get("lora_alpha", rank))
    scale = alpha / np.sqrt(rank) if config.get("use_rslora") else alpha / rank
    pairs = {}
    for name, arr in read_safetensors(os.path.join(adapter_dir, "adapter_model.safetensors")).items():
        m = TENSOR.match(name)
        if m is None or m.group(2) not in GGUF_NAME:
            raise ValueError(f"{adapter_dir}: tensor {name} is not a LoRA A or B of a layer's projection")
        pairs.setdefault((int(m.group(1)), m.group(2)), {})[m.group(3)] = arr
    out = {}
    for (layer, module), ab in sorted(pairs.items()):
        b = ab["B"]
        if not hp.rope_neox and module in ("q_proj", "k_proj"):
            b = to_adjacent_pairs(b, hp.head_dim)
        out[(layer, GGUF_NAME[module])] = (ab["A"], b)
    return scale, out


def write_llama_cpp_lora(adapter_dir, hp, path):
    """The adapter as llama.cpp's LoRA GGUF: lora_a [r, in] and lora_b
    [out, r] per weight (numpy's order), alpha chosen so that llama.cpp's
    alpha / r is this adapter's scale (rsLoRA included)."""
    import gguf

    scale, pairs = read_peft_adapter(adapter_dir, hp)
    rank = next(iter(pairs.values()))[0].shape[0]
    w = gguf.GGUFWriter(path, hp.arch)
    w.add_string("general.type", "adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", float(scale * rank))
    for (layer, name), (a, b) in pairs.items():
        w.add_tensor(f"blk.{layer}.{name}.weight.lora_a", np.ascontiguousarray(a, dtype=np.float32))
        w.add_tensor(f"blk.{layer}.{name}.weight.lora_b", np.ascontiguousarray(b, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def merge_peft_adapter(ref, adapter_dir):
    """Adds scale * B @ A to every weight the adapter adapts; returns the
    number of weights changed."""
    scale, pairs = read_peft_adapter(adapter_dir, ref.hp)
    for (layer, name), (a, b) in pairs.items():
        delta = scale * (b @ a)
        key = f"blk.{layer}.{name}.weight"
        if ref.w[key].shape != delta.shape:
            raise ValueError(f"{adapter_dir}: {key} changes by {delta.shape}, and the base's is {ref.w[key].shape}")
        ref.w[key] = ref.w[key] + delta.astype(ref.w[key].dtype)
    return len(pairs)
