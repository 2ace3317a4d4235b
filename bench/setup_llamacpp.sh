#!/usr/bin/env bash
# Installs llama-cpp-python (pinned) into <repo>/.venv for bench/cpu_vs_llamacpp.py.
# pip builds llama.cpp from source: CPU only, tuned for this machine. Takes
# several minutes on 2 cores; a second run returns at once. Not part of CI.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
pin="llama-cpp-python==0.3.36"

[[ -x "$venv/bin/python" ]] || bash "$repo/scripts/setup.sh"

if "$venv/bin/python" -c '
import sys
from importlib.metadata import version
sys.exit(0 if version("llama-cpp-python") == sys.argv[1] else 1)' "${pin#*==}" 2>/dev/null; then
  echo "setup_llamacpp: $pin present in $venv"
  exit 0
fi

echo "setup_llamacpp: building $pin from source (CPU only; several minutes)"
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=ON -DLLAMA_CURL=OFF}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
"$venv/bin/python" -m pip install --disable-pip-version-check -q \
  --no-binary llama-cpp-python --no-cache-dir "$pin"
"$venv/bin/python" -c 'import llama_cpp; print("setup_llamacpp: llama_cpp", llama_cpp.__version__, "ready")'
