#!/usr/bin/env bash
# Instructions per DelegatedLease renewal, counted by callgrind: the renewal of
# bench/run.sh (the pool leader merge-PATCHes spec.renewTime, full rules) against
# each server binary given, on the same fixture. Unlike rates and CPU times this
# does not move with the machine's load, so a change of a few percent shows on a
# shared machine too. LOAD=webhook counts instead the admission reviews of
# bench/run.sh section 2 (the forwarder's 6 KB and 8 KB reviews of a node with a
# live DelegatedLease, and a kubelet's 4 KB one, in turn; all allowed).
#
#   bench/renewal_instructions.sh BINARY [BINARY...]
#   (env: RENEWALS [3000] renewals (or reviews) counted per binary, after one
#         warm-up pass; LOAD [renewal] or webhook;
#         BENCH_SERVER_ARGS [] extra flags for each server (e.g. --watch-cache=false);
#         BENCH_BUILD [/tmp/build-bench] for poolcoord-loadgen; KEEP [] a directory
#         to keep each binary's callgrind output in, for callgrind_annotate)
# Prints one JSON line per binary: {"binary", "load", "renewals" (requests),
# "instructions", "instructions_per_renewal" (per request)}. Needs valgrind
# (installed when missing).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${RENEWALS:=3000}" "${BENCH_BUILD:=/tmp/build-bench}" "${KEEP:=}" "${LOAD:=renewal}"
: "${BENCH_SERVER_ARGS:=}"
case $LOAD in renewal | webhook) ;; *) echo "LOAD is renewal or webhook" >&2; exit 2 ;; esac
LOADGEN=$BENCH_BUILD/poolcoord-loadgen
[ $# -ge 1 ] || { echo "usage: $0 BINARY [BINARY...]" >&2; exit 2; }
[ -x "$LOADGEN" ] || { echo "no $LOADGEN: build poolcoord-loadgen first (bench/run.sh)" >&2; exit 2; }
"$ROOT/scripts/install-deps.sh" --packages valgrind >/dev/null

source "$ROOT/bench/one_server.sh" poolcoord-instr

for bin in "$@"; do
  PORT=$(free_port)
  rm -rf "$WORK/certs" "$WORK"/callgrind.out.*
  valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.out.%p" \
    "$bin" --secure-port="$PORT" --bind-address=127.0.0.1 --cert-dir="$WORK/certs" \
    --token-auth-file="$FX/tokens.csv" --pool-membership-file="$FX/membership.yaml" \
    --forwarder-user=system:serviceaccount:kube-system:poolcoord $BENCH_SERVER_ARGS >"$WORK/server.log" 2>&1 &
  PID=$!
  for i in $(seq 600); do
    curl -ksf -o /dev/null "https://127.0.0.1:$PORT/readyz" && break
    sleep 0.2
  done
  tmpls=(--template="$FX/pl_create.tmpl")
  for n in $(seq 0 9); do tmpls+=(--template="$FX/dl_create_$n.tmpl"); done
  "$LOADGEN" closed --port="$PORT" --connections=4 --keys="$FX/pools.tsv" "${tmpls[@]}" >/dev/null 2>&1
  "$LOADGEN" closed --port="$PORT" --connections=4 --keys="$FX/pools.tsv" --template="$FX/pl_renew.tmpl" >/dev/null 2>&1
  keys=$(wc -l <"$FX/keys.tsv")
  passes=$(( (RENEWALS + keys - 1) / keys ))
  per_pass=1 pass_tmpls=(--template="$FX/dl_renew.tmpl")
  if [ "$LOAD" = webhook ]; then
    per_pass=3 pass_tmpls=(--template="$FX/webhook_forwarder_6k.tmpl" --template="$FX/webhook_kubelet_4k.tmpl"
                           --template="$FX/webhook_forwarder_8k.tmpl")
    passes=$(( (passes + per_pass - 1) / per_pass ))
  fi
  renew() {  # $1 passes over every key, one connection per key group
    local t=()
    for p in $(seq "$1"); do t+=("${pass_tmpls[@]}"); done
    "$LOADGEN" closed --port="$PORT" --connections=4 --keys="$FX/keys.tsv" "${t[@]}" --max-seconds=1800 \
      --count-substring='"allowed":true' >"$WORK/load.json" 2>/dev/null
  }
  renew 1  # warm-up: each lease's first renewal
  callgrind_control -z "$PID" >/dev/null 2>&1
  renew "$passes"
  callgrind_control -d "$PID" >/dev/null 2>&1
  sleep 1
  ir=$(for f in "$WORK"/callgrind.out.*; do grep -h '^summary:' "$f" 2>/dev/null || true; done |
       awk '{s += $2} END {print s + 0}')
  n=$((passes * keys * per_pass))
  if [ "$LOAD" = webhook ]; then  # every review allowed, or the count means nothing
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j.get('matched', 0) == int(sys.argv[2]) else 1)" \
      "$WORK/load.json" "$n" || { echo "not every review was allowed: $(cat "$WORK/load.json")" >&2; exit 1; }
  fi
  if [ -n "$KEEP" ]; then
    mkdir -p "$KEEP"
    i=0
    for f in "$WORK"/callgrind.out.*; do cp "$f" "$KEEP/$(basename "$(dirname "$bin")")-$LOAD-$((i++)).callgrind"; done
  fi
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
  python3 -c "import json,sys; print(json.dumps({'binary': sys.argv[1], 'args': sys.argv[5], 'load': sys.argv[4], 'renewals': int(sys.argv[2]), 'instructions': int(sys.argv[3]), 'instructions_per_renewal': round(int(sys.argv[3]) / int(sys.argv[2]))}))" \
    "$bin" "$n" "$ir" "$LOAD" "$BENCH_SERVER_ARGS"
done
