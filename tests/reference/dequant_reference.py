#!/usr/bin/env python3
"""kvfleet's dequantization vs the gguf package's numpy dequantization, bit for bit.

For every tensor of a real GGUF file (every block of every type it holds:
F32, Q8_0, Q5_0, Q4_K, Q6_K in a Q4_K_M file), the SHA-256 of the float32
values kvfleet's DequantizeRow produces (tests/reference/tensor_dump.cc)
must equal the SHA-256 of gguf.quants.dequantize's float32 values. The
gguf package shares no code with kvfleet. On a mismatch the tensor is
dumped and the first differing element is reported.

  dequant_reference.py --dump tensor_dump --model qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf
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
from gguf import GGUFReader
from gguf.quants import dequantize


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dump", required=True)
    ap.add_argument("--model", required=True)
    args = ap.parse_args()
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
