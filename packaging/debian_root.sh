#!/usr/bin/env bash
# Prints the path of a Debian root of suite $2 (bookworm, bullseye) kept under build folder $1
# (old-roots/SUITE), making it once with debootstrap --variant=minbase from Debian's mirror
# ($GPUMUX_DEBIAN_MIRROR, default deb.debian.org); $3, if given, is debootstrap's --include list.
# One maker at a time (a lock); a root is complete once renamed into place. Exits 77 saying why on
# stderr where debootstrap or the mirror is missing. For the tests that try gpumux on other
# distributions (the package, the image, older tenant images); never in the repository.
set -euo pipefail
build=$(cd "$1" && pwd)
suite=$2
include=${3:-}
root=$build/old-roots/$suite
mirror=${GPUMUX_DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$build/old-roots"
exec 9>"$root.lock"
flock 9
if [ ! -e "$root/.complete" ]; then
  command -v debootstrap >/dev/null ||
    { echo "debootstrap is missing (scripts/install-deps.sh installs it)" >&2; exit 77; }
  rm -rf "$root.making" "$root"
  if ! debootstrap --variant=minbase ${include:+--include=$include} "$suite" "$root.making" "$mirror" \
      > "$root.log" 2>&1; then
    echo "could not make a Debian $suite root from $mirror: $(tail -2 "$root.log")" >&2
    exit 77
  fi
  touch "$root.making/.complete"
  mv "$root.making" "$root"
fi
echo "$root"
