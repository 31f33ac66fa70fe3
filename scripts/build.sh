#!/usr/bin/env bash
# Configures and builds into build/ (Release with debug info). With arguments,
# builds only those targets (e.g. `scripts/build.sh poolcoord-apiserver`).
# Uses ccache when it is installed (it is optional).
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
if [ $# -gt 0 ]; then
  for t in "$@"; do cmake --build build -j"$(nproc)" --target "$t"; done
else
  cmake --build build -j"$(nproc)"
fi
