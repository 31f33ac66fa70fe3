#!/usr/bin/env bash
# Builds the agent's datagram fuzz target (decoder + HeartbeatVerifier) with
# clang's libFuzzer + ASan + UBSan and runs it in a bounded smoke mode over the
# seed corpus (tests/fuzz/heartbeat_corpus).
#   tests/fuzz/run_heartbeat_fuzz.sh                 # smoke: 20,000 runs, at most 60 s
#   RUNS=-1 MAX_TIME=600 tests/fuzz/run_heartbeat_fuzz.sh   # a longer run
# Exit status: non-zero on a build failure or a crash (the reproducer is written
# to $OUT_DIR).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT_DIR="${OUT_DIR:-${TMPDIR:-/tmp}/poolcoord-fuzz}"
RUNS="${RUNS:-20000}"
MAX_TIME="${MAX_TIME:-60}"
CXX="${FUZZ_CXX:-clang++}"
mkdir -p "$OUT_DIR/heartbeat_corpus"

SRCS=(
  tests/fuzz/heartbeat_fuzz.cc
  election/heartbeat.cc
  agent/heartbeat_verifier.cc
  agent/verification_memo.cc
  election/minted_pki.cc
  election/node_certificate.cc
)
source "$ROOT/tests/fuzz/absl_libs.sh"

BIN="$OUT_DIR/heartbeat_fuzz"
cd "$ROOT"
"$CXX" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$ROOT" "${SRCS[@]}" \
  -Wl,--start-group "${ABSL_LINK[@]}" -Wl,--end-group -lssl -lcrypto -lpthread -o "$BIN"

# New inputs go to a scratch corpus; the checked-in seeds stay read-only.
"$BIN" -runs="$RUNS" -max_total_time="$MAX_TIME" -max_len=8192 -timeout=10 \
  -dict="$ROOT/tests/fuzz/heartbeat.dict" \
  -rss_limit_mb=2048 -artifact_prefix="$OUT_DIR/" -print_final_stats=1 \
  "$OUT_DIR/heartbeat_corpus" "$ROOT/tests/fuzz/heartbeat_corpus" 2>&1 | tail -n 25
exit "${PIPESTATUS[0]}"
