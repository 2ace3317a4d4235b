#!/usr/bin/env bash
# Builds the GPU binaries here and gathers them, with every shared library
# they load, into DIR, for scripts/gpu_check.sh to run on a GPU machine that
# has the NVIDIA driver but none of the build's -dev packages (no gRPC,
# abseil, spdlog, ...). At most 40 MB: binaries and libraries are stripped,
# then compressed.
#
#   scripts/gpu_pack.sh DIR            # build (incrementally), then pack
#   scripts/gpu_pack.sh --no-build DIR # pack what build/ already holds
#
# DIR gets gpu_check.sh, MANIFEST and kvfleet-gpu.tar.xz, which holds bin/
# (the binaries) and lib/ (their libraries, by soname); gpu_check.sh unpacks
# it. Only glibc's own libraries and the NVIDIA driver come from the machine
# that runs them; the pack checks, before it compresses, that each binary
# resolves everything else inside lib/ and starts with nothing but lib/ on
# its library path.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$repo/build"
do_build=1
if [[ ${1:-} == --no-build ]]; then do_build=0; shift; fi
if [[ $# -ne 1 ]]; then
  echo "usage: scripts/gpu_pack.sh [--no-build] DIR" >&2
  exit 2
fi
dir="$1"
limit_mb=40

# Binary name → its place in the build tree.
declare -A binaries=(
  [kvfleet]=tools/kvfleet/kvfleet
  [kvfleet-worker]=services/worker/kvfleet-worker
  [kvfleet-router]=services/router/kvfleet-router
  [kvfleet-cachemanager]=services/cachemanager/kvfleet-cachemanager
  [cuda_ops_test]=tests/unit/engine/executor/ops/cuda_ops_test
  [engine_cuda_test]=tests/unit/engine/engine_cuda_test
  [engine_cuda_tp_test]=tests/unit/engine/engine_cuda_tp_test
  [router_cluster_gpu_test]=tests/integration/services/router/router_cluster_gpu_test
  [gpu_bench]=bench/gpu_bench
)
# Libraries the target machine provides: glibc's, and the driver's.
system_lib='^(libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux-x86-64|linux-vdso|libcuda|libnvidia-[a-z-]+)\.so'

log() { echo "gpu_pack: $*"; }

if [[ ! -f $build/CMakeCache.txt ]] || ! grep -q '^CMAKE_CUDA_COMPILER:.*nvcc' "$build/CMakeCache.txt"; then
  echo "gpu_pack: $build has no CUDA backend (configure it on a machine with nvcc: scripts/test.sh does)" >&2
  exit 1
fi
if ((do_build)); then
  targets=()
  for name in "${!binaries[@]}"; do targets+=("$name"); done
  cmake --build "$build" -j2 --target "${targets[@]}"
fi

rm -rf "$dir"
stage="$dir/stage"
mkdir -p "$stage/bin" "$stage/lib"
for name in "${!binaries[@]}"; do
  src="$build/${binaries[$name]}"
  [[ -x $src ]] || { echo "gpu_pack: $src is missing: build it first (or drop --no-build)" >&2; exit 1; }
  strip --strip-unneeded -o "$stage/bin/$name" "$src"
done

# Every library the binaries load (ldd follows the dependencies' own), once.
declare -A copied=()
for bin in "$stage"/bin/*; do
  while read -r soname path; do
    [[ $soname =~ $system_lib ]] && continue
    [[ -n ${copied[$soname]:-} ]] && continue
    if [[ $path == "not" || ! -f $path ]]; then
      echo "gpu_pack: $(basename "$bin") needs $soname, which is not found here" >&2
      exit 1
    fi
    strip --strip-unneeded -o "$stage/lib/$soname" "$(readlink -f "$path")"
    copied[$soname]=1
  done < <(ldd "$bin" | awk '/=>/ {print $1, $3}')
done

cp "$repo/scripts/gpu_check.sh" "$dir/gpu_check.sh"
{
  echo "commit $(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "packed $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "cuda architectures $(grep '^CMAKE_CUDA_ARCHITECTURES:' "$build/CMakeCache.txt" | cut -d= -f2)"
  (cd "$stage" && du -b bin/* lib/* | sort -k2)
} > "$dir/MANIFEST"

# The checks: resolution inside lib/, and a start with only lib/.
for bin in "$stage"/bin/*; do
  outside=$(env -i LD_LIBRARY_PATH="$stage/lib" ldd "$bin" | awk '/=>/ {print $1, $3}' |
            grep -vE "^($system_lib)" | grep -v " $stage/lib/" || true)
  if [[ -n $outside ]]; then
    echo "gpu_pack: $(basename "$bin") loads libraries from outside the pack:" >&2
    echo "$outside" >&2
    exit 1
  fi
  case "$(basename "$bin")" in
    *_test) args=(--gtest_list_tests) ;;
    *) args=(--help) ;;
  esac
  if ! env -i LD_LIBRARY_PATH="$stage/lib" "$bin" "${args[@]}" > /dev/null 2>&1; then
    echo "gpu_pack: $(basename "$bin") ${args[*]} fails with only the packed libraries" >&2
    exit 1
  fi
done
unpacked_mb=$(( $(du -sb "$stage" | cut -f1) / 1000000 ))
tar -cJf "$dir/kvfleet-gpu.tar.xz" -C "$stage" bin lib
rm -rf "$stage"
size_mb=$(( $(du -sb "$dir" | cut -f1) / 1000000 ))
if (( size_mb > limit_mb )); then
  echo "gpu_pack: $dir is $size_mb MB, over the $limit_mb MB limit" >&2
  exit 1
fi
log "packed ${#binaries[@]} binaries and ${#copied[@]} libraries into $dir ($size_mb MB of $limit_mb; $unpacked_mb MB unpacked); each starts with only its lib/"
