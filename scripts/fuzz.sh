#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer in build-fuzz/, and runs each for SECONDS
# (default 60) on a copy of its seed corpus, new finds kept in
# build-fuzz/corpus/<target>. A crash stops the script, naming the target
# and the input file: fix it, then add the input to
# tests/fuzz/corpus/<target>/ as a regression (docs/security.md, Fuzzing).
#
#   scripts/fuzz.sh              # every target, 60 s each
#   scripts/fuzz.sh 600 gguf     # one target, 10 minutes
#   scripts/fuzz.sh --unit-tests # also build and run the unit tests under ASan+UBSan
#   scripts/fuzz.sh --ci         # CI: a fixed seed and 30,000 inputs per target from the
#                                # seed corpus alone, so a run is repeatable (a time limit
#                                # and a growing corpus would make CI fail at random)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
seconds=60
unit_tests=0
skip_without_clang=0
ci=0
targets=()
for arg in "$@"; do
  case "$arg" in
    --unit-tests) unit_tests=1 ;;
    --skip-without-clang) skip_without_clang=1 ;;
    --ci) ci=1 ;;
    ''|*[!0-9]*) targets+=("$arg") ;;
    *) seconds="$arg" ;;
  esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=(gguf safetensors hf_config tokenizer detokenizer chat_template jinja_template stop_string worker_request router_request openai_request
                                        cachemanager_events kv_transfer peft_adapter)
if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found: apt-get install clang libclang-rt-14-dev (scripts/setup.sh does)" >&2
  exit $((skip_without_clang ? 77 : 1))
fi
build=build-fuzz
bash scripts/build_xgrammar.sh >&2  # the configure links it (returns at once when built)
if [[ ! -f $build/build.ninja ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DKVFLEET_FUZZ=ON -DKVFLEET_CUDA=OFF -DKVFLEET_NATIVE=OFF >/dev/null
fi
jobs="${KVFLEET_JOBS:-$(nproc)}"
# Under ctest this builds while other tests run; a sanitized compile killed
# for memory there is retried once alone, so a crowded machine reads as
# slow, not as a failure (a real compile error fails both times).
if ! cmake --build "$build" -j "$jobs" --target fuzz_targets; then
  echo "fuzz.sh: the build failed; retrying it with one job" >&2
  cmake --build "$build" -j 1 --target fuzz_targets
fi
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:symbolize=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  budget=(-max_total_time="$seconds")
  if [[ $ci == 1 ]]; then
    corpus="$(mktemp -d)"
    budget=(-seed=1 -runs=30000)
  fi
  mkdir -p "$corpus" "$build/crashes/$t"
  log="$build/fuzz-$t.log"
  echo "fuzz.sh: $t: ${budget[*]}"
  if ! "$build/tests/fuzz/${t}_fuzz" "$corpus" "tests/fuzz/corpus/$t" "${budget[@]}" -timeout=10 \
      -rss_limit_mb=2048 -artifact_prefix="$build/crashes/$t/" -print_final_stats=1 >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz.sh: $t FAILED; the input is in $build/crashes/$t/ (log: $log)" >&2
    exit 1
  fi
  [[ $ci == 1 ]] && rm -rf "$corpus"
  # The last status line: executions, coverage and features reached.
  grep -E '^#[0-9]+' "$log" | tail -1 | sed "s/^/fuzz.sh: $t: /"
  grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "$log" | sed "s/^/fuzz.sh: $t: /"
done
if [[ $unit_tests == 1 ]]; then
  # Keep going past targets that are not unit tests: an integration test
  # links the reflection proto twice under clang (grpc++_reflection is not
  # dropped as it is with GCC), and only the unit tests run here.
  cmake --build "$build" -j "$jobs" -- -k 0 || true
  ctest --test-dir "$build" -L unit -j "$jobs" --output-on-failure
fi
