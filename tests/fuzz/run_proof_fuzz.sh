#!/usr/bin/env bash
# Builds the server's delegation proof fuzz target (issue 15: spec.proof through
# the codec, the decoders and DelegationProofs::Verify) with clang's libFuzzer +
# ASan + UBSan and runs it in a bounded smoke mode over the seed corpus
# (tests/fuzz/proof_corpus).
#   tests/fuzz/run_proof_fuzz.sh                        # smoke: 20,000 runs, at most 60 s
#   RUNS=-1 MAX_TIME=600 tests/fuzz/run_proof_fuzz.sh   # a longer run
# Exit status: non-zero on a build failure or a crash (the reproducer is written
# to $OUT_DIR).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT_DIR="${OUT_DIR:-${TMPDIR:-/tmp}/poolcoord-fuzz}"
RUNS="${RUNS:-20000}"
MAX_TIME="${MAX_TIME:-60}"
CXX="${FUZZ_CXX:-clang++}"
mkdir -p "$OUT_DIR/proof_corpus"

SRCS=(
  tests/fuzz/proof_fuzz.cc
  election/delegation_proof.cc
  election/heartbeat.cc
  election/minted_pki.cc
  election/node_certificate.cc
  store/api_error.cc
  store/object.cc
  store/object_codec.cc
  base/metrics.cc
  base/microtime.cc
  base/quote.cc
)
source "$ROOT/tests/fuzz/absl_libs.sh"

BIN="$OUT_DIR/proof_fuzz"
cd "$ROOT"
# UBSan's pointer-overflow check is left out: RapidJSON 1.1.0's internal stack
# does null+0 arithmetic it flags (as in run_fuzz.sh).
"$CXX" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize=pointer-overflow \
  -fno-sanitize-recover=undefined -DRAPIDJSON_HAS_STDSTRING=1 \
  -I"$ROOT" "${SRCS[@]}" \
  -Wl,--start-group "${ABSL_LINK[@]}" -Wl,--end-group -lssl -lcrypto -lpthread -o "$BIN"

# New inputs go to a scratch corpus; the checked-in seeds stay read-only.
"$BIN" -runs="$RUNS" -max_total_time="$MAX_TIME" -max_len=16384 -timeout=10 \
  -dict="$ROOT/tests/fuzz/proof.dict" \
  -rss_limit_mb=2048 -artifact_prefix="$OUT_DIR/" -print_final_stats=1 \
  "$OUT_DIR/proof_corpus" "$ROOT/tests/fuzz/proof_corpus" 2>&1 | tail -n 25
exit "${PIPESTATUS[0]}"
