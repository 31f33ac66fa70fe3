#!/usr/bin/env bash
# README command 1: installs the Debian packages, builds, and starts
# poolcoord-apiserver standalone with its in-memory store on https://127.0.0.1:8443,
# writing certificates to .poolcoord/certs and an admin kubeconfig to
# .poolcoord/admin.kubeconfig. Extra arguments go to the server. It also builds
# the kubectl plugin build/kubectl-pool beside the server (README "kubectl pool":
# put build/ on PATH and run `kubectl pool`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh poolcoord-apiserver kubectl-pool
mkdir -p .poolcoord
[ -f .poolcoord/membership.yaml ] || cp scripts/example-membership.yaml .poolcoord/membership.yaml
echo "kubectl pool: PATH=\"$PWD/build:\$PATH\" kubectl pool --kubeconfig .poolcoord/admin.kubeconfig" >&2
exec build/poolcoord-apiserver \
  --secure-port="${POOLCOORD_PORT:-8443}" --bind-address=127.0.0.1 \
  --cert-dir=.poolcoord/certs --write-kubeconfig=.poolcoord/admin.kubeconfig \
  --pool-membership-file=.poolcoord/membership.yaml "$@"
