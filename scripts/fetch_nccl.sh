#!/usr/bin/env bash
# Fetches NCCL's runtime library from the nvidia-nccl-cu13 wheel on PyPI,
# pinned by version and SHA-256 per CPU architecture, and keeps
# libnccl.so.2 and NCCL's licence in a versioned directory outside the
# clone; prints that directory:
#
#   ${KVFLEET_DEPS_CACHE:-~/.cache/kvfleet/deps}/nccl-<version>-<arch>/{lib/libnccl.so.2,License.txt}
#
#   scripts/fetch_nccl.sh                  # this machine's architecture
#   scripts/fetch_nccl.sh --arch aarch64   # another's (an image for Grace nodes)
#
# Who uses it: deploy/docker/images.sh puts the library into the CUDA image,
# where a worker whose replica spans GPUs (--tensor-parallel N on a GPU)
# loads it at run time (engine/executor/cuda/nccl_library.h). kvfleet never
# links NCCL, so nothing else needs it. Why the wheel: it is NCCL's own
# build for CUDA 13, the one PyTorch installs, and PyPI is reachable from
# every build machine, where NVIDIA's package repositories may not be.
#
# The wheel (about 200 MB) is downloaded once with pip (--no-deps,
# binary only), checked against the pin below, unpacked, and deleted; a
# stamp file written last (version + hash) marks the directory complete,
# and later runs return at once without the network.
set -euo pipefail

NCCL_VERSION=2.32.6
declare -A NCCL_WHEEL_SHA256=(
  [x86_64]=76e7aad00482092baf01e13e66f441d54c96b5cf1e3f143dee27db7f731d41ba
  [aarch64]=ee63091d0c00f5a0419e04d7f59f6dd6ebd54b14931cb0f9e3a626b91243233d
)

log() { echo "fetch_nccl: $*" >&2; }

arch="$(uname -m)"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --arch) [[ $# -ge 2 ]] || { log "--arch needs x86_64 or aarch64"; exit 2; }; arch="$2"; shift 2 ;;
    -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) log "unknown argument '$1' (known: --arch ARCH)"; exit 2 ;;
  esac
done
sha="${NCCL_WHEEL_SHA256[$arch]:-}"
[[ -n $sha ]] || { log "no pinned nvidia-nccl-cu13 wheel for '$arch' (pinned: ${!NCCL_WHEEL_SHA256[*]})"; exit 2; }

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache_root="${KVFLEET_DEPS_CACHE:-$HOME/.cache/kvfleet/deps}"
dir="$cache_root/nccl-$NCCL_VERSION-$arch"
stamp="$dir/.kvfleet-complete"
stamp_text="nvidia-nccl-cu13 $NCCL_VERSION $arch wheel-sha256 $sha"
if [[ -f $stamp && "$(cat "$stamp")" == "$stamp_text" ]]; then
  log "NCCL $NCCL_VERSION ($arch) present at $dir"
  echo "$dir"
  exit 0
fi

python="$repo/.venv/bin/python"
[[ -x $python ]] || python=python3
"$python" -m pip --version >/dev/null 2>&1 || { log "no pip for $python: run scripts/setup.sh"; exit 1; }

mkdir -p "$cache_root"
wheels="$(mktemp -d "$cache_root/.nccl-wheel.XXXXXX")"
staging="$dir.partial.$$"
trap 'rm -rf "$wheels" "$staging"' EXIT
log "fetching the nvidia-nccl-cu13==$NCCL_VERSION wheel for $arch (about 200 MB)"
"$python" -m pip download --disable-pip-version-check -q --no-deps --only-binary=:all: \
  --platform "manylinux_2_27_$arch" "nvidia-nccl-cu13==$NCCL_VERSION" -d "$wheels" >&2
wheel="$(ls "$wheels"/nvidia_nccl_cu13-"$NCCL_VERSION"-*.whl 2>/dev/null | head -1)"
[[ -n $wheel ]] || { log "pip left no nvidia_nccl_cu13-$NCCL_VERSION wheel in $wheels"; exit 1; }
got="$(sha256sum "$wheel" | cut -d' ' -f1)"
[[ $got == "$sha" ]] || { log "sha256 mismatch for $(basename "$wheel"): expected $sha, got $got"; exit 1; }
log "$(basename "$wheel") (sha256 ok)"

rm -rf "$staging" && mkdir -p "$staging/lib"
# A wheel is a zip; Python's zipfile needs no unzip package.
"$python" - "$wheel" "$staging" <<'PY'
import shutil, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    wanted = {"nvidia/nccl/lib/libnccl.so.2": "lib/libnccl.so.2"}
    wanted.update({n: "License.txt" for n in names if n.endswith(".dist-info/licenses/License.txt")})
    missing = [n for n in ("nvidia/nccl/lib/libnccl.so.2",) if n not in names]
    if missing or "License.txt" not in wanted.values():
        sys.exit(f"fetch_nccl: {wheel} lacks {missing or 'its License.txt'}")
    for name, dest in wanted.items():
        with z.open(name) as src, open(f"{out}/{dest}", "wb") as dst:
            shutil.copyfileobj(src, dst)
PY
chmod 0644 "$staging/lib/libnccl.so.2" "$staging/License.txt"
echo "$stamp_text" > "$staging/.kvfleet-complete"
rm -rf "$dir" && mv "$staging" "$dir"
log "NCCL $NCCL_VERSION ($arch): $dir/lib/libnccl.so.2 ($(du -h "$dir/lib/libnccl.so.2" | cut -f1))"
echo "$dir"
