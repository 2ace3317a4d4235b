#!/usr/bin/env python3
"""`kvfleet devices`: what a worker here could run on, and the NCCL a split
replica would load.

1. It lists the CPU (hardware threads, the int8 dot instructions) and says
   why there is no GPU where there is none; it exits 0 either way.
2. NCCL named by KVFLEET_NCCL_LIBRARY that is missing, or a file that is not
   a shared library, is reported naming the file and how to get NCCL, and
   --require-nccl then exits 1. A build without the CUDA backend says it
   never loads NCCL instead.
3. With --nccl (the CUDA toolkit's libnccl.so.2, where CMake found one), the
   real library loads and its version is the one its nccl.h declares
   (--nccl-header), so the version shown is decoded right.

  devices_test.py --cli kvfleet [--nccl libnccl.so.2 --nccl-header nccl.h]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def devices(cli, *args, nccl=None):
    env = dict(os.environ)
    env.pop("KVFLEET_NCCL_LIBRARY", None)
    if nccl is not None:
        env["KVFLEET_NCCL_LIBRARY"] = nccl
    return subprocess.run([cli, "devices", *args], capture_output=True, text=True, env=env, timeout=60)


def nccl_line(out):
    m = re.search(r"^nccl +(.*)$", out.stdout, re.M)
    check(m is not None, f"no nccl line in:\n{out.stdout}")
    return m.group(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--nccl", default="")
    ap.add_argument("--nccl-header", default="")
    a = ap.parse_args()

    out = devices(a.cli)
    check(out.returncode == 0, f"kvfleet devices: exit {out.returncode}: {out.stderr}")
    check(re.search(r"^cpu +\d+ hardware threads, int8 dot: (avx2|avx512-vnni)$", out.stdout, re.M),
          f"no cpu line in:\n{out.stdout}")
    check(re.search(r"^(cuda +none: .+|cuda:0 .+ GiB)$", out.stdout, re.M), f"no cuda line in:\n{out.stdout}")
    print(out.stdout.strip())

    with tempfile.TemporaryDirectory() as tmp:
        missing = os.path.join(tmp, "missing", "libnccl.so.2")
        garbage = os.path.join(tmp, "libnccl.so.2")
        with open(garbage, "w") as f:
            f.write("not a shared library\n")
        for path in (missing, garbage):
            shown = devices(a.cli, nccl=path)
            check(shown.returncode == 0, f"kvfleet devices without --require-nccl failed: {shown.stderr}")
            line = nccl_line(shown)
            if "no CUDA backend" in line:
                print(f"ok: a build without CUDA: {line}")
                continue
            check(path in line and "KVFLEET_NCCL_LIBRARY" in line, f"the error names neither {path} nor a fix: {line}")
            required = devices(a.cli, "--require-nccl", nccl=path)
            check(required.returncode == 1, f"--require-nccl with {path}: exit {required.returncode}, not 1")
            check(path in required.stderr, f"--require-nccl's error does not name {path}: {required.stderr}")
            print(f"ok: {path}: {line[:100]}")

    if a.nccl:
        with open(a.nccl_header) as f:
            header = f.read()
        version = ".".join(re.search(rf"#define NCCL_{k} (\d+)", header).group(1) for k in ("MAJOR", "MINOR", "PATCH"))
        shown = devices(a.cli, "--require-nccl", nccl=a.nccl)
        check(shown.returncode == 0, f"--require-nccl with {a.nccl}: exit {shown.returncode}: {shown.stderr}")
        check(nccl_line(shown) == f"NCCL {version} ({a.nccl})",
              f"{a.nccl} should show as NCCL {version}, not '{nccl_line(shown)}'")
        print(f"ok: {nccl_line(shown)}")
    else:
        print("no libnccl.so.2 beside the CUDA toolkit: the real load is checked by the CUDA image's test")
    print("devices_test: all checks passed")


if __name__ == "__main__":
    try:
        main()
    except Failure as e:
        print(f"devices_test: FAIL: {e}")
        sys.exit(1)
