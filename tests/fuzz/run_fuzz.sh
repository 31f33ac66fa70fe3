#!/usr/bin/env bash
# Builds one of the fuzz targets with clang's libFuzzer and sanitizers, outside
# CMake, and runs it in a bounded smoke mode over its checked-in seed corpus.
#   tests/fuzz/run_fuzz.sh admission    AdmissionReview decoder and the lease rules (ASan)
#   tests/fuzz/run_fuzz.sh heartbeat    the agent's datagram decoder and HeartbeatVerifier
#   tests/fuzz/run_fuzz.sh proof        spec.proof through the codec and DelegationProofs::Verify
#   RUNS=-1 MAX_TIME=600 tests/fuzz/run_fuzz.sh proof    # a longer run
# Defaults: 20,000 runs, at most 60 s. Exit status: non-zero on a build failure
# or a crash (the reproducer is written to $OUT_DIR).
set -euo pipefail

TARGET="${1:?usage: run_fuzz.sh admission|heartbeat|proof}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT_DIR="${OUT_DIR:-${TMPDIR:-/tmp}/poolcoord-fuzz}"
RUNS="${RUNS:-20000}"
MAX_TIME="${MAX_TIME:-60}"
CXX="${FUZZ_CXX:-clang++}"

# What RapidJSON needs: UBSan's pointer-overflow check flags the null+0
# arithmetic of RapidJSON 1.1.0's internal stack, so targets that parse JSON
# leave it out.
RAPIDJSON=(-DRAPIDJSON_HAS_STDSTRING=1)
UBSAN=(-fsanitize=undefined -fno-sanitize-recover=undefined)
# The group's kinds (types and codec), which every object the targets decode uses.
API=(api/types.cc api/codec.cc api/field_error.cc)
case "$TARGET" in
  admission)
    SRCS=(tests/fuzz/admission_fuzz.cc handlers/admission_handler.cc handlers/status_mapping.cc
          election/admission_rules.cc election/lease_rules.cc election/delegation_proof.cc
          election/heartbeat.cc election/node_certificate.cc election/membership.cc
          store/api_error.cc store/memory_store.cc store/object_set.cc store/object_codec.cc
          store/object.cc store/managed_fields_entry.cc store/store.cc "${API[@]}"
          base/microtime.cc base/metrics.cc base/quote.cc base/k8s_names.cc)
    FLAGS=("${RAPIDJSON[@]}")  # ASan only: UBSan trips over RapidJSON's stack here
    LIBS=(-lyaml-cpp)
    MAX_LEN=65536 DICT=admission.dict CORPUS=corpus ;;
  heartbeat)
    SRCS=(tests/fuzz/heartbeat_fuzz.cc election/heartbeat.cc agent/heartbeat_verifier.cc
          agent/verification_memo.cc election/minted_pki.cc election/node_certificate.cc)
    FLAGS=("${UBSAN[@]}")
    LIBS=()
    MAX_LEN=8192 DICT=heartbeat.dict CORPUS=heartbeat_corpus ;;
  proof)
    SRCS=(tests/fuzz/proof_fuzz.cc election/delegation_proof.cc election/heartbeat.cc
          election/minted_pki.cc election/node_certificate.cc store/api_error.cc store/object.cc
          store/managed_fields_entry.cc store/object_codec.cc "${API[@]}" base/metrics.cc
          base/microtime.cc base/quote.cc)
    FLAGS=("${UBSAN[@]}" -fno-sanitize=pointer-overflow "${RAPIDJSON[@]}")
    LIBS=()
    MAX_LEN=16384 DICT=proof.dict CORPUS=proof_corpus ;;
  *) echo "run_fuzz.sh: unknown target \"$TARGET\" (admission, heartbeat or proof)" >&2; exit 2 ;;
esac
source "$ROOT/tests/fuzz/absl_libs.sh"

mkdir -p "$OUT_DIR/$CORPUS"
BIN="$OUT_DIR/${TARGET}_fuzz"
cd "$ROOT"
"$CXX" -std=c++20 -O1 -g -fsanitize=fuzzer,address "${FLAGS[@]}" -I"$ROOT" "${SRCS[@]}" \
  -Wl,--start-group "${ABSL_LINK[@]}" -Wl,--end-group "${LIBS[@]}" -lssl -lcrypto -lpthread \
  -o "$BIN"

# New inputs go to a scratch corpus; the checked-in seeds stay read-only.
"$BIN" -runs="$RUNS" -max_total_time="$MAX_TIME" -max_len="$MAX_LEN" -timeout=10 \
  -dict="$ROOT/tests/fuzz/$DICT" \
  -rss_limit_mb=2048 -artifact_prefix="$OUT_DIR/" -print_final_stats=1 \
  "$OUT_DIR/$CORPUS" "$ROOT/tests/fuzz/$CORPUS" 2>&1 | tail -n 25
exit "${PIPESTATUS[0]}"
