#!/usr/bin/env bash
# The test command: installs what is missing, fetches the default model,
# builds with warnings as errors (through deploy/docker/build.sh) and runs
# every ctest test. Exits with ctest's status; ctest's summary is the last
# thing printed.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

bash scripts/setup.sh
bash scripts/fetch_model.sh

# The same build script the container images run (deploy/docker/), so CI
# exercises it; it configures only when the options change.
bash deploy/docker/build.sh --build-dir build --werror --jobs 2

set +e
ctest --test-dir build --output-on-failure -j2
status=$?
exit $status
