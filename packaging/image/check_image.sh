#!/usr/bin/env bash
# Builds gpumux's image from build folder $1 (build.sh) and runs it as deploy/kubernetes's DaemonSet
# does: its init container (`gpumux install-shim`) puts the shim into a node folder, then gpumuxd
# runs privileged in the node's PID namespace with the node's runtime and state folders mounted at
# their own paths, handing tenants that folder (--tenant-libraries). From outside the container it
# admits a tenant through gpumuxd's socket; then a program of another image — Debian 11's Python
# (glibc 2.31) — runs in a container of its own (its own PID namespace, as a pod's) with only what
# Allocate mounts (the runtime folder, the shim's folder) and the environment gpumuxd answered,
# and must be held to its 1 GiB quota by the shim. Exits 77 saying why where podman, root,
# debootstrap or the mirror is missing. Run by ctest (package.image).
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

# A tenant's image of another distribution: Debian 11 with its Python (made once, as OldImageTest's).
tenant_image=localhost/gpumux-check-tenant:bullseye
if ! "${podman[@]}" image exists "$tenant_image"; then
  set +e
  root=$("$here/../debian_root.sh" "$build" bullseye python3 2>&1)
  code=$?
  set -e
  [ "$code" = 77 ] && skip "no Debian 11 root for the tenant's image: $root"
  [ "$code" = 0 ] || fail "$root"
  tar -C "$root" --exclude=./.complete -c . | "${podman[@]}" import - "$tenant_image" > /dev/null 2>&1 ||
    fail "podman import of the Debian 11 root"
fi

work=$(mktemp -d /tmp/gpumux-image-XXXXXX)
name=gpumuxd-check-$$
cleanup() { "${podman[@]}" rm -f "$name" > /dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
# The node's folders, mounted at their own paths as the DaemonSet's hostPath volumes are.
run=$work/run state=$work/state
libraries=$state/lib
mkdir -p "$run" "$state"
node_folders=(-v "$run:$run" -v "$state:$state")
# The init container.
"${podman[@]}" run --rm "${limits[@]}" "${node_folders[@]}" --entrypoint /usr/bin/gpumux "$image" \
  install-shim "$libraries" || fail "gpumux install-shim"
[ -f "$libraries/libgpumux.so" ] || fail "no shim in the node folder $libraries"
# gpumuxd: privileged, hostPID, the node's folders.
"${podman[@]}" run -d --name "$name" --network host --pid host --privileged "${limits[@]}" \
  "${node_folders[@]}" "$image" --sim H100 --socket "$run/gpumuxd.sock" --runtime-dir "$run" \
  --state "$state/state.db" --tenant-libraries "$libraries" > /dev/null
api() { curl -sS --max-time 10 --unix-socket "$run/gpumuxd.sock" "$@"; }
for _ in $(seq 100); do api http://gpumuxd/v1/health > /dev/null 2>&1 && break; sleep 0.1; done
api http://gpumuxd/v1/health > /dev/null || fail "gpumuxd in the container did not answer on its socket"

admitted=$(api -X POST -d '{"id": "from-outside", "gpu": 0, "memory": "1GiB"}' http://gpumuxd/v1/tenants)
echo "$admitted" | python3 -c 'import json,sys; [print("%s=%s" % kv) for kv in json.load(sys.stdin)["env"].items()]' \
  > "$work/tenant.env" || fail "admission: $admitted"
grep -q "^LD_PRELOAD=$libraries/libgpumux.so" "$work/tenant.env" ||
  fail "the tenant is not handed the node folder's shim: $(grep LD_PRELOAD "$work/tenant.env")"
# The tenant's container: its own PID namespace, the runtime folder and the shim's folder (read
# only) as Allocate mounts them, and its program.
out=$("${podman[@]}" run --rm --network host "${limits[@]}" -v "$run:$run" \
  -v "$libraries:$libraries:ro" -v "$here/../../tests/node/old_root_alloc.py:/alloc.py:ro" \
  --env-file "$work/tenant.env" "$tenant_image" python3 /alloc.py 2>&1) ||
  fail "the tenant's program: $out"
echo "tenant's program: $out"
# The program's JSON line (its stderr, the shim's refusal, may come before or after it).
echo "$out" | python3 -c 'import json,sys; r=json.loads([l for l in sys.stdin if l.startswith("{")][-1]); sys.exit(0 if r["allocated"] == 1 << 30 and r["glibc"] == "2.31" else 1)' ||
  fail "not held to its 1 GiB quota under glibc 2.31"
used=$(api http://gpumuxd/v1/tenants/from-outside)
echo "$used" | grep -q '"refused_allocations": 1' || fail "the refusal was not the shim's: $used"
echo "gpumuxd from the image, its shim installed into a node folder, held a Debian 11 tenant's program to its quota"
