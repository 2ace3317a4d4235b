#!/usr/bin/env bash
# The test command: installs what is missing, fetches the default model,
# builds with warnings as errors and runs every ctest test. Exits with
# ctest's status; ctest's summary is the last thing printed.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

bash scripts/setup.sh
bash scripts/fetch_model.sh

if [[ ! -f build/CMakeCache.txt ]]; then
  cmake -S . -B build -G Ninja -DKVFLEET_WERROR=ON
fi
cmake --build build -j2

set +e
ctest --test-dir build --output-on-failure -j2
status=$?
exit $status
