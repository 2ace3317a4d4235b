#!/usr/bin/env bash
# The run command: set up, fetch the default model, build, then start a
# local cluster (a cachemanager, two workers and a router on loopback) and
# ask it one question through the router. The cluster keeps serving until
# Ctrl-C. Usage: scripts/run.sh ["your question"] [extra kvfleet up args]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

bash scripts/setup.sh >&2
bash scripts/fetch_model.sh >&2
# The one build script, with the test command's configuration (so either
# command after the other rebuilds nothing), the four binaries only.
bash deploy/docker/build.sh --build-dir build --werror --jobs 2 --native OFF --runtime-only >&2

question="${1:-What is the capital of France?}"
(($# > 0)) && shift
exec build/tools/kvfleet/kvfleet up --model models/SmolLM2-135M-Instruct.Q4_1.gguf --ask "$question" "$@"
