#!/usr/bin/env bash
# The test command: installs what is missing, fetches the default model,
# builds with warnings as errors (through deploy/docker/build.sh) and runs
# every ctest test but those labelled slow (run by hand: ctest -L slow).
# Exits with ctest's status; ctest's summary is the last thing printed.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

bash scripts/setup.sh
bash scripts/fetch_model.sh
# The real K-quant models the reference and exactness tests also run
# (about 750 MB, cached outside the clone).
bash scripts/fetch_model.sh gemma-3-270m
bash scripts/fetch_model.sh qwen2.5-coder-0.5b-instruct

# The same build script the container images run (deploy/docker/), so CI
# exercises it; it configures only when the options change. --native OFF is
# the images' configuration: the kernels that need more than AVX2 (the
# AVX-512 VNNI integer dot) are chosen at run time from CPUID, and that
# dispatch is what the tests then exercise.
bash deploy/docker/build.sh --build-dir build --werror --jobs 2 --native OFF

set +e
ctest --test-dir build --output-on-failure -j2 -LE slow 2>&1 | tee build/ctest-output.log
status=${PIPESTATUS[0]}
if [[ $status != 0 && -f build/Testing/Temporary/LastTestsFailed.log ]]; then
  # A CI log is often read from its end: repeat each failed test's last
  # lines there, then ctest's summary again.
  while IFS=: read -r _ name; do
    echo "=== the last 30 lines of $name ==="
    awk -v t="$name" '$0 ~ ("Testing: " t "$") {f=1} f && /^<end of output>/ {exit} f' \
      build/Testing/Temporary/LastTest.log | tail -30
  done <build/Testing/Temporary/LastTestsFailed.log
  sed -n '/tests passed, /,$p' build/ctest-output.log
fi
exit $status
