#!/usr/bin/env bash
# Builds gpumux's image from build folder $1 (build.sh) and starts gpumuxd from it as the DaemonSet
# does: the node's PID namespace, its runtime folder (ledgers, sockets) and state folder mounted.
# From outside the container it admits a tenant through gpumuxd's socket; then a program (the
# build's test client, in a container of the same image, as a pod mounts the runtime folder) runs
# with the environment gpumuxd answered and must be held to its 1 GiB quota by the image's shim.
# Exits 77 saying why where podman, root, debootstrap or the mirror is missing. Run by ctest
# (package.image).
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; [ -n "${name:-}" ] && podman --runtime runc logs "$name" 2>&1 | tail -20; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root to run gpumuxd's container in the node's PID namespace"
command -v podman >/dev/null || skip "podman is missing (scripts/install-deps.sh installs it)"
podman=(podman --runtime runc)
limits=(--ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit "nproc=4096:4096")

set +e
image=$("$here/build.sh" "$build")
code=$?
set -e
[ "$code" = 77 ] && skip "no image: $image"
[ "$code" = 0 ] || fail "build.sh exited $code"
echo "image: $image, $("${podman[@]}" image inspect --format '{{.Size}}' "$image" | numfmt --to=iec) "

work=$(mktemp -d /tmp/gpumux-image-XXXXXX)
name=gpumuxd-check-$$
cleanup() { "${podman[@]}" rm -f "$name" > /dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/run" "$work/state"
# As deploy/kubernetes's DaemonSet runs it: privileged, hostPID, the runtime and state folders.
"${podman[@]}" run -d --name "$name" --network host --pid host --privileged "${limits[@]}" \
  -v "$work/run:/run/gpumux" -v "$work/state:/var/lib/gpumux" "$image" \
  --sim H100 --socket /run/gpumux/gpumuxd.sock --runtime-dir /run/gpumux \
  --state /var/lib/gpumux/state.db > /dev/null
api() { curl -sS --max-time 10 --unix-socket "$work/run/gpumuxd.sock" "$@"; }
for _ in $(seq 100); do api http://gpumuxd/v1/health > /dev/null 2>&1 && break; sleep 0.1; done
api http://gpumuxd/v1/health > /dev/null || fail "gpumuxd in the container did not answer on its socket"

admitted=$(api -X POST -d '{"id": "from-outside", "gpu": 0, "memory": "1GiB"}' http://gpumuxd/v1/tenants)
echo "$admitted" | python3 -c 'import json,sys; [print("%s=%s" % kv) for kv in json.load(sys.stdin)["env"].items()]' \
  > "$work/tenant.env" || fail "admission: $admitted"
out=$("${podman[@]}" run --rm --network host --pid host "${limits[@]}" -v "$work/run:/run/gpumux" \
  -v "$build/tests/gpumux_alloc_client:/usr/local/bin/alloc:ro" --env-file "$work/tenant.env" \
  --entrypoint /usr/local/bin/alloc "$image" direct fill $((64 << 20)) 0 2>&1) ||
  fail "the tenant's program: $out"
echo "tenant's program: $out"
# The client's JSON line (its stderr, the shim's refusal, may come before or after it).
echo "$out" | python3 -c 'import json,sys; r=json.loads([l for l in sys.stdin if l.startswith("{")][-1]); sys.exit(0 if r["allocated"] == 1 << 30 else 1)' ||
  fail "not held to its 1 GiB quota"
used=$(api http://gpumuxd/v1/tenants/from-outside)
echo "$used" | grep -q '"refused_allocations": 1' || fail "the refusal was not the shim's: $used"
echo "gpumuxd from the image admitted a tenant and held its program to its quota"
