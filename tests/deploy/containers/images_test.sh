#!/usr/bin/env bash
# Builds kvfleet:cpu and kvfleet:cuda from the build ctest runs in (no
# second compile): the runtime component installed into a staging prefix,
# then deploy/docker/images.sh --prebuilt, which pulls nothing. Then checks
# each image as the chart runs it: every binary answers --help as uid 10001
# on a read-only root with no capabilities, and the image's user is 10001;
# the CUDA image loads NCCL from the pinned nvidia-nccl-cu13 wheel
# (scripts/fetch_nccl.sh), and the CPU image has none.
#
#   tests/deploy/containers/images_test.sh BUILD_DIR
#
# Exits 0 when every check passes, 1 when one fails, 77 (skip) where podman
# cannot run containers (the reason is printed).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
build_dir="$(cd "${1:?usage: images_test.sh BUILD_DIR}" && pwd)"
export CONTAINERS_CONF="$repo/deploy/docker/containers.conf"

skip() { echo "images_test: SKIP: $*"; exit 77; }
fail() { echo "images_test: FAIL: $*"; exit 1; }

for tool in podman buildah debootstrap; do
  command -v "$tool" >/dev/null || skip "no $tool (scripts/setup.sh installs it)"
done
podman info >/dev/null 2>&1 || skip "podman cannot start here: $(podman info 2>&1 | tail -1)"

prefix="$build_dir/container-prefix"
rm -rf "$prefix"
started=$(date +%s)
cmake --install "$build_dir" --prefix "$prefix" --component runtime --strip >/dev/null
log="$build_dir/container-images.log"
if ! bash "$repo/deploy/docker/images.sh" --prebuilt "$prefix" >"$log" 2>&1; then
  tail -40 "$log"
  fail "deploy/docker/images.sh failed (log: $log)"
fi
grep -E '^images.sh:' "$log"
echo "images_test: images built in $(( $(date +%s) - started )) s"

# A container that cannot start at all (a kernel or sandbox without the
# namespaces it needs) is a skip, not a failure of the images.
if ! probe="$(podman run --rm kvfleet:cpu true 2>&1)"; then
  skip "podman cannot run a container here: $probe"
fi

nccl_version="$(sed -n 's/^NCCL_VERSION=//p' "$repo/scripts/fetch_nccl.sh")"
for variant in cpu cuda; do
  image="kvfleet:$variant"
  user="$(podman image inspect --format '{{.Config.User}}' "$image")"
  [[ $user == 10001:10001 ]] || fail "$image runs as '$user', not 10001:10001"
  for b in kvfleet-worker kvfleet-router kvfleet-cachemanager kvfleet; do
    podman run --rm --read-only --read-only-tmpfs=false --cap-drop ALL --security-opt no-new-privileges \
      "$image" "$b" --help >/dev/null 2>&1 || fail "$image: $b --help fails as the chart runs it"
  done
  uid="$(podman run --rm --read-only "$image" id -u)"
  [[ $uid == 10001 ]] || fail "$image: id -u is $uid"
  # NCCL: the CUDA image loads the pinned wheel's library from the loader's
  # path (through kvfleet's own loader, with no GPU); the CPU image has none.
  devices="$(podman run --rm --read-only "$image" kvfleet devices 2>&1)" || fail "$image: kvfleet devices fails: $devices"
  nccl_line="$(grep '^nccl ' <<<"$devices")"
  if [[ $variant == cuda ]]; then
    [[ $nccl_line == *"NCCL $nccl_version (libnccl.so.2)"* ]] \
      || fail "$image loads no NCCL $nccl_version from the pinned wheel: '$nccl_line'"
    nccl="NCCL $nccl_version loads"
  else
    [[ $nccl_line != *"NCCL "[0-9]* ]] || fail "$image carries an NCCL: '$nccl_line'"
    nccl="no NCCL"
  fi
  echo "images_test: ok: $image ($(podman image inspect --format '{{.Size}}' "$image" | numfmt --to=iec)," \
       "user 10001, every binary starts read-only without capabilities; $nccl)"
done
echo "images_test: base $(podman image inspect --format '{{.Size}}' localhost/kvfleet-base:bookworm | numfmt --to=iec)"
echo "images_test: all checks passed"
