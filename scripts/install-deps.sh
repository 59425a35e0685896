#!/usr/bin/env bash
# Installs what gpumux needs to build and test on Debian 12, and nothing that is already there.
set -euo pipefail
packages=(g++ cmake ninja-build pkg-config libyaml-cpp-dev libcli11-dev nlohmann-json3-dev libfmt-dev
          libsimdjson-dev libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev prometheus clang-14 libclang-rt-14-dev
          slurm-wlm munge libslurm-dev libgrpc++-dev libprotobuf-dev protobuf-compiler
          protobuf-compiler-grpc libcurl4-openssl-dev openssl debootstrap podman runc)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
