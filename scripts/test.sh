#!/usr/bin/env bash
# README command 2: installs what the tests need, builds, and runs every test
# (Boost.Test units, end-to-end tests with the real server and kubectl, the
# bounded fuzz smoke run) through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
scripts/build.sh
cd build
status=0
ctest --output-on-failure -j2 "$@" || status=$?
# ctest shows a skipped test's output nowhere; its reason is in the log.
if grep -q "^SKIP" Testing/Temporary/LastTest.log 2>/dev/null; then
  echo "Skipped, and why:"
  grep -h "^SKIP" Testing/Temporary/LastTest.log | sort -u | sed 's/^/  /'
fi
exit "$status"
