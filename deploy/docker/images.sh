#!/usr/bin/env bash
# Builds the kvfleet images (kvfleet:cpu, kvfleet:cuda) with podman and
# buildah, pulling nothing: the Debian 12 base is made here with
# debootstrap from the Debian mirror this machine's apt already uses, and
# imported as localhost/kvfleet-base:bookworm.
#
#   deploy/docker/images.sh                          # both images, compiled in their build stage
#   deploy/docker/images.sh --prebuilt /tmp/stage    # assembled from `build.sh --install /tmp/stage`
#
# deploy/docker/README.md, "Building without a registry", says more.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: deploy/docker/images.sh [options]

  --prebuilt PREFIX   take the binaries from PREFIX/bin (deploy/docker/build.sh --install PREFIX,
                      on Debian 12) instead of compiling them in the images' build stage
  --only cpu|cuda     build one image (default: both)
  --tag-prefix NAME   image names NAME:cpu and NAME:cuda (default: kvfleet)
  --cuda-toolkit DIR  the CUDA toolkit the CUDA image compiles with (default: the directory
                      /usr/local/cuda points to); not needed with --prebuilt
  --jobs N            compile jobs in the build stage (default: nproc)
  --base-cache DIR    where the base root filesystem's tarball is kept between runs
                      (default: ${KVFLEET_DEPS_CACHE:-~/.cache/kvfleet/deps}/images)
  --rebuild-base      make the base again even when the image or the tarball exists
  -h, --help          this text
USAGE
}

die() { echo "images.sh: $*" >&2; exit 2; }
log() { echo "images.sh: $*"; }

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export CONTAINERS_CONF="$repo/deploy/docker/containers.conf"
base_image=localhost/kvfleet-base:bookworm

prebuilt=""
only=""
tag_prefix=kvfleet
cuda_toolkit=""
jobs="$(nproc)"
base_cache="${KVFLEET_DEPS_CACHE:-$HOME/.cache/kvfleet/deps}/images"
rebuild_base=0

need_value() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value (see --help)"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --prebuilt) need_value "$@"; prebuilt="$2"; shift 2 ;;
    --only)
      need_value "$@"
      [[ $2 == cpu || $2 == cuda ]] || die "--only takes cpu or cuda, not '$2'"
      only="$2"; shift 2 ;;
    --tag-prefix) need_value "$@"; tag_prefix="$2"; shift 2 ;;
    --cuda-toolkit) need_value "$@"; cuda_toolkit="$2"; shift 2 ;;
    --jobs)
      need_value "$@"
      [[ $2 =~ ^[1-9][0-9]*$ ]] || die "--jobs takes a positive number, not '$2'"
      jobs="$2"; shift 2 ;;
    --base-cache) need_value "$@"; base_cache="$2"; shift 2 ;;
    --rebuild-base) rebuild_base=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done

for tool in podman buildah debootstrap; do
  command -v "$tool" >/dev/null || die "$tool not found: scripts/setup.sh installs it (Debian: podman buildah runc debootstrap)"
done
if [[ -n $prebuilt ]]; then
  prebuilt="$(cd "$prebuilt" && pwd)" || die "--prebuilt $prebuilt is not a directory"
  for b in kvfleet-worker kvfleet-router kvfleet-cachemanager kvfleet; do
    [[ -x $prebuilt/bin/$b ]] || die "$prebuilt/bin/$b missing: make it with deploy/docker/build.sh --install $prebuilt"
  done
fi

# The Debian mirror apt already uses here (the first deb822 URIs or
# one-line deb entry), so the base comes from where this machine's packages do.
debian_mirror() {
  local uri
  uri="$(grep -h -m1 -E '^URIs:' /etc/apt/sources.list.d/debian.sources 2>/dev/null | awk '{print $2}' || true)"
  [[ -n $uri ]] || uri="$(grep -h -m1 -E '^deb +[a-z]+://' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' || true)"
  [[ -n $uri ]] || die "no Debian mirror in /etc/apt/sources.list or sources.list.d/debian.sources"
  echo "$uri"
}

# What a slim Debian image leaves out, here and in every later apt-get
# install: documentation, manual pages and translations (dpkg path
# excludes, keeping copyright files), apt's binary caches and downloaded
# packages, and translated package lists.
slim() {
  local root="$1"
  cat > "$root/etc/dpkg/dpkg.cfg.d/kvfleet-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
CFG
  cat > "$root/etc/apt/apt.conf.d/kvfleet-slim" <<'CFG'
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb || true"; };
Acquire::Languages "none";
APT::Install-Recommends "false";
CFG
  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/lintian/*
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
  rm -rf "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
    "$root"/var/log/*.log "$root"/var/log/apt/*
}

# debootstrap's minimal variant, without apt's caches and lists, with this
# machine's apt sources when it is a Debian 12 itself (so the images' apt
# sees bookworm-updates and the security suite too).
make_base() {
  local tarball="$base_cache/debian-bookworm-minbase.tar"
  if ((rebuild_base)) || [[ ! -s $tarball ]]; then
    local mirror root
    mirror="$(debian_mirror)"
    root="$(mktemp -d "${TMPDIR:-/tmp}/kvfleet-rootfs.XXXXXX")"
    log "making the Debian 12 base with debootstrap from $mirror (about 30 s)"
    debootstrap --variant=minbase bookworm "$root" "$mirror" > "$root.log" 2>&1 \
      || { tail -20 "$root.log" >&2; die "debootstrap failed (log: $root.log)"; }
    if grep -qs 'VERSION_CODENAME=bookworm' /etc/os-release; then
      [[ -f /etc/apt/sources.list.d/debian.sources ]] && cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/" \
        && rm -f "$root/etc/apt/sources.list"
    fi
    slim "$root"
    mkdir -p "$base_cache"
    tar -C "$root" --numeric-owner -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
    rm -rf "$root" "$root.log"
  else
    log "base root filesystem cached at $tarball"
  fi
  podman import --change 'CMD ["/bin/bash"]' "$tarball" "$base_image" >/dev/null
  log "imported $base_image ($(podman image inspect --format '{{.Size}}' "$base_image" | numfmt --to=iec) )"
}

if ((rebuild_base)) || ! podman image exists "$base_image"; then
  make_base
else
  log "$base_image present"
fi

revision="$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
# podman build of the Dockerfile for backend VARIANT tagged TAG, with the arguments every
# build takes and any given after them. --format docker: the OCI format has
# no SHELL, and the Dockerfile's RUN lines rely on bash's pipefail.
podman_build() {
  local variant="$1" tag="$2"
  shift 2
  local args=(podman build --format docker -f "$repo/deploy/docker/Dockerfile" -t "$tag"
              --build-arg "BACKEND=$variant" --build-arg "BASE_IMAGE=$base_image" --build-arg "KVFLEET_REVISION=$revision"
              --build-arg "BUILD_JOBS=$jobs" "$@" "$repo")
  log "${args[*]}"
  "${args[@]}"
}

build_image() {
  local variant="$1" started
  started=$(date +%s)
  # The CUDA image's NCCL: the pinned wheel's library (fetched once, then cached).
  local nccl=()
  if [[ $variant == cuda ]]; then
    local nccl_dir
    nccl_dir="$(bash "$repo/scripts/fetch_nccl.sh")" || die "scripts/fetch_nccl.sh failed: the CUDA image needs NCCL"
    nccl=(--build-context "nccl-library=$nccl_dir")
  fi
  if [[ -n $prebuilt ]]; then
    podman_build "$variant" "$tag_prefix:$variant" --build-arg BINARIES=prebuilt \
      --build-context "kvfleet-prefix=$prebuilt" "${nccl[@]}"
  else
    # The build stage first, as an image of its own: buildah does not see
    # that FROM ${BINARIES} names a stage, skips it as unused and then looks
    # for an image called "source". Named as an image, BINARIES works.
    local extra=()
    # The build machine's CA bundle, mounted into the RUN steps only (under
    # /run, so no layer keeps it) and named to pip by PIP_CERT: behind a
    # TLS-inspecting proxy the build stage's pip then trusts what the host
    # trusts when it fetches xgrammar's source. Not over the image's own
    # bundle: ca-certificates' install script rewrites that file.
    local bundle=/etc/ssl/certs/ca-certificates.crt
    if [[ -s $bundle ]]; then
      extra+=(--volume "$bundle:/run/build-host-ca.crt:ro" --build-arg PIP_CERT=/run/build-host-ca.crt)
    fi
    if [[ $variant == cuda ]]; then
      local toolkit="${cuda_toolkit:-$(readlink -f /usr/local/cuda 2>/dev/null || true)}"
      [[ -x $toolkit/bin/nvcc ]] || die "no CUDA toolkit at '${toolkit}' (--cuda-toolkit DIR, a directory with bin/nvcc)"
      extra+=(--build-context "cuda-toolkit=$toolkit")
    fi
    podman_build "$variant" "$tag_prefix-build:$variant" --target source "${extra[@]}"
    log "compiled $tag_prefix-build:$variant in $(( $(date +%s) - started )) s"
    podman_build "$variant" "$tag_prefix:$variant" --build-arg "BINARIES=localhost/$tag_prefix-build:$variant" "${nccl[@]}"
  fi
  log "built $tag_prefix:$variant in $(( $(date +%s) - started )) s," \
      "$(podman image inspect --format '{{.Size}}' "$tag_prefix:$variant" | numfmt --to=iec)"
}

for variant in cpu cuda; do
  if [[ -z $only || $only == "$variant" ]]; then
    build_image "$variant"
  fi
done
