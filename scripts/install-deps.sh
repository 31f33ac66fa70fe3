#!/usr/bin/env bash
# Installs the Debian 12 packages poolcoord needs. Usage: scripts/install-deps.sh [--test]
# --test adds what the test suite needs (clang's libFuzzer runtime, openssl CLI).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
pkgs=(build-essential cmake g++ pkg-config libboost-dev libboost-test-dev libssl-dev rapidjson-dev
      libabsl-dev libyaml-cpp-dev libcurl4-openssl-dev openssl ca-certificates python3)
if [ "${1:-}" = "--test" ]; then
  pkgs+=(clang libclang-rt-14-dev etcd-server etcd-client golang-go golang-github-masterminds-sprig-dev golang-gopkg-yaml.v3-dev nginx)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Always refresh the package lists first: a new machine's lists may be empty or old.
$SUDO apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if ! command -v kubectl >/dev/null; then
  echo "note: kubectl (1.27 or newer) is not installed; get it from the Kubernetes package repository" >&2
fi
