#!/usr/bin/env bash
# Runs the GPU checks on a machine with an NVIDIA GPU, from the directory
# scripts/gpu_pack.sh filled (it copies this script there); builds nothing.
# Writes into OUT_DIR at most ten files: summary.json (every phase: exit
# status, seconds, tests passed/failed/skipped), device.txt, one log per
# phase, and bench.json. Every phase has a time limit, so the whole run stays
# under four minutes (six with the split):
#   t=0     the SmolLM2-shaped and Llama-3.2-1B-shaped random-weight models
#           (kvfleet tiny-model) and the three GPU test binaries, side by side:
#           cuda_ops_test (the op harness: every CUDA op against float64 and the
#           CPU, bit-exact batch invariance), engine_cuda_test (the engine's
#           exactness suites on the CUDA executor, SmolLM2-shaped) and
#           router_cluster_gpu_test (cachemanager, router and a --device cuda
#           worker end to end);
#   then    gpu_bench alone (bandwidth, decode against the roofline, attention
#           bytes/s, prefill);
#   then    on a machine with two GPUs or more, engine_cuda_tp_test (the same
#           suites with the model split across 2 GPUs over NCCL); with fewer,
#           summary.json's tensor_parallel says so. Its log begins with
#           `kvfleet devices` (the GPUs, and the NCCL the ranks load:
#           summary.json's nccl).
# Without a GPU every test reports skipped and the models and the benchmark
# are not run: the run only checks that the pack starts.
#
#   PACK/gpu_check.sh OUT_DIR
set -uo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: gpu_check.sh OUT_DIR" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$(mkdir -p "$1" && cd "$1" && pwd)"
work="$(mktemp -d /tmp/kvfleet-gpu-check.XXXXXX)"
if [[ -d $here/bin ]]; then
  pack="$here"
elif [[ -f $here/kvfleet-gpu.tar.xz ]]; then
  pack="$work/pack"
  mkdir -p "$pack" && tar -xJf "$here/kvfleet-gpu.tar.xz" -C "$pack"
else
  echo "gpu_check: no bin/ or kvfleet-gpu.tar.xz next to this script: run scripts/gpu_pack.sh DIR first" >&2
  exit 2
fi
export LD_LIBRARY_PATH="$pack/lib"
export KVFLEET_BIN_DIR="$pack/bin"
bin="$pack/bin"
started=$(date +%s)
phases=()  # JSON objects

elapsed() { echo $(( $(date +%s) - started )); }

# phase NAME LIMIT_S COMMAND...: runs it, logging to OUT_DIR/NAME.log, and
# records its outcome (a gtest binary's counts too).
record() {
  local name=$1 rc=$2 seconds=$3 log="$out/$1.log"
  local passed failed skipped
  # Per-test result lines end with the test's time; the end-of-run lists do not.
  passed=$(grep -cE '^\[       OK \] .*\([0-9]+ ms\)$' "$log" 2>/dev/null)
  failed=$(grep -cE '^\[  FAILED  \] .*\([0-9]+ ms\)$' "$log" 2>/dev/null)
  skipped=$(grep -cE '^\[  SKIPPED \] .*\([0-9]+ ms\)$' "$log" 2>/dev/null)
  # A binary whose global environment found no GPU skips every test silently.
  if grep -q 'no GPU to run the CUDA backend on' "$log" 2>/dev/null && [[ -x $bin/$name ]]; then
    skipped=$(( skipped + $("$bin/$name" --gtest_list_tests | grep -c '^  ') - passed - failed - skipped ))
  fi
  phases+=("{\"phase\": \"$name\", \"exit\": $rc, \"seconds\": $seconds, \"passed\": ${passed:-0}, \"failed\": ${failed:-0}, \"skipped\": ${skipped:-0}}")
  echo "gpu_check: $name: exit $rc in ${seconds}s (${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped)"
}
run_phase() {
  local name=$1 limit=$2
  shift 2
  local t0=$(date +%s)
  timeout --kill-after=5 "$limit" "$@" > "$out/$name.log" 2>&1
  record "$name" $? $(( $(date +%s) - t0 ))
}
start_phase() {  # in the background; wait_phase collects it
  local name=$1 limit=$2
  shift 2
  ( t0=$(date +%s); timeout --kill-after=5 "$limit" "$@" > "$out/$name.log" 2>&1; echo "$? $(( $(date +%s) - t0 ))" > "$work/$name.rc" ) &
}
wait_phase() {
  wait
  for name in "$@"; do
    read -r rc seconds < "$work/$name.rc"
    record "$name" "$rc" "$seconds"
  done
}

gpu=0
{
  echo "pack: $(head -2 "$here/MANIFEST" 2>/dev/null | tr '\n' ' ')"
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1
    nvidia-smi -L 2>&1
  else
    echo "no nvidia-smi: no GPU driver on this machine"
  fi
} > "$out/device.txt"
if command -v nvidia-smi > /dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then gpu=1; fi

smollm2="$work/smollm2-shape.gguf"
llama1b="$work/llama-3.2-1b-shape.gguf"
if ((gpu)); then
  start_phase models 90 bash -c "
    '$bin/kvfleet' tiny-model --out '$smollm2' --dtype Q4_1 --seed 1 --layers 30 --hidden 576 --heads 9 --kv-heads 3 \
      --ffn 1536 --context 8192 --vocab 49152 --tied &&
    '$bin/kvfleet' tiny-model --out '$llama1b' --dtype BF16 --seed 1 --layers 16 --hidden 2048 --heads 32 --kv-heads 8 \
      --ffn 8192 --context 8192 --vocab 128256 --tied"
fi
start_phase cuda_ops_test 150 "$bin/cuda_ops_test"
start_phase engine_cuda_test 150 "$bin/engine_cuda_test"
start_phase router_cluster_gpu_test 150 "$bin/router_cluster_gpu_test"
if ((gpu)); then wait_phase models cuda_ops_test engine_cuda_test router_cluster_gpu_test
else wait_phase cuda_ops_test engine_cuda_test router_cluster_gpu_test; fi

if ((gpu)) && [[ -f $llama1b ]]; then
  run_phase bench 75 "$bin/gpu_bench" --model "smollm2=$smollm2" --model "llama1b=$llama1b" --json "$out/bench.json"
else
  echo "no GPU: the benchmark needs one" > "$out/bench.log"
  record bench 0 0
fi

# Tensor parallelism across GPUs: the executor and engine suites split
# across 2 GPUs over NCCL, where there are two; otherwise say so plainly.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
# The ranks load NCCL at run time; the GPU machine's PyTorch carries one
# (the nvidia-nccl wheel), unless KVFLEET_NCCL_LIBRARY names another.
if [[ -z ${KVFLEET_NCCL_LIBRARY:-} ]]; then
  nccl=$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' \
    2>/dev/null || true)
  if [[ -n $nccl && -f $nccl ]]; then export KVFLEET_NCCL_LIBRARY=$nccl; fi
fi
# What the pack sees here: the GPUs, and the NCCL a split would load.
"$bin/kvfleet" devices > "$out/tensor_parallel.log" 2>&1
nccl=$(sed -n 's/^nccl *//p' "$out/tensor_parallel.log" | tr -d '"\\')
if ((gpus >= 2)); then
  run_phase engine_cuda_tp_test 150 "$bin/engine_cuda_tp_test"
  tensor_parallel="ran engine_cuda_tp_test on 2 of ${gpus} GPUs (its phase above)"
else
  tensor_parallel="not run: ${gpus:-0} GPU here, and a split across GPUs needs two or more"
fi
echo "$tensor_parallel" >> "$out/tensor_parallel.log"

{
  echo "{"
  echo "  \"gpu\": $gpu,"
  echo "  \"seconds\": $(elapsed),"
  echo "  \"device\": \"$(head -2 "$out/device.txt" | tail -1 | tr -d '"')\","
  echo "  \"phases\": ["
  for i in "${!phases[@]}"; do
    sep=","
    (( i == ${#phases[@]} - 1 )) && sep=""
    echo "    ${phases[$i]}$sep"
  done
  echo "  ],"
  echo "  \"tensor_parallel\": \"$tensor_parallel\","
  echo "  \"nccl\": \"$nccl\","
  echo "  \"bench\": $(cat "$out/bench.json" 2>/dev/null || echo null)"
  echo "}"
} > "$out/summary.json"
rm -rf "$work"
echo "gpu_check: done in $(elapsed)s; $out/summary.json"
cat "$out/summary.json"
