#!/usr/bin/env bash
# The benchmark suite: poolcoord-apiserver side by side with its peers (etcd 3.4,
# nginx, a Boost.Beast hello-world), all on 127.0.0.1, in one run.
#
#   bench/run.sh                 # everything, ~10 minutes; results in $BENCH_OUT
#   BENCH_SECONDS=5 BENCH_SIM_SECONDS=60 bench/run.sh     # shorter
#   BENCH_ONLY=renewals,webhook bench/run.sh              # a subset
#   BENCH_PROFILE=1 bench/run.sh  # also perf (renewals) and heaptrack (memory)
#   BENCH_BASELINE=/path/to/older/poolcoord-apiserver BENCH_ONLY=renewals bench/run.sh
#                                 # renewals before/after a change, in the same run
#
# Environment (defaults in brackets):
#   BENCH_SECONDS [10]       length of each measured run
#   BENCH_WARMUP [2]         open-loop warm-up, not measured
#   BENCH_ROUNDS [2]         rounds of the closed-loop comparison (alternating peers)
#   BENCH_CONNECTIONS [32]   connections of the closed-loop runs
#   BENCH_THREADS [2]        wrk threads
#   BENCH_RATE [10000]       renewals/s of the fixed-rate run
#   BENCH_WEBHOOK_RATE [5000]  reviews/s of the webhook run
#   BENCH_WEBHOOK_PASSES [8]   passes over the keys in each webhook-etcd3 run
#   BENCH_WATCHERS [1000]    watchers of the fan-out run
#   BENCH_WATCH_RATE [20]    writes/s of the fan-out run
#   BENCH_MEM_POOLS [10000]  pools of the memory run (x BENCH_NODES nodes each)
#   BENCH_NODES [10]
#   BENCH_SIM_SECONDS [120]  simulator run (0: skip)
#   BENCH_STALLED [200]      clients that send half a request header and stall
#   BENCH_IDLE [2000]        idle keep-alive TLS connections (RSS open and after close)
#   BENCH_AGENT_SECONDS [60] each run of one agent under 500 peers (after 10 s of warm-up)
#   BENCH_ONLY [renewals,webhook,fanout,watchcache,memory,connections,sim,agent]
#                            (webhook-etcd3, the webhook on the etcd3 store, only when named)
#   BENCH_BUILD [/tmp/build-bench]  CMake build directory
#   BENCH_OUT [/tmp/poolcoord-bench-<date>]  results (results.md, *.json, logs)
#   BENCH_SKIP_INSTALL / BENCH_SKIP_BUILD [0]
#   BENCH_WC_STORES [etcd3 memory]  stores of the watch-cache section
#   BENCH_WC_CACHE [false true]      --watch-cache values of the watch-cache section
#   BENCH_WC_COALESCE_US [0] the fan-out client's pause before each epoll_wait after a
#                            busy one (loadgen --watcher-coalesce-us: fewer wake-ups,
#                            at most this much added to each measured latency)
#   BENCH_WC_PERF [0]        1: perf record (flat, 999 Hz) of the server and of the load
#                            generator during each watch-cache run at BENCH_WATCHERS
#   BENCH_SERVER_ARGS []     extra flags for every server start (e.g. --watch-cache=false)
#   BENCH_BASELINE []        another poolcoord-apiserver binary: its renewals run beside
#                            ours in every closed-loop round (order alternating) and at
#                            the fixed rate, on a fixture of its own (BENCH_SERVER_ARGS
#                            go to it as well); in webhook-etcd3 its reviews beside ours
#   BENCH_PEERS [1]          0: closed-loop rounds without etcd, nginx and hello-world
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_DIR=$ROOT/bench
: "${BENCH_SECONDS:=10}" "${BENCH_WARMUP:=2}" "${BENCH_ROUNDS:=2}" "${BENCH_CONNECTIONS:=32}"
: "${BENCH_THREADS:=2}" "${BENCH_RATE:=10000}" "${BENCH_WEBHOOK_RATE:=5000}"
: "${BENCH_WATCHERS:=1000}" "${BENCH_WATCH_RATE:=20}" "${BENCH_MEM_POOLS:=10000}" "${BENCH_NODES:=10}"
: "${BENCH_SIM_SECONDS:=120}" "${BENCH_ONLY:=renewals,webhook,fanout,watchcache,memory,connections,sim,agent}"
: "${BENCH_STALLED:=200}" "${BENCH_IDLE:=2000}" "${BENCH_AGENT_SECONDS:=60}"
: "${BENCH_BUILD:=/tmp/build-bench}" "${BENCH_OUT:=/tmp/poolcoord-bench-$(date -u +%Y%m%dT%H%M%SZ)}"
: "${BENCH_SKIP_INSTALL:=0}" "${BENCH_SKIP_BUILD:=0}" "${BENCH_PROFILE:=0}"
: "${BENCH_BASELINE:=}" "${BENCH_PEERS:=1}"
: "${BENCH_WC_STORES:=etcd3 memory}" "${BENCH_WC_CACHE:=false true}" "${BENCH_WC_PERF:=0}"
: "${BENCH_WC_COALESCE_US:=0}" "${BENCH_WEBHOOK_PASSES:=8}"
export BENCH_LUA_DIR=$BENCH_DIR/wrk BENCH_WRK_THREADS=$BENCH_THREADS

log() { printf '[bench %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
wants() { [[ ",$BENCH_ONLY," == *",$1,"* ]]; }

# ---------------------------------------------------------------- install, build
install_deps() {
  local pkgs=(nginx wrk etcd-server curl openssl python3)
  [ "$BENCH_PROFILE" = 1 ] && pkgs+=(linux-perf heaptrack)
  "$ROOT/scripts/install-deps.sh" --packages "${pkgs[@]}" >/dev/null
}
[ "$BENCH_SKIP_INSTALL" = 1 ] || install_deps

targets=(poolcoord-apiserver poolcoord-loadgen poolcoord-hello-tls)
[ -f "$ROOT/agent/sim/CMakeLists.txt" ] && targets+=(poolcoord-sim)
[ -f "$BENCH_DIR/agent_bench.cc" ] && targets+=(poolcoord-agent-bench)
if [ "$BENCH_SKIP_BUILD" != 1 ]; then
  log "building ${targets[*]} in $BENCH_BUILD"
  cmake -S "$ROOT" -B "$BENCH_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BENCH_BUILD" -j2 --target "${targets[@]}" >"$BENCH_BUILD/bench-build.log" 2>&1 ||
    { tail -30 "$BENCH_BUILD/bench-build.log"; exit 1; }
fi
SERVER=$BENCH_BUILD/poolcoord-apiserver LOADGEN=$BENCH_BUILD/poolcoord-loadgen HELLO=$BENCH_BUILD/poolcoord-hello-tls
SIM=$BENCH_BUILD/poolcoord-sim

mkdir -p "$BENCH_OUT"
OUT=$(cd "$BENCH_OUT" && pwd)
WORK=$(mktemp -d /tmp/poolcoord-bench-work.XXXXXX)
SHM=$(mktemp -d /dev/shm/poolcoord-bench-etcd.XXXXXX)
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
log "results in $OUT (work dir $WORK)"

# Every process we start is recorded and stopped on exit, by its own pid.
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$SHM" "$WORK"
}
trap cleanup EXIT
stop_pid() {  # stop_pid PID: TERM, then wait (KILL after 15 s)
  local pid=$1 i
  kill "$pid" 2>/dev/null || return 0
  for i in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_https() {  # wait_https URL PID NAME
  local i
  for i in $(seq 300); do
    kill -0 "$2" 2>/dev/null || { log "$3 exited"; return 1; }
    curl -ksf -o /dev/null "$1" && return 0
    sleep 0.1
  done
  log "$3 not ready at $1"; return 1
}
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
# Context switches (voluntary + involuntary) of every thread of a process.
ctxt_switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {n += $2} END {print n + 0}'; }
hwm_kib() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }
last_json() { grep '^{' "$1" | tail -1; }

# One certificate (ECDSA P-256, as the server's own PKI makes) for every TLS server.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$WORK/tls.key" -out "$WORK/tls.crt" 2>/dev/null
python3 "$BENCH_DIR/fixtures.py" "$WORK" --mem-pools "$BENCH_MEM_POOLS" --nodes "$BENCH_NODES"
FORWARDER_USER=system:serviceaccount:kube-system:poolcoord
ADMIN_TOKEN=bench-admin-token

SERVER_PID="" SERVER_PORT=""
start_server() {  # start_server NAME FIXTURE_DIR [extra args...]: sets SERVER_PID, SERVER_PORT
  local name=$1 dir=$2 bin=${SERVER_BINARY:-$SERVER}; shift 2
  SERVER_PORT=$(free_port)
  local args=("--secure-port=$SERVER_PORT" --bind-address=127.0.0.1 "--cert-dir=$WORK/$name-certs"
              "--tls-cert-file=$WORK/tls.crt" "--tls-private-key-file=$WORK/tls.key"
              "--token-auth-file=$dir/tokens.csv" "--pool-membership-file=$dir/membership.yaml"
              "--forwarder-user=$FORWARDER_USER")
  # Proofs optional where the binary has the flag: a BENCH_BASELINE from before
  # issue 15 does not, and refuses to start with it.
  if "$bin" --help 2>&1 | grep -q -- "--delegation-proof "; then args+=(--delegation-proof=optional); fi
  args+=(${BENCH_SERVER_ARGS:-} "$@")
  echo "$bin ${args[*]}" >"$OUT/$name.cmd"
  "$bin" "${args[@]}" >"$OUT/$name.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  wait_https "https://127.0.0.1:$SERVER_PORT/readyz" "$SERVER_PID" "$name"
}
# A one-member etcd on plain HTTP, data on /dev/shm, log in $OUT/etcd-NAME.log.
ETCD1_PORT="" ETCD1_PID=""
start_etcd() {  # start_etcd NAME: sets ETCD1_PORT, ETCD1_PID
  local peer
  ETCD1_PORT=$(free_port) peer=$(free_port)
  etcd --name "$1" --data-dir "$SHM/$1" --listen-client-urls "http://127.0.0.1:$ETCD1_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD1_PORT" --listen-peer-urls "http://127.0.0.1:$peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "$1=http://127.0.0.1:$peer" --log-level error >"$OUT/etcd-$1.log" 2>&1 &
  ETCD1_PID=$!; PIDS+=("$ETCD1_PID")
  wait_https "http://127.0.0.1:$ETCD1_PORT/health" "$ETCD1_PID" etcd
}
# Every pool leader renews its PoolLease (keeps the terms alive between phases).
renew_poolleases() {  # renew_poolleases FIXTURE_DIR [PORT]
  "$LOADGEN" closed --port="${2:-$SERVER_PORT}" --connections=16 --keys="$1/pools.tsv" \
    --template="$1/pl_renew.tmpl" >"$WORK/plrenew.json" 2>>"$OUT/loadgen.log"
}
populate() {  # populate FIXTURE_DIR CONNECTIONS OUT_JSON: every PoolLease, then its DelegatedLeases
  local tmpls=(--template="$1/pl_create.tmpl") n
  for n in $(seq 0 $((BENCH_NODES - 1))); do tmpls+=(--template="$1/dl_create_$n.tmpl"); done
  "$LOADGEN" closed --port="$SERVER_PORT" --connections="$2" --threads=2 --keys="$1/pools.tsv" \
    "${tmpls[@]}" --max-seconds=600 >"$3" 2>>"$OUT/loadgen.log"
}
# CPU time (ms, user + system) of a process and its children (nginx's workers).
cpu_ms() {  # cpu_ms PID
  local tick total=0 p
  tick=$(getconf CLK_TCK)
  for p in "$1" $(pgrep -P "$1" 2>/dev/null); do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo $((total * 1000 / tick))
}
# User and system CPU time (ms) of one process: "USER SYS".
cpu_split_ms() {  # cpu_split_ms PID
  local tick
  tick=$(getconf CLK_TCK)
  awk -v t="$tick" '{print int($14 * 1000 / t), int($15 * 1000 / t)}' "/proc/$1/stat" 2>/dev/null || echo "0 0"
}
# Adds the server's CPU per answered request to a run's JSON: unlike rates and
# latencies, it does not depend on how much of the 2 cores the client took.
add_cpu_per_req() {  # add_cpu_per_req JSON CPU_MS COUNT_KEY...: the first count key present divides
  python3 - "$@" <<'PY' || true
import json, sys
path, cpu_ms, keys = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
j = json.load(open(path))
n = next((j[k] for k in keys if j.get(k)), None)
if n:
    j["server_cpu_ms"] = cpu_ms
    j["server_cpu_us_per_req"] = round(cpu_ms * 1000.0 / n, 1)
json.dump(j, open(path, "w"))
PY
}
# The server's context switches per answered request and the load average at the
# start and end of a run (the machine may be shared: say so beside the figures).
# Also the server's CPU split into user and system time (us per request).
add_run_context() {  # add_run_context JSON CTXT_SWITCHES LOAD_START LOAD_END USER_MS SYS_MS
  python3 - "$@" <<'PY' || true
import json, sys
path, ctxt, load0, load1 = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
user_ms, sys_ms = int(sys.argv[5]), int(sys.argv[6])
j = json.load(open(path))
if j.get("requests"):
    j["server_ctxt_switches_per_req"] = round(ctxt / j["requests"], 3)
    j["server_user_us_per_req"] = round(user_ms * 1000.0 / j["requests"], 1)
    j["server_sys_us_per_req"] = round(sys_ms * 1000.0 / j["requests"], 1)
j["loadavg_start"], j["loadavg_end"] = load0, load1
json.dump(j, open(path, "w"))
PY
}
wrk_run() {  # wrk_run NAME URL SCRIPT [SERVER_PID]: one closed-loop run, JSON to $OUT/NAME.json
  local before=0 after=0 cs_before=0 cs_after=0 load0 load1 split0=(0 0) split1=(0 0)
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  if [ -n "${4:-}" ]; then
    before=$(cpu_ms "$4") cs_before=$(ctxt_switches "$4")
    read -ra split0 < <(cpu_split_ms "$4")
  fi
  wrk -t"$BENCH_THREADS" -c"$BENCH_CONNECTIONS" -d"${BENCH_SECONDS}s" --timeout 10s -s "$3" "$2" \
    >"$OUT/$1.txt" 2>&1 || true
  if [ -n "${4:-}" ]; then
    after=$(cpu_ms "$4") cs_after=$(ctxt_switches "$4")
    read -ra split1 < <(cpu_split_ms "$4")
  fi
  load1=$(cut -d' ' -f1-3 /proc/loadavg)
  last_json "$OUT/$1.txt" >"$OUT/$1.json" || echo '{}' >"$OUT/$1.json"
  [ -n "${4:-}" ] && add_cpu_per_req "$OUT/$1.json" "$((after - before))" requests
  [ -n "${4:-}" ] && add_run_context "$OUT/$1.json" "$((cs_after - cs_before))" "$load0" "$load1" \
    "$((split1[0] - split0[0]))" "$((split1[1] - split0[1]))"
  log "$1: $(cat "$OUT/$1.json")"
}

{
  echo "{\"date\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",\"nproc\":$(nproc),"
  echo "\"cpu\":\"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')\","
  echo "\"mem_kib\":$(awk '/MemTotal/ {print $2}' /proc/meminfo),\"kernel\":\"$(uname -r)\","
  echo "\"loadavg_start\":\"$(cut -d' ' -f1-3 /proc/loadavg)\","
  echo "\"git\":\"$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)\","
  echo "\"etcd\":\"$(etcd --version 2>/dev/null | head -1 | awk '{print $3}')\","
  echo "\"nginx\":\"$(nginx -v 2>&1 | cut -d/ -f2)\",\"wrk\":\"$(wrk -v 2>&1 | head -1 | awk '{print $2}')\","
  echo "\"settings\":{\"seconds\":$BENCH_SECONDS,\"warmup\":$BENCH_WARMUP,\"rounds\":$BENCH_ROUNDS,"
  echo "\"connections\":$BENCH_CONNECTIONS,\"threads\":$BENCH_THREADS,\"rate\":$BENCH_RATE,"
  echo "\"webhook_rate\":$BENCH_WEBHOOK_RATE,\"watchers\":$BENCH_WATCHERS,\"watch_rate\":$BENCH_WATCH_RATE,"
  echo "\"mem_pools\":$BENCH_MEM_POOLS,\"nodes\":$BENCH_NODES,\"sim_seconds\":$BENCH_SIM_SECONDS}}"
} >"$OUT/machine.json"

# ---------------------------------------------------------------- 1. renewals and peers
RENEW=$WORK/renew
if wants renewals || wants webhook || wants fanout; then
  log "server for renewals/webhook/fan-out: 100 pools x $BENCH_NODES nodes, 1 DelegatedLease per node"
  start_server server "$RENEW"
  populate "$RENEW" 16 "$OUT/renew-setup.json"
  log "setup: $(cat "$OUT/renew-setup.json")"
  curl -ksf -H "Authorization: Bearer $ADMIN_TOKEN" \
    "https://127.0.0.1:$SERVER_PORT/apis/coordination.pool/v1alpha1/delegatedleases/p0-n1" >"$WORK/dl.json"
  DL_BYTES=$(wc -c <"$WORK/dl.json")
  echo "{\"delegatedlease_json_bytes\":$DL_BYTES}" >"$OUT/dl-size.json"
fi
BASE_PID="" BASE_PORT=""
if wants renewals && [ -n "$BENCH_BASELINE" ]; then
  log "baseline server $BENCH_BASELINE on the same fixture"
  main_pid=$SERVER_PID main_port=$SERVER_PORT
  SERVER_BINARY=$BENCH_BASELINE start_server baseline "$RENEW"
  BASE_PID=$SERVER_PID BASE_PORT=$SERVER_PORT
  populate "$RENEW" 16 "$OUT/baseline-setup.json"
  SERVER_PID=$main_pid SERVER_PORT=$main_port
  echo "{\"binary\":\"$BENCH_BASELINE\"}" >"$OUT/baseline.json"
fi

if wants renewals; then
  # Peers: nginx, the Beast hello-world, etcd (HTTPS and plain HTTP client URLs).
  NGINX_PORT=$(free_port) HELLO_PORT=$(free_port) ETCD_TLS_PORT=$(free_port) ETCD_PORT=$(free_port)
  ETCD_PEER_PORT=$(free_port)
  mkdir -p "$WORK/nginx"
  sed -e "s#@PORT@#$NGINX_PORT#; s#@CERT@#$WORK/tls.crt#; s#@KEY@#$WORK/tls.key#; s#@DIR@#$WORK/nginx#g" \
    "$BENCH_DIR/nginx.conf.in" >"$WORK/nginx/nginx.conf"
  nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log" >"$OUT/nginx.log" 2>&1 &
  NGINX_PID=$!; PIDS+=("$NGINX_PID")
  "$HELLO" --port="$HELLO_PORT" --cert="$WORK/tls.crt" --key="$WORK/tls.key" >"$OUT/hello.log" 2>&1 &
  HELLO_PID=$!; PIDS+=("$HELLO_PID")
  etcd --name bench --data-dir "$SHM/data" \
    --listen-client-urls "https://127.0.0.1:$ETCD_TLS_PORT,http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "bench=http://127.0.0.1:$ETCD_PEER_PORT" \
    --cert-file "$WORK/tls.crt" --key-file "$WORK/tls.key" --log-level error >"$OUT/etcd.log" 2>&1 &
  ETCD_PID=$!; PIDS+=("$ETCD_PID")
  wait_https "https://127.0.0.1:$NGINX_PORT/" "$NGINX_PID" nginx
  wait_https "https://127.0.0.1:$HELLO_PORT/" "$HELLO_PID" hello
  wait_https "https://127.0.0.1:$ETCD_TLS_PORT/health" "$ETCD_PID" etcd
  python3 "$BENCH_DIR/fixtures.py" "$WORK" --etcd-value-bytes "$DL_BYTES"
  export BENCH_ETCD_BODIES=$WORK/etcd_bodies.txt BENCH_KEYS=$RENEW/keys.tsv

  renewals_ours() {
    renew_poolleases "$RENEW"
    BENCH_RENEW_BASE=$(( $(date -u +%s) + 2 )) wrk_run "r$round-renewals" "https://127.0.0.1:$SERVER_PORT" \
      "$BENCH_LUA_DIR/renew.lua" "$SERVER_PID"
  }
  renewals_baseline() {
    renew_poolleases "$RENEW" "$BASE_PORT"
    BENCH_RENEW_BASE=$(( $(date -u +%s) + 2 )) wrk_run "r$round-renewals-baseline" \
      "https://127.0.0.1:$BASE_PORT" "$BENCH_LUA_DIR/renew.lua" "$BASE_PID"
  }
  for round in $(seq "$BENCH_ROUNDS"); do
    log "round $round of $BENCH_ROUNDS (closed loop, $BENCH_CONNECTIONS connections, ${BENCH_SECONDS}s each)"
    if [ -n "$BASE_PID" ] && [ $((round % 2)) = 0 ]; then
      renewals_baseline
      renewals_ours
    else
      renewals_ours
      [ -z "$BASE_PID" ] || renewals_baseline
    fi
    [ "$BENCH_PEERS" = 1 ] || continue
    wrk_run "r$round-etcd-https" "https://127.0.0.1:$ETCD_TLS_PORT" "$BENCH_LUA_DIR/etcd_put.lua" "$ETCD_PID"
    wrk_run "r$round-nginx" "https://127.0.0.1:$NGINX_PORT" "$BENCH_LUA_DIR/get.lua" "$NGINX_PID"
    wrk_run "r$round-etcd-http" "http://127.0.0.1:$ETCD_PORT" "$BENCH_LUA_DIR/etcd_put.lua" "$ETCD_PID"
    wrk_run "r$round-hello" "https://127.0.0.1:$HELLO_PORT" "$BENCH_LUA_DIR/get.lua" "$HELLO_PID"
  done
  stop_pid "$NGINX_PID"; stop_pid "$ETCD_PID"

  log "renewals at a fixed ${BENCH_RATE}/s (open loop, $BENCH_CONNECTIONS connections)"
  fixed_rate() {  # fixed_rate PORT OUT_JSON [SERVER_PID]: renewals at BENCH_RATE, CPU per request
    local cpu0=""
    [ -z "${3:-}" ] || cpu0=$(cpu_ms "$3")
    "$LOADGEN" open --port="$1" --rate="$BENCH_RATE" --duration="$BENCH_SECONDS" \
      --warmup="$BENCH_WARMUP" --connections="$BENCH_CONNECTIONS" --keys="$RENEW/keys.tsv" \
      --template="$RENEW/dl_renew.tmpl" >"$2" 2>>"$OUT/loadgen.log" || true
    [ -z "$cpu0" ] || add_cpu_per_req "$2" "$(($(cpu_ms "$3") - cpu0))" completed_with_warmup completed
  }
  renew_poolleases "$RENEW"
  fixed_rate "$SERVER_PORT" "$OUT/renewals-fixed.json" "$SERVER_PID"
  log "fixed rate: $(cat "$OUT/renewals-fixed.json")"
  if [ -n "$BASE_PID" ]; then
    renew_poolleases "$RENEW" "$BASE_PORT"
    fixed_rate "$BASE_PORT" "$OUT/renewals-fixed-baseline.json" "$BASE_PID"
    log "fixed rate, baseline: $(cat "$OUT/renewals-fixed-baseline.json")"
    stop_pid "$BASE_PID"; BASE_PID=""
  fi
  # Control: the same load generator and rate against the hello-world. On a small
  # machine the client's TLS costs as much CPU as the server's; if this cannot hold
  # the rate either, the machine (not the server) sets the limit.
  fixed_rate "$HELLO_PORT" "$OUT/renewals-fixed-hello.json"
  log "fixed rate, hello-world control: $(cat "$OUT/renewals-fixed-hello.json")"
  echo "{\"rss_kib\":$(rss_kib "$SERVER_PID"),\"hwm_kib\":$(hwm_kib "$SERVER_PID")}" >"$OUT/renew-rss.json"
fi

# ---------------------------------------------------------------- 2. webhook
if wants webhook; then
  log "webhook reviews at a fixed ${BENCH_WEBHOOK_RATE}/s (4-8 KB bodies)"
  renew_poolleases "$RENEW"
  # The DelegatedLeases were written at set-up (or renewed above), 300 s leases: all live.
  wh_cpu_before=$(cpu_ms "$SERVER_PID")
  "$LOADGEN" open --port="$SERVER_PORT" --rate="$BENCH_WEBHOOK_RATE" --duration="$BENCH_SECONDS" \
    --warmup="$BENCH_WARMUP" --connections=8 --keys="$RENEW/keys.tsv" \
    --template="$RENEW/webhook_forwarder_6k.tmpl" --template="$RENEW/webhook_kubelet_4k.tmpl" \
    --template="$RENEW/webhook_forwarder_8k.tmpl" --count-substring='"allowed":true' \
    >"$OUT/webhook.json" 2>>"$OUT/loadgen.log" || true
  wh_cpu_after=$(cpu_ms "$SERVER_PID")
  add_cpu_per_req "$OUT/webhook.json" "$((wh_cpu_after - wh_cpu_before))" completed_with_warmup completed
  cp "$RENEW/webhook_sizes.json" "$OUT/webhook-sizes.json"
  log "webhook: $(cat "$OUT/webhook.json")"
  if [ -n "${HELLO_PID:-}" ]; then  # control: the same reviews, rate and client against the hello-world
    wh_cpu_before=$(cpu_ms "$HELLO_PID")
    "$LOADGEN" open --port="$HELLO_PORT" --rate="$BENCH_WEBHOOK_RATE" --duration="$BENCH_SECONDS" \
      --warmup="$BENCH_WARMUP" --connections=8 --keys="$RENEW/keys.tsv" \
      --template="$RENEW/webhook_forwarder_6k.tmpl" --template="$RENEW/webhook_kubelet_4k.tmpl" \
      --template="$RENEW/webhook_forwarder_8k.tmpl" >"$OUT/webhook-hello.json" 2>>"$OUT/loadgen.log" || true
    add_cpu_per_req "$OUT/webhook-hello.json" "$(($(cpu_ms "$HELLO_PID") - wh_cpu_before))" \
      completed_with_warmup completed
    log "webhook, hello-world control: $(cat "$OUT/webhook-hello.json")"
  fi
fi

# ---------------------------------------------------------------- 2b. webhook on etcd3
# The same reviews on the etcd3 store, where the forwarder's reviews read the
# PoolLease and the DelegatedLease from etcd (the memory store reads memory).
# Closed loop, 8 connections, BENCH_WEBHOOK_PASSES passes over the keys (3
# reviews each: two of the forwarder's, which read, and the kubelet's, which
# does not). With
# BENCH_BASELINE, its binary runs beside ours on the same etcd (each under a
# prefix of its own), the rounds ordered ours, baseline, baseline, ours: the
# machine's load drifts, so each side gets an early and a late turn.
if wants webhook-etcd3; then
  log "webhook reviews on the etcd3 store (closed loop, 8 connections)"
  start_etcd we; WE_ETCD_PORT=$ETCD1_PORT WE_ETCD_PID=$ETCD1_PID
  for _ in $(seq "$BENCH_WEBHOOK_PASSES"); do cat "$RENEW/keys.tsv"; done >"$WORK/webhook-keys.tsv"
  sides=(ours)
  [ -z "$BENCH_BASELINE" ] || sides+=(baseline)
  declare -A WE_PID WE_PORT
  for side in "${sides[@]}"; do
    bin=$SERVER; [ "$side" = ours ] || bin=$BENCH_BASELINE
    SERVER_BINARY=$bin start_server "webhook-etcd3-$side" "$RENEW" --storage-backend=etcd3 \
      "--etcd-servers=http://127.0.0.1:$WE_ETCD_PORT" "--etcd-prefix=/bench/$side"
    populate "$RENEW" 16 "$OUT/webhook-etcd3-$side-setup.json"
    WE_PID[$side]=$SERVER_PID WE_PORT[$side]=$SERVER_PORT
  done
  order=(ours)
  [ -z "$BENCH_BASELINE" ] || order=(ours baseline baseline ours)
  i=0
  for side in "${order[@]}"; do
    i=$((i + 1))
    renew_poolleases "$RENEW" "${WE_PORT[$side]}"
    load0=$(cut -d' ' -f1-3 /proc/loadavg)
    cpu0=$(cpu_ms "${WE_PID[$side]}") etcd0=$(cpu_ms "$WE_ETCD_PID")
    "$LOADGEN" closed --port="${WE_PORT[$side]}" --connections=8 --keys="$WORK/webhook-keys.tsv" \
      --template="$RENEW/webhook_forwarder_6k.tmpl" --template="$RENEW/webhook_kubelet_4k.tmpl" \
      --template="$RENEW/webhook_forwarder_8k.tmpl" --count-substring='"allowed":true' \
      --max-seconds=120 >"$OUT/webhook-etcd3-$i-$side.json" 2>>"$OUT/loadgen.log" || true
    cpu=$(( $(cpu_ms "${WE_PID[$side]}") - cpu0 )) etcd_cpu=$(( $(cpu_ms "$WE_ETCD_PID") - etcd0 ))
    python3 - "$OUT/webhook-etcd3-$i-$side.json" "$side" "$cpu" "$etcd_cpu" "$load0" \
      "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY' || true
import json, sys
path, side, cpu, etcd_cpu, load0, load1 = sys.argv[1:]
j = json.load(open(path))
n = j.get("completed") or 0
j.update({"side": side, "server_cpu_ms": int(cpu), "etcd_cpu_ms": int(etcd_cpu),
          "loadavg_start": load0, "loadavg_end": load1})
if n:
    j["server_cpu_us_per_review"] = round(int(cpu) * 1000.0 / n, 1)
    j["etcd_cpu_us_per_review"] = round(int(etcd_cpu) * 1000.0 / n, 1)
json.dump(j, open(path, "w"))
PY
    log "webhook on etcd3, $side: $(cat "$OUT/webhook-etcd3-$i-$side.json")"
  done
  for side in "${sides[@]}"; do stop_pid "${WE_PID[$side]}"; done
  stop_pid "$WE_ETCD_PID"
fi

# ---------------------------------------------------------------- 4. watch fan-out
if wants fanout; then
  log "watch fan-out: $BENCH_WATCHERS watchers, ${BENCH_WATCH_RATE} writes/s"
  renew_poolleases "$RENEW"
  RV=$(curl -ksf -H "Authorization: Bearer $ADMIN_TOKEN" \
    "https://127.0.0.1:$SERVER_PORT/apis/coordination.pool/v1alpha1/delegatedleases?limit=1" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["resourceVersion"])')
  # From the current resourceVersion: no initial ADDED events (1,000 x 1,000 of them).
  printf 'GET /apis/coordination.pool/v1alpha1/delegatedleases?watch=1&resourceVersion=%s&timeoutSeconds=600\nAuthorization: Bearer %s\nAccept: application/json\n' \
    "$RV" "$ADMIN_TOKEN" >"$WORK/watch.tmpl"
  head -1 "$RENEW/keys.tsv" >"$WORK/fanout-key.tsv"
  rss_before=$(rss_kib "$SERVER_PID")
  "$LOADGEN" fanout --port="$SERVER_PORT" --watchers="$BENCH_WATCHERS" --rate="$BENCH_WATCH_RATE" \
    --duration="$BENCH_SECONDS" --watch-template="$WORK/watch.tmpl" --keys="$WORK/fanout-key.tsv" \
    --template="$RENEW/dl_renew.tmpl" >"$OUT/fanout.json" 2>>"$OUT/loadgen.log" || true
  log "fan-out: $(cat "$OUT/fanout.json")"
  echo "{\"rss_before_kib\":$rss_before,\"hwm_kib\":$(hwm_kib "$SERVER_PID")}" >"$OUT/fanout-rss.json"
fi
if [ -n "$SERVER_PID" ]; then stop_pid "$SERVER_PID"; SERVER_PID=""; fi
if [ -n "${HELLO_PID:-}" ]; then stop_pid "$HELLO_PID"; HELLO_PID=""; fi

# ---------------------------------------------------------------- 6. watch cache
# Each store with --watch-cache=false and =true, in one run: the server's threads,
# etcd's watchers and watch streams and the server's connections to etcd while 1
# and then BENCH_WATCHERS watches are open, and the fan-out of section 4 at each.
if wants watchcache; then
  log "watch cache: memory and etcd3, --watch-cache=false/true, 1 and $BENCH_WATCHERS watchers"
  start_etcd wc; WC_ETCD_PORT=$ETCD1_PORT WC_ETCD_PID=$ETCD1_PID
  etcd_metric() { curl -sf "http://127.0.0.1:$WC_ETCD_PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
  for backend in $BENCH_WC_STORES; do
    for cache in $BENCH_WC_CACHE; do
      name="wc-$backend-cache-$cache"
      args=("--watch-cache=$cache")
      [ "$backend" = etcd3 ] && args+=(--storage-backend=etcd3 "--etcd-servers=http://127.0.0.1:$WC_ETCD_PORT"
                                       "--etcd-prefix=/bench/$name")
      start_server "$name" "$RENEW" "${args[@]}"
      populate "$RENEW" 16 "$OUT/$name-setup.json"
      renew_poolleases "$RENEW"
      head -1 "$RENEW/keys.tsv" >"$WORK/fanout-key.tsv"
      for watchers in 1 "$BENCH_WATCHERS"; do
        run="$name-w$watchers"
        # From the current resourceVersion: nothing to replay (not even the last run's writes).
        RV=$(curl -ksf -H "Authorization: Bearer $ADMIN_TOKEN" \
          "https://127.0.0.1:$SERVER_PORT/apis/coordination.pool/v1alpha1/delegatedleases?limit=1" |
          python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["resourceVersion"])')
        printf 'GET /apis/coordination.pool/v1alpha1/delegatedleases?watch=1&resourceVersion=%s&timeoutSeconds=600\nAuthorization: Bearer %s\nAccept: application/json\n' \
          "$RV" "$ADMIN_TOKEN" >"$WORK/$name-watch.tmpl"
        "$LOADGEN" fanout --port="$SERVER_PORT" --watchers="$watchers" --rate="$BENCH_WATCH_RATE" \
          --watcher-coalesce-us="$BENCH_WC_COALESCE_US" \
          --duration="$BENCH_SECONDS" --watch-template="$WORK/$name-watch.tmpl" \
          --keys="$WORK/fanout-key.tsv" --template="$RENEW/dl_renew.tmpl" \
          --per-write-out="$OUT/$run-per-write.txt" >"$OUT/$run.json" 2>"$OUT/$run.log" &
        lg=$!; PIDS+=("$lg")
        # Sample while every watch is open: the load generator says so before its first write.
        for i in $(seq 1200); do
          grep -q "watchers ready" "$OUT/$run.log" && break
          kill -0 "$lg" 2>/dev/null || break
          sleep 0.1
        done
        cpu0=$(cpu_ms "$SERVER_PID") etcd_cpu0=$(cpu_ms "$WC_ETCD_PID") cs0=$(ctxt_switches "$SERVER_PID")
        perfs=()
        if [ "$BENCH_WC_PERF" = 1 ] && [ "$watchers" != 1 ]; then
          perf record -q -F 999 ${BENCH_WC_PERF_ARGS:-} -p "$SERVER_PID" -o "$OUT/$run-server.perf" >/dev/null 2>&1 &
          perfs+=($!); PIDS+=($!)
          perf record -q -F 999 -p "$lg" -o "$OUT/$run-loadgen.perf" >/dev/null 2>&1 &
          perfs+=($!); PIDS+=($!)
        fi
        sleep 1
        threads=$(awk '/^Threads:/ {print $2}' "/proc/$SERVER_PID/status")
        rss=$(rss_kib "$SERVER_PID")
        conns=$(ss -Htnp state established "( dport = :$WC_ETCD_PORT )" 2>/dev/null | grep -c "pid=$SERVER_PID," || true)
        etcd_watchers=null etcd_streams=null
        if [ "$backend" = etcd3 ]; then
          etcd_watchers=$(etcd_metric etcd_debugging_mvcc_watcher_total)
          etcd_streams=$(etcd_metric etcd_debugging_mvcc_watch_stream_total)
        else
          conns=null
        fi
        # The control: etcd's own write -> watch latency on the same etcd while the
        # fan-out runs (gRPC through etcdctl, and the JSON gateway's stream), at the
        # same rate under a prefix of its own; started after the sample above, so its
        # two etcd watchers are not counted there.
        peer=""
        if [ "$backend" = etcd3 ]; then
          python3 "$BENCH_DIR/etcd_watch_peer.py" --endpoint "http://127.0.0.1:$WC_ETCD_PORT" \
            --rate "$BENCH_WATCH_RATE" --duration "$((BENCH_SECONDS > 3 ? BENCH_SECONDS - 2 : 1))" --prefix "/bench-peer/$run/" \
            --value-bytes "$( [ -f "$WORK/dl.json" ] && wc -c <"$WORK/dl.json" || echo 1200)" \
            --out "$OUT/$run-etcd-peer.json" >/dev/null 2>>"$OUT/$run.log" &
          peer=$!; PIDS+=("$peer")
        fi
        wait "$lg" || true
        [ -z "$peer" ] || wait "$peer" || true
        for p in "${perfs[@]}"; do kill -INT "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
        hwm=$(hwm_kib "$SERVER_PID")
        # CPU from "every watch open" to the end: the writes, their fan-out and the drain.
        cs=$(( $(ctxt_switches "$SERVER_PID") - cs0 ))
        cpu=$(( $(cpu_ms "$SERVER_PID") - cpu0 )) etcd_cpu=$(( $(cpu_ms "$WC_ETCD_PID") - etcd_cpu0 ))
        [ "$backend" = etcd3 ] || etcd_cpu=null
        python3 - "$OUT/$run.json" "$backend" "$cache" "$threads" "$etcd_watchers" "$etcd_streams" "$conns" \
          "$cpu" "$etcd_cpu" "$rss" "$hwm" "$(cut -d' ' -f1-3 /proc/loadavg)" "$cs" <<'PY' || true
import json, sys
path, backend, cache, threads, watchers, streams, conns, cpu, etcd_cpu, rss, hwm, load, cs = sys.argv[1:]
try:
    j = json.load(open(path))
except ValueError:
    j = {}
num = lambda v: None if v in ("", "null") else int(float(v))
j.update({"backend": backend, "watch_cache": cache == "true", "server_threads": num(threads),
          "etcd_watchers": num(watchers), "etcd_watch_streams": num(streams),
          "etcd_connections": num(conns), "server_cpu_ms_writes": num(cpu),
          "etcd_cpu_ms_writes": num(etcd_cpu), "server_rss_kib_watching": num(rss),
          "server_hwm_kib": num(hwm), "loadavg_end": load})
if j.get("writes_ok") and j.get("server_cpu_ms_writes") is not None:
    j["server_cpu_ms_per_write"] = round(j["server_cpu_ms_writes"] / j["writes_ok"], 2)
    j["server_context_switches_per_write"] = round(int(cs) / j["writes_ok"], 1)
json.dump(j, open(path, "w"))
PY
        log "$run: $(cat "$OUT/$run.json")"
      done
      stop_pid "$SERVER_PID"; SERVER_PID=""
    done
  done
  stop_pid "$WC_ETCD_PID"
fi

# ---------------------------------------------------------------- 3. memory
if wants memory; then
  MEM=$WORK/mem
  objects=$((BENCH_MEM_POOLS * (BENCH_NODES + 1)))
  log "memory: $BENCH_MEM_POOLS PoolLeases + $((BENCH_MEM_POOLS * BENCH_NODES)) DelegatedLeases"
  # The process alone: the renewal fixture's 1,000-node membership, no objects.
  start_server server-empty "$RENEW"
  sleep 1
  rss_empty=$(rss_kib "$SERVER_PID")
  stop_pid "$SERVER_PID"
  start_server server-mem "$MEM"
  sleep 1
  rss0=$(rss_kib "$SERVER_PID")
  populate "$MEM" 64 "$OUT/memory-populate.json"
  log "populate: $(cat "$OUT/memory-populate.json")"
  sleep 2
  rss1=$(rss_kib "$SERVER_PID") hwm1=$(hwm_kib "$SERVER_PID")
  count=$(curl -ksf -H "Authorization: Bearer $ADMIN_TOKEN" \
    "https://127.0.0.1:$SERVER_PORT/apis/coordination.pool/v1alpha1/delegatedleases" |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')
  rss2=$(rss_kib "$SERVER_PID")
  echo "{\"rss_empty_kib\":$rss_empty,\"objects_wanted\":$objects,\"delegatedleases_listed\":$count,\"rss_start_kib\":$rss0,\"rss_kib\":$rss1,\"hwm_kib\":$hwm1,\"rss_after_list_kib\":$rss2}" \
    >"$OUT/memory.json"
  log "memory: $(cat "$OUT/memory.json")"
  stop_pid "$SERVER_PID"; SERVER_PID=""
fi

# ---------------------------------------------------------------- 7. connections
if wants connections; then
  # A fresh server of its own: stalled half-headers (how long they are held)
  # and idle TLS connections (RSS open, and after they closed). ~1 minute.
  log "connections: $BENCH_STALLED stalled half-headers, $BENCH_IDLE idle TLS connections"
  python3 "$BENCH_DIR/connections.py" --binary "$SERVER" --stalled "$BENCH_STALLED" \
    --idle "$BENCH_IDLE" --out "$OUT/connections.json" >/dev/null 2>"$OUT/connections.log" || true
  log "connections: $(tr -d '\n ' <"$OUT/connections.json" 2>/dev/null)"
fi

# ---------------------------------------------------------------- 5. simulator
if wants sim; then
  if [ -x "$SIM" ] && [ "$BENCH_SIM_SECONDS" != 0 ]; then
    log "simulator: 1,000 pools x 10 nodes for ${BENCH_SIM_SECONDS}s"
    SIM_ARGS=(--server-binary="$SERVER" --pools=1000 --nodes-per-pool=10 --duration="$BENCH_SIM_SECONDS"
              --partition-ratio=0.05 --dead-ratio=0.02 --pool-partition-ratio=0.01 --clock-skew=60
              --leader-kill-interval=5 --seed=3 --workers=48 --work-dir="$WORK/sim"
              --summary-json="$OUT/sim.json")
    echo "$SIM ${SIM_ARGS[*]}" >"$OUT/sim.cmd"
    mkdir -p "$WORK/sim"
    set +e
    timeout $((BENCH_SIM_SECONDS + 180)) "$SIM" "${SIM_ARGS[@]}" >"$OUT/sim.txt" 2>"$OUT/sim.err"
    echo "{\"exit\":$?}" >"$OUT/sim-exit.json"
    set -e
    cp "$WORK/sim/server.log" "$OUT/sim-server.log" 2>/dev/null || true
    log "simulator exit $(cat "$OUT/sim-exit.json"); summary in $OUT/sim.txt"
  else
    echo '{"skipped":true}' >"$OUT/sim-exit.json"
    log "simulator skipped (no $SIM or BENCH_SIM_SECONDS=0)"
  fi
fi

# ---------------------------------------------------------------- 8. edge agent
if wants agent; then
  AGENT_BENCH=$BENCH_BUILD/poolcoord-agent-bench
  log "agent: heartbeats verified per second per core (ECDSA P-256, RSA 2048; certificate cache on/off)"
  "$AGENT_BENCH" verify --peers=500 --rounds=20 --json="$OUT/agent-verify.json" >"$OUT/agent-verify.txt"
  # One agent, 500 peers every 5 s: all reachable (lazy signature checks), all
  # cut off (every signature checked), ECDSA and RSA members.
  for run in "steady ecdsa 0" "cutoff ecdsa 1" "steady rsa 0" "cutoff rsa 1"; do
    set -- $run
    log "agent: one agent, 500 peers every 5 s, $2 members, cut off ratio $3 (${BENCH_AGENT_SECONDS}s)"
    "$AGENT_BENCH" lan --peers=500 --interval=5 --warmup=10 --duration="$BENCH_AGENT_SECONDS" \
      --key="$2" --cut-off="$3" --json="$OUT/agent-lan-$1-$2.json" >/dev/null
  done
fi

echo "\"$(cut -d' ' -f1-3 /proc/loadavg)\"" >"$OUT/loadavg-end.json"
python3 "$BENCH_DIR/report.py" "$OUT" >"$OUT/results.md"
cat "$OUT/results.md"
log "done: $OUT/results.md"
