#!/usr/bin/env bash
# Builds the AdmissionReview fuzz target with clang's libFuzzer + ASan (UBSan is
# left out: RapidJSON 1.1.0's internal stack does null+0 arithmetic it flags) and
# runs it in a bounded smoke mode over the seed corpus.
#   tests/fuzz/run_fuzz.sh                 # smoke: 20,000 runs, at most 60 s
#   RUNS=-1 MAX_TIME=600 tests/fuzz/run_fuzz.sh   # a longer run
# Exit status: non-zero on a build failure or a crash (the reproducer is written
# to $OUT_DIR).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT_DIR="${OUT_DIR:-${TMPDIR:-/tmp}/poolcoord-fuzz}"
RUNS="${RUNS:-20000}"
MAX_TIME="${MAX_TIME:-60}"
CXX="${FUZZ_CXX:-clang++}"
mkdir -p "$OUT_DIR/corpus"

SRCS=(
  tests/fuzz/admission_fuzz.cc
  handlers/admission_handler.cc
  handlers/status_mapping.cc
  election/admission_rules.cc
  election/lease_rules.cc
  election/delegation_proof.cc
  election/heartbeat.cc
  election/node_certificate.cc
  election/membership.cc
  store/api_error.cc
  store/memory_store.cc
  store/object_set.cc
  base/microtime.cc
  base/metrics.cc
  base/quote.cc
  store/object_codec.cc
  store/object.cc
)
source "$ROOT/tests/fuzz/absl_libs.sh"

BIN="$OUT_DIR/admission_fuzz"
cd "$ROOT"
"$CXX" -std=c++20 -O1 -g -fsanitize=fuzzer,address \
  -DRAPIDJSON_HAS_STDSTRING=1 -I"$ROOT" "${SRCS[@]}" \
  -Wl,--start-group "${ABSL_LINK[@]}" -Wl,--end-group -lyaml-cpp -lssl -lcrypto -lpthread -o "$BIN"

# New inputs go to a scratch corpus; the checked-in seeds stay read-only.
"$BIN" -runs="$RUNS" -max_total_time="$MAX_TIME" -max_len=65536 -timeout=10 \
  -dict="$ROOT/tests/fuzz/admission.dict" \
  -rss_limit_mb=2048 -artifact_prefix="$OUT_DIR/" -print_final_stats=1 \
  "$OUT_DIR/corpus" "$ROOT/tests/fuzz/corpus" 2>&1 | tail -n 25
