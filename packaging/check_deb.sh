#!/usr/bin/env bash
# Builds the Debian package from build folder $1 (cpack) and tries it as a Slurm node's admin would,
# in a clean Debian 12 root (debootstrap, made once and kept under $1/old-roots, copied afresh for
# each run): apt installs it with its dependencies, `gpumux plan` runs on the bundled example and
# `gpumuxd --help` from the installed paths, its unit and plugstack line name them; `dpkg -r`
# leaves only the plugstack line (a conffile), `dpkg --purge` leaves no file. Exits 77 (skipped)
# saying why where debootstrap, root or Debian's mirror is missing. Run by ctest (package.deb).
set -euo pipefail
build=$(cd "$1" && pwd)
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root to chroot into a clean root (CI runs as root)"
mirror=${GPUMUX_DEBIAN_MIRROR:-http://deb.debian.org/debian}

(cd "$build" && rm -f gpumux_*.deb && cpack -G DEB > cpack.log 2>&1) || fail "cpack: $(tail -5 "$build/cpack.log")"
deb=$(ls "$build"/gpumux_*_amd64.deb)
echo "package: $(basename "$deb"), $(du -h "$deb" | cut -f1)"

set +e
cache=$("$(dirname "$0")/debian_root.sh" "$build" bookworm 2>&1)
code=$?
set -e
[ "$code" = 77 ] && skip "$cache"
[ "$code" = 0 ] || fail "debian_root.sh: $cache"

root=$(mktemp -d /tmp/gpumux-deb-XXXXXX)
cleanup() { umount "$root/proc" 2>/dev/null || true; rm -rf "$root"; }
trap cleanup EXIT
cp -a "$cache/." "$root/"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
cp "$deb" "$root/tmp/gpumux.deb"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }

in_root apt-get update -qq > /dev/null || skip "apt in the clean root cannot reach $mirror"
in_root apt-get install -y -qq --no-install-recommends /tmp/gpumux.deb > "$build/cpack-install.log" 2>&1 ||
  fail "apt-get install: $(tail -5 "$build/cpack-install.log")"
files=$(in_root dpkg -L gpumux | while read -r f; do [ -d "$root$f" ] || echo "$f"; done)
echo "installed $(echo "$files" | wc -l) files"

plan=$(in_root gpumux plan /usr/share/gpumux/examples/p5-48xlarge.yaml) || fail "gpumux plan: $plan"
echo "$plan" | head -3
in_root gpumuxd --help | head -1 | grep -q gpumuxd || fail "gpumuxd --help"
grep -q '^ExecStart=/usr/bin/gpumuxd ' "$root/usr/lib/systemd/system/gpumuxd.service" || fail "the unit names $(grep ExecStart "$root/usr/lib/systemd/system/gpumuxd.service")"
if [ -e "$root/usr/lib/gpumux/spank_gpumux.so" ]; then
  grep -q '^required /usr/lib/gpumux/spank_gpumux.so ' "$root/etc/slurm/plugstack.conf.d/gpumux.conf" ||
    fail "plugstack line: $(cat "$root/etc/slurm/plugstack.conf.d/gpumux.conf")"
fi

in_root dpkg -r gpumux > /dev/null
left=$(for f in $files; do [ -e "$root$f" ] && echo "$f"; done || true)
[ -z "$left" ] || [ "$left" = /etc/slurm/plugstack.conf.d/gpumux.conf ] || fail "dpkg -r left: $left"
in_root dpkg --purge gpumux > /dev/null
left=$(for f in $files; do [ -e "$root$f" ] && echo "$f"; done || true)
[ -z "$left" ] || fail "dpkg --purge left: $left"
for d in /usr/lib/gpumux /usr/share/gpumux /usr/share/doc/gpumux; do
  [ ! -e "$root$d" ] || fail "dpkg --purge left $d"
done
echo "the package installs, runs and is removed without a trace"
