#!/usr/bin/env bash
# The chart's Prometheus rules: `promtool check rules` on every rules file
# (deploy/helm/kvfleet/rules/*.yaml) and `promtool test rules` on every unit
# test (tests/deploy/helm/rules/*_test.yaml, whose rule_files are relative to
# the test file, so this runs from any directory).
#
#   tests/deploy/helm/rules_test.sh [PROMTOOL]     # default: $PROMTOOL, else promtool on PATH
#
# Exit 0 when all pass, 1 on a failure, 77 (skip) without promtool.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
promtool="${1:-${PROMTOOL:-$(command -v promtool || true)}}"
if [[ -z "$promtool" || ! -x "$promtool" ]]; then
  echo "SKIP: promtool not found (install Debian's prometheus package, or pass its path)"
  exit 77
fi

shopt -s nullglob
rules=("$repo"/deploy/helm/kvfleet/rules/*.yaml)
tests=("$repo"/tests/deploy/helm/rules/*_test.yaml)
if (( ${#rules[@]} == 0 || ${#tests[@]} == 0 )); then
  echo "FAIL: expected rules in deploy/helm/kvfleet/rules/ and tests in tests/deploy/helm/rules/" \
       "(found ${#rules[@]} and ${#tests[@]})"
  exit 1
fi

failed=0
run() {  # run LABEL CMD...: print the label with PASS or FAIL and, on failure, promtool's output
  local label="$1" out
  shift
  if out="$("$@" 2>&1)"; then
    echo "PASS: $label"
  else
    echo "FAIL: $label"
    sed 's/^/    /' <<<"$out"
    failed=1
  fi
}

echo "promtool: $("$promtool" --version 2>&1 | head -n 1)"
for f in "${rules[@]}"; do
  n="$(grep -c '^ *- alert:' "$f")"
  run "promtool check rules ${f#"$repo"/} ($n alerts)" "$promtool" check rules "$f"
done
for f in "${tests[@]}"; do
  n="$(grep -c 'alertname:' "$f")"
  run "promtool test rules ${f#"$repo"/} ($n alert evaluations)" "$promtool" test rules "$f"
done

# Every alert in the rules has a unit test that names it.
for f in "${rules[@]}"; do
  while read -r alert; do
    if ! cat "${tests[@]}" | grep -q "alertname: $alert\$"; then
      echo "FAIL: alert $alert (${f#"$repo"/}) has no unit test"
      failed=1
    fi
  done < <(sed -n 's/^ *- alert: *\([A-Za-z0-9_]*\).*/\1/p' "$f")
done

if (( failed )); then
  echo "rules_test: FAILED"
  exit 1
fi
echo "rules_test: ${#rules[@]} rules file(s) and ${#tests[@]} test file(s) passed"
