#!/usr/bin/env bash
# Profiles poolcoord-apiserver the way BENCHMARKS.md reports it:
#   1. perf record (DWARF call graphs) of the server under the closed-loop renewal
#      load of bench/run.sh (wrk, 32 connections), then perf report by self and
#      by children;
#   2. perf record under the webhook load (open loop, 4-8 KB reviews);
#   3. heaptrack of the server while 10,000 PoolLeases + 100,000 DelegatedLeases
#      are created, then heaptrack_print (peak consumers).
# Usage: bench/profile.sh   (env: PROFILE_SECONDS [10], BENCH_BUILD, PROFILE_OUT,
#        PROFILE_ONLY [perf,webhook,heaptrack]). Needs linux-perf and heaptrack
#        (installed here when missing) and a build by bench/run.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_DIR=$ROOT/bench
: "${PROFILE_SECONDS:=10}" "${BENCH_BUILD:=/tmp/build-bench}" "${PROFILE_ONLY:=perf,webhook,heaptrack}"
: "${PROFILE_OUT:=/tmp/poolcoord-profile-$(date -u +%Y%m%dT%H%M%SZ)}"
export BENCH_LUA_DIR=$BENCH_DIR/wrk BENCH_WRK_THREADS=2
SERVER=$BENCH_BUILD/poolcoord-apiserver LOADGEN=$BENCH_BUILD/poolcoord-loadgen
wants() { [[ ",$PROFILE_ONLY," == *",$1,"* ]]; }
log() { printf '[profile %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

"$ROOT/scripts/install-deps.sh" --packages linux-perf heaptrack wrk >/dev/null
[ -x "$SERVER" ] && [ -x "$LOADGEN" ] || { echo "build first: bench/run.sh (or BENCH_BUILD=...)" >&2; exit 2; }

mkdir -p "$PROFILE_OUT"
OUT=$(cd "$PROFILE_OUT" && pwd)
WORK=$(mktemp -d /tmp/poolcoord-profile-work.XXXXXX)
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ready() {
  local i
  for i in $(seq 600); do
    curl -ksf -o /dev/null "https://127.0.0.1:$PORT/readyz" && return 0
    sleep 0.1
  done
  return 1
}

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$WORK/tls.key" -out "$WORK/tls.crt" 2>/dev/null
python3 "$BENCH_DIR/fixtures.py" "$WORK"
server_args() {  # server_args FIXTURE_DIR
  echo "--secure-port=$PORT --bind-address=127.0.0.1 --cert-dir=$WORK/certs --tls-cert-file=$WORK/tls.crt" \
       "--tls-private-key-file=$WORK/tls.key --token-auth-file=$1/tokens.csv" \
       "--pool-membership-file=$1/membership.yaml --forwarder-user=system:serviceaccount:kube-system:poolcoord"
}
populate() {  # populate FIXTURE_DIR
  local tmpls=(--template="$1/pl_create.tmpl") n
  for n in $(seq 0 9); do tmpls+=(--template="$1/dl_create_$n.tmpl"); done
  "$LOADGEN" closed --port="$PORT" --connections=32 --threads=2 --keys="$1/pools.tsv" "${tmpls[@]}" \
    --max-seconds=900 2>>"$OUT/loadgen.log"
}
perf_report() {  # perf_report NAME
  # Self time per function, then inclusive time (children) per function, then by library.
  { perf report -i "$OUT/$1.perf.data" --no-children --stdio --percent-limit 0.5 -g none -F overhead,sym \
      2>/dev/null | grep -v '^#' | grep -v '^$' | cut -c1-220 | head -80 || true; } >"$OUT/$1-self.txt"
  { perf report -i "$OUT/$1.perf.data" --children --stdio --percent-limit 2 -g none -F overhead_children,overhead,sym \
      2>/dev/null | grep -v '^#' | grep -v '^$' | cut -c1-220 | head -150 || true; } >"$OUT/$1-children.txt"
  { perf report -i "$OUT/$1.perf.data" --no-children --stdio -g none --sort dso \
      2>/dev/null | grep -v '^#' | grep -v '^$' | head -20 || true; } >"$OUT/$1-dso.txt"
  log "$1: $OUT/$1-self.txt, $OUT/$1-children.txt"
}

if wants perf || wants webhook; then
  PORT=$(free_port)
  # shellcheck disable=SC2046
  "$SERVER" $(server_args "$WORK/renew") >"$OUT/server.log" 2>&1 &
  SPID=$!; PIDS+=("$SPID")
  wait_ready
  populate "$WORK/renew" >"$OUT/setup.json"
  if wants perf; then
    log "perf: renewals, wrk 32 connections, ${PROFILE_SECONDS}s"
    perf record -F 499 --call-graph dwarf,32768 -p "$SPID" -o "$OUT/renewals.perf.data" \
      -- sleep "$PROFILE_SECONDS" 2>"$OUT/perf-record.log" &
    PERF=$!
    BENCH_KEYS=$WORK/renew/keys.tsv BENCH_RENEW_BASE=$(( $(date -u +%s) + 2 )) \
      wrk -t2 -c32 -d"${PROFILE_SECONDS}s" -s "$BENCH_LUA_DIR/renew.lua" "https://127.0.0.1:$PORT" \
      >"$OUT/renewals-wrk.txt" 2>&1 || true
    wait "$PERF" || true
    perf_report renewals
  fi
  if wants webhook; then
    log "perf: webhook reviews at 3,000/s, ${PROFILE_SECONDS}s"
    perf record -F 499 --call-graph dwarf,32768 -p "$SPID" -o "$OUT/webhook.perf.data" \
      -- sleep "$PROFILE_SECONDS" 2>>"$OUT/perf-record.log" &
    PERF=$!
    "$LOADGEN" open --port="$PORT" --rate=3000 --duration="$PROFILE_SECONDS" --warmup=0 --connections=8 \
      --keys="$WORK/renew/keys.tsv" --template="$WORK/renew/webhook_forwarder_6k.tmpl" \
      --template="$WORK/renew/webhook_kubelet_4k.tmpl" --template="$WORK/renew/webhook_forwarder_8k.tmpl" \
      >"$OUT/webhook-loadgen.json" 2>>"$OUT/loadgen.log" || true
    wait "$PERF" || true
    perf_report webhook
  fi
  kill "$SPID"; wait "$SPID" 2>/dev/null || true
fi

if wants heaptrack; then
  log "heaptrack: 10,000 PoolLeases + 100,000 DelegatedLeases"
  PORT=$(free_port)
  # shellcheck disable=SC2046
  heaptrack -o "$OUT/memory.heaptrack" "$SERVER" $(server_args "$WORK/mem") >"$OUT/heaptrack-server.log" 2>&1 &
  HPID=$!; PIDS+=("$HPID")
  wait_ready
  populate "$WORK/mem" >"$OUT/heaptrack-populate.json"
  sleep 1
  # heaptrack's child is the server: stop it so heaptrack writes its file.
  SPID=$(pgrep -P "$HPID" -f poolcoord-apiserver || true)
  [ -n "$SPID" ] && kill "$SPID"
  wait "$HPID" 2>/dev/null || true
  f=$( (ls "$OUT"/memory.heaptrack*.zst "$OUT"/memory.heaptrack*.gz 2>/dev/null || true) | head -1)
  heaptrack_print -f "$f" --print-peaks 1 --print-allocators 0 --print-temporary 0 --print-leaks 0 \
    --peak-limit 25 --sub-peak-limit 4 >"$OUT/memory-heaptrack.txt" 2>/dev/null || true
  log "heaptrack: $OUT/memory-heaptrack.txt"
fi
log "done: $OUT"
