#!/usr/bin/env bash
# The one way kvfleet is built: by the images (Dockerfile, either backend)
# and by the test command (scripts/test.sh), so what CI tests and what the
# images ship come out of the same configure line.
#
# Configures only when the build directory has no CMakeCache.txt or when an
# option asked for here differs from the cached value, so repeated calls stay
# incremental. An option not given is not passed: a fresh build directory gets
# the project's default (CMakeLists.txt), an existing one keeps what it has.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: deploy/docker/build.sh [options]

  --build-dir DIR         build directory (default: build, relative to the current directory)
  --build-type TYPE       Release | RelWithDebInfo (CMAKE_BUILD_TYPE; project default RelWithDebInfo)
  --native ON|OFF         KVFLEET_NATIVE: -march=native (project default ON); OFF builds for the
                          AVX2+FMA+F16C floor, which is what an image must use
  --cuda ON|OFF|auto      KVFLEET_CUDA: auto builds the CUDA backend when nvcc is found (the project
                          default), ON also fails unless it was found, OFF never builds it
  --cuda-archs "80;90"    CMAKE_CUDA_ARCHITECTURES (project default "80;90")
  --werror                KVFLEET_WERROR=ON: warnings are errors (what CI builds with)
  --tests ON|OFF          KVFLEET_BUILD_TESTS: OFF configures without the tests and benchmarks, so
                          neither GoogleTest nor the test tools need be installed (the images' build)
  --jobs N                parallel build jobs (default: nproc)
  --targets "a b"         build only these targets (default: everything)
  --runtime-only          build only what the images ship: kvfleet-worker, kvfleet-router,
                          kvfleet-cachemanager and kvfleet (no tests, no benchmarks)
  --install PREFIX        then install the runtime component (those four binaries) into PREFIX/bin
  --strip                 strip the installed binaries (with --install)
  -h, --help              this text

examples:
  deploy/docker/build.sh --build-dir build --werror --jobs 2              # what scripts/test.sh runs
  deploy/docker/build.sh --native OFF --cuda OFF --tests OFF --runtime-only --install /opt/kvfleet --strip
EOF
}

die() { echo "build.sh: $*" >&2; exit 2; }
log() { echo "build.sh: $*"; }
# A command line as a shell would take it back (a list like "80;90" quoted), for the log.
shown() { local line; printf -v line '%q ' "$@"; echo "${line% }"; }

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
runtime_targets=(kvfleet-worker kvfleet-router kvfleet-cachemanager kvfleet)

build_dir=build
build_type=""
native=""
cuda=""
cuda_archs=""
werror=0
tests=""
jobs="$(nproc)"
targets=()
runtime_only=0
install_prefix=""
strip=0

need_value() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value (see --help)"; }
on_off() {
  case "${2^^}" in
    ON|OFF) echo "${2^^}" ;;
    *) die "$1 takes ON or OFF, not '$2'" ;;
  esac
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) need_value "$@"; build_dir="$2"; shift 2 ;;
    --build-type)
      need_value "$@"
      case "$2" in
        Release|RelWithDebInfo) build_type="$2" ;;
        *) die "--build-type takes Release or RelWithDebInfo, not '$2'" ;;
      esac
      shift 2 ;;
    --native) need_value "$@"; native="$(on_off "$1" "$2")"; shift 2 ;;
    --cuda)
      need_value "$@"
      case "${2,,}" in
        on|off|auto) cuda="${2,,}" ;;
        *) die "--cuda takes ON, OFF or auto, not '$2'" ;;
      esac
      shift 2 ;;
    --cuda-archs)
      need_value "$@"
      [[ $2 =~ ^[0-9a-z-]+(\;[0-9a-z-]+)*$ ]] || die "--cuda-archs takes a CMake list like \"80;90\", not '$2'"
      cuda_archs="$2"; shift 2 ;;
    --werror) werror=1; shift ;;
    --tests) need_value "$@"; tests="$(on_off "$1" "$2")"; shift 2 ;;
    --jobs)
      need_value "$@"
      [[ $2 =~ ^[1-9][0-9]*$ ]] || die "--jobs takes a positive number, not '$2'"
      jobs="$2"; shift 2 ;;
    --targets) need_value "$@"; read -r -a more <<< "$2"; targets+=("${more[@]}"); shift 2 ;;
    --runtime-only) runtime_only=1; shift ;;
    --install) need_value "$@"; install_prefix="$2"; shift 2 ;;
    --strip) strip=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done

[[ $cuda == off && -n $cuda_archs ]] && die "--cuda-archs means nothing with --cuda OFF"
[[ $strip -eq 1 && -z $install_prefix ]] && die "--strip applies to --install"
((runtime_only)) && targets+=("${runtime_targets[@]}")
# Installing needs the four binaries built, whatever else was asked for.
if [[ -n $install_prefix && ${#targets[@]} -gt 0 ]]; then
  for t in "${runtime_targets[@]}"; do
    [[ " ${targets[*]} " == *" $t "* ]] || targets+=("$t")
  done
fi

# The options asked for, as cache entries NAME=VALUE (booleans as ON/OFF).
wanted=()
[[ -n $build_type ]] && wanted+=("CMAKE_BUILD_TYPE=$build_type")
[[ -n $native ]] && wanted+=("KVFLEET_NATIVE=$native")
case "$cuda" in
  off) wanted+=("KVFLEET_CUDA=OFF") ;;
  on|auto) wanted+=("KVFLEET_CUDA=ON") ;;
esac
[[ -n $cuda_archs ]] && wanted+=("CMAKE_CUDA_ARCHITECTURES=$cuda_archs")
((werror)) && wanted+=("KVFLEET_WERROR=ON")
[[ -n $tests ]] && wanted+=("KVFLEET_BUILD_TESTS=$tests")

cache="$build_dir/CMakeCache.txt"

# The cached value of NAME (any type), empty when absent; booleans as ON/OFF.
cached() {
  local value
  value="$(grep -m1 -E "^$1:[A-Z]+=" "$cache" | cut -d= -f2- || true)"
  case "${value^^}" in
    ON|TRUE|YES|Y|1) echo ON ;;
    OFF|FALSE|NO|N|0) echo OFF ;;
    *) echo "$value" ;;
  esac
}

reason=""
if [[ ! -f $cache ]]; then
  reason="no $cache"
else
  generator="$(cached CMAKE_GENERATOR)"
  [[ $generator == Ninja ]] || die "$build_dir was configured with '$generator', not Ninja: remove it or pick another --build-dir"
  source_dir="$(cached CMAKE_HOME_DIRECTORY)"
  [[ $source_dir -ef $repo ]] || die "$build_dir belongs to the source tree $source_dir, not $repo"
  for entry in "${wanted[@]}"; do
    name="${entry%%=*}"
    have="$(cached "$name")"
    if [[ $have != "${entry#*=}" ]]; then
      reason="$name is '${have}' in $cache, '${entry#*=}' asked for"
      break
    fi
  done
fi

# xgrammar's C++ core (constrained decoding) is a dependency built once into
# a versioned prefix outside the tree; a later call returns at once.
bash "$repo/scripts/build_xgrammar.sh"

if [[ -n $reason ]]; then
  configure=(cmake -S "$repo" -B "$build_dir" -G Ninja)
  for entry in "${wanted[@]}"; do configure+=("-D$entry"); done
  log "configuring ($reason): $(shown "${configure[@]}")"
  "${configure[@]}"
else
  log "$build_dir is configured as asked; not reconfiguring"
fi

if [[ $cuda == on ]]; then
  nvcc="$(cached CMAKE_CUDA_COMPILER)"
  if [[ -z $nvcc || $nvcc == *NOTFOUND ]]; then
    echo "build.sh: --cuda ON but $build_dir has no CUDA compiler (CMake looks for nvcc on PATH, or" \
         "CUDACXX; a build directory configured without one keeps that answer: use a fresh one)" >&2
    exit 1
  fi
  log "CUDA backend: $nvcc"
fi

build=(cmake --build "$build_dir" -j "$jobs")
((${#targets[@]})) && build+=(--target "${targets[@]}")
log "building: $(shown "${build[@]}")"
"${build[@]}"

if [[ -n $install_prefix ]]; then
  install=(cmake --install "$build_dir" --prefix "$install_prefix" --component runtime)
  ((strip)) && install+=(--strip)
  log "installing: $(shown "${install[@]}")"
  "${install[@]}"
  for t in "${runtime_targets[@]}"; do
    [[ -x $install_prefix/bin/$t ]] || { echo "build.sh: $install_prefix/bin/$t was not installed" >&2; exit 1; }
    # --help loads every shared library the binary needs: a missing one fails here, not in a pod.
    "$install_prefix/bin/$t" --help > /dev/null 2>&1 || { echo "build.sh: $install_prefix/bin/$t --help fails" >&2; exit 1; }
  done
  log "installed ${runtime_targets[*]} into $install_prefix/bin"
fi
