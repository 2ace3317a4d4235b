#!/usr/bin/env bash
# scripts/gpu_pack.sh and scripts/gpu_check.sh on this machine (no GPU): the
# pack is within its size limit, its binaries start with only the packed
# libraries (gpu_pack.sh checks that before it compresses), and the check
# script runs from the pack alone and reports every GPU test as skipped, not
# passed or failed.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
bash "$repo/scripts/gpu_pack.sh" --no-build "$tmp/pack"
# Run from a copy elsewhere, without the repository or the build tree.
cp -r "$tmp/pack" "$tmp/elsewhere"
env -i PATH=/usr/bin:/bin HOME="$tmp" bash "$tmp/elsewhere/gpu_check.sh" "$tmp/out" > "$tmp/check.log"
python3 - "$tmp/out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
phases = {p["phase"]: p for p in s["phases"]}
assert s["gpu"] == 0, s
assert s["tensor_parallel"].startswith("not run: 0 GPU here"), s["tensor_parallel"]
for name in ("cuda_ops_test", "engine_cuda_test", "router_cluster_gpu_test"):
    p = phases[name]
    assert p["exit"] == 0 and p["failed"] == 0 and p["passed"] == 0 and p["skipped"] > 0, p
print("gpu_check without a GPU:", ", ".join(f"{n} {p['skipped']} skipped" for n, p in phases.items() if p["skipped"]))
PY
