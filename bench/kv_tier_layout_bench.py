#!/usr/bin/env python3
"""The disk KV tier's layout and granularity, measured in one run.

kvfleet's disk tier keeps one file per KV block holding every layer's K
and V (engine/kv/tiers/README.md). This benchmark writes the same bytes in
three layouts, the way the tier writes them (a temporary file, then a
rename), drops their pages from the page cache (fsync, then
POSIX_FADV_DONTNEED), and reads them back:

  block      one file per block, all layers (kvfleet's layout; the baseline)
  per-layer  one file per (block, layer, K or V): the layout of a tier that
             stores the pieces the per-layer KV arrays hold
  4-blocks   one file per four consecutive blocks (64 tokens): a coarser unit

Sizes follow a real model's KV (default: SmolLM2-135M, 30 layers, 3 KV
heads of 64, float16, 16-token blocks: 360 KiB a block). It prints the
write and read rates of each layout and their ratios to the baseline.

  bench/kv_tier_layout_bench.py [--dir DIR] [--blocks 256] [--layers 30 --kv-heads 3 --head-dim 64]
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time


def write_file(path, payload):
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, payload)
    finally:
        os.close(fd)
    os.rename(tmp, path)


def drop_pages(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read_file(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        return len(os.read(fd, 1 << 30))
    finally:
        os.close(fd)


def run_layout(directory, name, files, file_bytes):
    """(write s, read s) for `files` files of `file_bytes` bytes each."""
    d = os.path.join(directory, name)
    os.makedirs(d)
    payload = os.urandom(file_bytes)
    paths = [os.path.join(d, f"{i:08x}.kvb") for i in range(files)]
    start = time.perf_counter()
    for p in paths:
        write_file(p, payload)
    written = time.perf_counter() - start
    drop_pages(paths)
    start = time.perf_counter()
    total = sum(read_file(p) for p in paths)
    read = time.perf_counter() - start
    assert total == files * file_bytes
    shutil.rmtree(d)
    return written, read


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", help="where to write (default: a temporary directory under the current one)")
    ap.add_argument("--blocks", type=int, default=256)
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--kv-heads", type=int, default=3)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    piece = args.kv_heads * args.block_size * args.head_dim * 2  # one layer's K (or V) of one block, float16
    block = 2 * args.layers * piece
    layouts = [
        ("block", args.blocks, block),
        ("per-layer", args.blocks * 2 * args.layers, piece),
        ("4-blocks", args.blocks // 4, 4 * block),
    ]
    print(f"kv_tier_layout_bench: {args.blocks} blocks of {block // 1024} KiB ({args.layers} layers x K,V x "
          f"{piece // 1024} KiB), {args.repeats} repeats, median")
    base = tempfile.mkdtemp(prefix="kv-layout-", dir=args.dir or ".")
    try:
        results = {}
        for name, files, size in layouts:
            runs = []
            for r in range(args.repeats):
                runs.append(run_layout(base, f"{name}-{r}", files, size))
            results[name] = (statistics.median(w for w, _ in runs), statistics.median(r for _, r in runs))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    total_mb = args.blocks * block / 1e6
    base_w, base_r = results["block"]
    print(f"{'layout':<10} {'files':>8} {'write MB/s':>11} {'read MB/s':>10} {'write vs block':>15} "
          f"{'read vs block':>14}")
    for name, files, _ in layouts:
        w, r = results[name]
        print(f"{name:<10} {files:>8} {total_mb / w:>11.0f} {total_mb / r:>10.0f} {base_w / w:>14.2f}x "
              f"{base_r / r:>13.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
