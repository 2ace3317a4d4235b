#!/usr/bin/env python3
"""kvfleet's dequantization vs the gguf package's numpy dequantization, bit for bit.

For every tensor of a GGUF file (every block of every type it holds:
F32, Q8_0, Q5_0, Q4_K, Q6_K in a real Q4_K_M file), the SHA-256 of the float32
values kvfleet's DequantizeRow produces (tests/reference/tensor_dump.cc)
must equal the SHA-256 of gguf.quants.dequantize's float32 values. The
gguf package shares no code with kvfleet. On a mismatch the tensor is
dumped and the first differing element is reported.

  dequant_reference.py --dump tensor_dump --model qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf

With --random-blocks the file is written first: one tensor per quantized
type kvfleet reads, of random bytes whose f16 scales are finite (every bit
pattern of values, sub-block scales and mins), so types no fetched model
holds (Q5_1, Q2_K, Q3_K, Q5_K) are checked too.

  dequant_reference.py --dump tensor_dump --random-blocks --seed 5
"""

import argparse
import collections
import hashlib
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

# Byte offsets of each block's f16 scales (d, dmin, m), which must be finite.
SCALE_OFFSETS = {
    "Q8_0": (0,), "Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2),
    "Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,),
}


def write_random_blocks(path, seed, rows=16, blocks_per_row=8):
    """A GGUF holding, per type, `rows` rows of random blocks with finite scales."""
    rng = np.random.default_rng(seed)
    w = GGUFWriter(path, "random-blocks")
    for name, offsets in SCALE_OFFSETS.items():
        qtype = GGMLQuantizationType[name]
        _, block_bytes = GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, size=(rows * blocks_per_row, block_bytes), dtype=np.uint8)
        for off in offsets:
            # sign, a 10-bit mantissa and an exponent field of 1..18: [2^-14, 2^4)
            h = (rng.integers(0, 1 << 16, size=raw.shape[0], dtype=np.uint16) & 0x83FF) | (
                rng.integers(1, 19, size=raw.shape[0], dtype=np.uint16) << 10)
            raw[:, off:off + 2] = h.astype("<u2").view(np.uint8).reshape(-1, 2)
        w.add_tensor(f"random.{name}", raw.reshape(rows, blocks_per_row * block_bytes), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dump", required=True)
    ap.add_argument("--model")
    ap.add_argument("--random-blocks", action="store_true")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--kvfleet", help="with --random-blocks: fail on a quantized type kvfleet reads that "
                                      "SCALE_OFFSETS lacks (its list: `kvfleet tiny-model --list-types`)")
    args = ap.parse_args()
    if args.random_blocks and args.kvfleet:
        listed = subprocess.run([args.kvfleet, "tiny-model", "--list-types"], capture_output=True, text=True,
                                check=True).stdout.split()
        quantized = {t for t in listed if GGML_QUANT_SIZES[GGMLQuantizationType[t]][0] > 1}
        missing = sorted(quantized - set(SCALE_OFFSETS))
        if missing:
            print(f"FAIL: kvfleet reads {', '.join(missing)}, which SCALE_OFFSETS here does not cover")
            return 1
    if args.random_blocks:
        with tempfile.TemporaryDirectory() as tmp:
            args.model = os.path.join(tmp, "random_blocks.gguf")
            write_random_blocks(args.model, args.seed)
            return compare(args)
    if not args.model:
        ap.error("--model or --random-blocks")
    return compare(args)


def compare(args):
    if not os.path.exists(args.model):
        print(f"SKIP: model {args.model} not found (scripts/fetch_model.sh fetches it)")
        return 77
    t0 = time.time()
    proc = subprocess.run([args.dump, "--model", args.model], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"tensor_dump failed ({proc.returncode}): {proc.stderr}")
    ours = {}
    for line in proc.stdout.splitlines():
        name, dtype, n, digest = line.split("\t")
        ours[name] = (dtype, int(n), digest)
    t1 = time.time()
    reader = GGUFReader(args.model)
    failures, checked = [], collections.Counter()
    elements = 0
    for t in reader.tensors:
        values = np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype="<f4")
        digest = hashlib.sha256(values.tobytes()).hexdigest()
        kind = t.tensor_type.name
        if t.name not in ours:
            failures.append(f"{t.name}: kvfleet did not report it")
            continue
        dtype, n, got = ours[t.name]
        checked[kind] += 1
        elements += values.size
        if n != values.size or got != digest:
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "t.f32")
                subprocess.run([args.dump, "--model", args.model, "--tensor", t.name, "--out", out], check=True)
                theirs = np.fromfile(out, dtype="<f4")
            flat = values.reshape(-1)
            if theirs.size != flat.size:
                failures.append(f"{t.name} ({kind}): kvfleet gave {theirs.size} values, numpy {flat.size}")
            else:
                bad = np.flatnonzero(theirs.view("<u4") != flat.view("<u4"))
                i = int(bad[0])
                failures.append(f"{t.name} ({kind}): {bad.size} of {flat.size} values differ; first at {i}: "
                                f"kvfleet {theirs[i]!r}, numpy {flat[i]!r}")
    print(f"dequantization of {os.path.basename(args.model)}: {sum(checked.values())} tensors "
          f"({', '.join(f'{k} x{v}' for k, v in sorted(checked.items()))}), {elements} values; "
          f"kvfleet {t1 - t0:.1f} s, numpy {time.time() - t1:.1f} s")
    for f in failures:
        print(f"FAIL: {f}")
    print("bit for bit: " + ("every value identical" if not failures else f"{len(failures)} tensors differ"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
