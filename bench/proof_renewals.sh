#!/usr/bin/env bash
# DelegatedLease renewals with verifiable delegation (issue 15) against the real
# server, side by side in one run: --delegation-proof=required, each renewal a
# merge PATCH carrying the member's freshly signed heartbeat and certificate in
# spec.proof, and --delegation-proof=off, the same renewals without one (the
# renewal as it was before issue 15). Rounds alternate the two modes, each on a
# fresh server over the same fixture (bench/fixtures.py: 20 pools x 10 nodes,
# each pool's leader renewing its members, 4 connections, closed loop).
#
#   bench/proof_renewals.sh [BINARY]    (default build/poolcoord-apiserver)
#   env: KEY [ecdsa] or rsa (the members' keys; the CA's is RSA 2048, as kubeadm's)
#        PASSES [25] renewals of every DelegatedLease per measurement
#        ROUNDS [2] measurements of each mode, alternating
#        INSTR [] non-empty: also count instructions per renewal with callgrind
#             (INSTR_PASSES [10] passes), which the machine's load does not move;
#             KEEP [] a directory to keep the callgrind output in (callgrind_annotate)
#        LOADGEN [build/poolcoord-loadgen] PROOF_BENCH [build/poolcoord-proof-bench]
# Prints one JSON line per measurement: {"mode","key","renewals","rate",
# "server_cpu_us","loadgen_cpu_us","status","load",...}: server_cpu_us is the
# server's user + system CPU per renewal over the timed pass (/proc/PID/stat),
# loadgen_cpu_us the load generator's (getrusage), load the 1-minute load
# average at its start; with INSTR, {"mode","key","instructions_per_renewal",
# "in_store_update_per_renewal"} (the second: inside the memory store's Update,
# where its write lock is held).
#
# The proofs are signed before the timed pass (poolcoord-proof-bench sign), as
# members sign on their own nodes: the timed pass spends no CPU on signing.
#
# The DelegatedLeases are created by an admin (system:masters write without a
# proof) in both modes, so both measure renewals only. The server runs with
# --delegation-proof-max-age=1h so the one challenge each pool got with its
# PoolLease stays valid through the run (verification costs the same whatever
# the age), and leaseDurationSeconds 300 is within it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${1:-$ROOT/build/poolcoord-apiserver}
: "${KEY:=ecdsa}" "${PASSES:=25}" "${ROUNDS:=2}" "${INSTR:=}" "${INSTR_PASSES:=10}" "${KEEP:=}"
: "${LOADGEN:=$ROOT/build/poolcoord-loadgen}" "${PROOF_BENCH:=$ROOT/build/poolcoord-proof-bench}"
for b in "$BIN" "$LOADGEN" "$PROOF_BENCH"; do
  [ -x "$b" ] || { echo "no $b: scripts/build.sh poolcoord-apiserver poolcoord-loadgen poolcoord-proof-bench" >&2; exit 2; }
done
[ -z "$INSTR" ] || "$ROOT/scripts/install-deps.sh" --packages valgrind >/dev/null

source "$ROOT/bench/one_server.sh" poolcoord-proof
ADMIN=bench-admin-token
mkdir -p "$WORK/pki"
"$PROOF_BENCH" mint "$WORK/pki" "$FX/keys.tsv" --key="$KEY"
# The DelegatedLeases created by the admin: pools.tsv with the admin's token.
awk -F'\t' -v OFS='\t' -v t="$ADMIN" '{$1 = t; print}' "$FX/pools.tsv" >"$WORK/pools_admin.tsv"
# A renewal with its proof (keys: token, node, pool, heartbeat, certificate).
sed 's|{"spec":{"renewTime":"{{now}}"}}|{"spec":{"renewTime":"{{now}}","proof":{"heartbeat":"{{f3}}","certificate":"{{f4}}"}}}|' \
  "$FX/dl_renew.tmpl" >"$WORK/dl_renew_proof.tmpl"
grep -q '{{f3}}' "$WORK/dl_renew_proof.tmpl" || { echo "dl_renew.tmpl changed shape" >&2; exit 1; }

SEQ=1  # sequence numbers keep growing across rounds (each server starts afresh anyway)

# start MODE [valgrind...]: a fresh server; PoolLeases and DelegatedLeases created.
start() {
  local mode=$1; shift
  PORT=$(free_port)
  rm -rf "$WORK/certs" "$WORK"/callgrind.out.*
  "$@" "$BIN" --secure-port="$PORT" --bind-address=127.0.0.1 --cert-dir="$WORK/certs" \
    --token-auth-file="$FX/tokens.csv" --pool-membership-file="$FX/membership.yaml" \
    --client-ca-file="$WORK/pki/ca.crt" --delegation-proof="$mode" \
    --delegation-proof-max-age=1h >"$WORK/server.log" 2>&1 &
  PID=$!
  for _ in $(seq 900); do
    curl -ksf -o /dev/null "https://127.0.0.1:$PORT/readyz" && break
    sleep 0.2
  done
  curl -ksf -o /dev/null "https://127.0.0.1:$PORT/readyz" || { tail "$WORK/server.log" >&2; exit 1; }
  local tmpls=()
  for n in $(seq 0 9); do tmpls+=(--template="$FX/dl_create_$n.tmpl"); done
  "$LOADGEN" closed --port="$PORT" --connections=4 --keys="$FX/pools.tsv" --template="$FX/pl_create.tmpl" >/dev/null 2>&1
  "$LOADGEN" closed --port="$PORT" --connections=4 --keys="$WORK/pools_admin.tsv" "${tmpls[@]}" >/dev/null 2>&1
}

stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""; }

# proofs PASSES: PASSES rounds of every key with a proof over its pool's
# current challenge, in $WORK/proofs.tsv.
proofs() {
  : >"$WORK/challenges.tsv"
  for pool in $(cut -f2 "$FX/pools.tsv"); do
    curl -ksf -H "Authorization: Bearer $ADMIN" \
      "https://127.0.0.1:$PORT/apis/coordination.pool/v1alpha1/poolleases/$pool" |
      python3 -c 'import json,sys; o=json.load(sys.stdin); c=o.get("status",{}).get("challenges",[]); print(sys.argv[1] + "\t" + (c[0]["value"] if c else "none"))' "$pool" \
      >>"$WORK/challenges.tsv"
  done
  "$PROOF_BENCH" sign "$WORK/pki" "$FX/keys.tsv" "$WORK/challenges.tsv" "$1" "$SEQ" >"$WORK/proofs.tsv"
  SEQ=$((SEQ + $1))
}

# cpu_ms PID: user + system CPU time of a process so far, in ms.
TICK_MS=$((1000 / $(getconf CLK_TCK)))
cpu_ms() { awk -v t="$TICK_MS" '{print ($14 + $15) * t}' "/proc/$1/stat"; }

# renew MODE: one closed-loop pass over proofs.tsv (every line one renewal).
renew() {
  local tmpl=$FX/dl_renew.tmpl
  [ "$1" = required ] && tmpl=$WORK/dl_renew_proof.tmpl
  "$LOADGEN" closed --port="$PORT" --connections=4 --keys="$WORK/proofs.tsv" --template="$tmpl"
}

for round in $(seq "$ROUNDS"); do
  for mode in required off; do
    start "$mode"
    proofs 1; renew "$mode" >/dev/null 2>&1  # warm-up: each lease's first renewal
    proofs "$PASSES"
    load=$(cut -d' ' -f1 /proc/loadavg)
    cpu0=$(cpu_ms "$PID")
    out=$(renew "$mode" 2>"$WORK/loadgen.err") || { cat "$WORK/loadgen.err" >&2; exit 1; }
    server_ms=$(($(cpu_ms "$PID") - cpu0))
    accepted=$(curl -ksf -H "Authorization: Bearer $ADMIN" "https://127.0.0.1:$PORT/metrics" |
               awk '/^poolcoord_delegation_proofs_total\{result="accepted"\}/ {print $2}')
    stop
    python3 -c 'import json,sys; o=json.loads(sys.argv[1]); n=o["completed"]; print(json.dumps({"mode": sys.argv[2], "key": sys.argv[3], "round": int(sys.argv[4]), "renewals": n, "rate": o["rate"], "server_cpu_us": round(float(sys.argv[6]) * 1e3 / n, 1), "loadgen_cpu_us": round(o["cpu_ms"] * 1e3 / n, 1), "p50_us": o.get("p50_us"), "p99_us": o.get("p99_us"), "status": o["status"], "proofs_accepted": float(sys.argv[5] or 0), "load": float(sys.argv[7])}))' \
      "$out" "$mode" "$KEY" "$round" "${accepted:-0}" "$server_ms" "$load"
  done
done

if [ -n "$INSTR" ]; then
  for mode in required off; do
    start "$mode" valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.out.%p"
    proofs 1; renew "$mode" >/dev/null 2>&1
    proofs "$INSTR_PASSES"
    callgrind_control -z "$PID" >/dev/null 2>&1
    renew "$mode" >/dev/null 2>&1
    callgrind_control -d "$PID" >/dev/null 2>&1
    sleep 1
    ir=$(for f in "$WORK"/callgrind.out.*; do grep -h '^summary:' "$f" 2>/dev/null || true; done |
         awk '{s += $2} END {print s + 0}')
    n=$(wc -l <"$WORK/proofs.tsv")
    # Inside the memory store's Update: the atomic step, under the store's one
    # write lock (and the watchers' wake-ups after it), where every other
    # write waits.
    step=$(for f in "$WORK"/callgrind.out.*; do
             [ -s "$f" ] && callgrind_annotate --inclusive=yes "$f" 2>/dev/null |
               grep -m1 'MemoryStore::Update(' || true
           done | awk '{gsub(",", "", $1); s += $1} END {print s + 0}')
    if [ -n "$KEEP" ]; then
      mkdir -p "$KEEP"
      i=0
      for f in "$WORK"/callgrind.out.*; do cp "$f" "$KEEP/$mode-$KEY-$((i++)).callgrind"; done
    fi
    stop
    python3 -c 'import json,sys; n=int(sys.argv[3]); print(json.dumps({"mode": sys.argv[1], "key": sys.argv[2], "renewals": n, "instructions_per_renewal": round(int(sys.argv[4]) / n), "in_store_update_per_renewal": round(int(sys.argv[5]) / n)}))' \
      "$mode" "$KEY" "$n" "$ir" "$step"
  done
fi
