#!/usr/bin/env bash
# README command 2: installs what the tests need, builds, and runs every test
# (Boost.Test units, end-to-end tests with the real server and kubectl, the
# bounded fuzz smoke run) through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
scripts/build.sh
cd build
ctest --output-on-failure -j2 "$@"
