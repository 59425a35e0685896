#!/usr/bin/env bash
# Builds gpumux's OCI image from build folder $1 (a built tree): the Debian package (cpack), a base,
# then packaging/image/Containerfile; tags it localhost/gpumux:VERSION and prints that name.
# The base: $GPUMUX_IMAGE_BASE if set (e.g. docker.io/library/debian:bookworm-slim, where a
# registry can be reached); else Debian 12 made with debootstrap from Debian's mirror
# ($GPUMUX_DEBIAN_MIRROR), kept under $1/old-roots and imported once as localhost/gpumux-base.
# Exits 77 saying why where podman, debootstrap or the mirror is missing.
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIP: $*" >&2; exit 77; }
command -v podman >/dev/null || skip "podman is missing (scripts/install-deps.sh installs it)"
# As these nested sandboxes need (crun refuses hybrid cgroups; limits no higher than the caller's).
podman=(podman --runtime runc)
limits=(--ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit "nproc=4096:4096")

(cd "$build" && rm -f gpumux_*.deb && cpack -G DEB > cpack.log 2>&1) || { tail -5 "$build/cpack.log" >&2; exit 1; }
deb=$(ls "$build"/gpumux_*_amd64.deb)
version=$(basename "$deb" | cut -d_ -f2)

base=${GPUMUX_IMAGE_BASE:-}
if [ -z "$base" ]; then
  base=localhost/gpumux-base:bookworm
  if ! "${podman[@]}" image exists "$base"; then
    set +e
    root=$("$here/../debian_root.sh" "$build" bookworm 2>&1)
    code=$?
    set -e
    [ "$code" = 77 ] && skip "$root"
    [ "$code" = 0 ] || { echo "$root" >&2; exit 1; }
    tar -C "$root" --exclude=./.complete -c . | "${podman[@]}" import - "$base" > /dev/null
  fi
fi

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp "$deb" "$context/gpumux.deb"
"${podman[@]}" build --network host "${limits[@]}" --build-arg "BASE=$base" \
  --build-arg "VERSION=$version" -f "$here/Containerfile" -t "localhost/gpumux:$version" "$context" \
  > "$build/image-build.log" 2>&1 || { tail -20 "$build/image-build.log" >&2; exit 1; }
echo "localhost/gpumux:$version"
