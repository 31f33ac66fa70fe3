#!/usr/bin/env bash
# The long seed sweep of poolcoord-sim's deterministic mode (agent/sim/README.md
# "The deterministic mode"), for BENCHMARKS.md "Deterministic simulation":
#   1. SWEEP_SEEDS seeds (1,000) of 10 pools x 5 nodes for 10 simulated minutes,
#      every fault, +-30 s clock skew and clock steps;
#   2. one simulated hour of 100 pools x 5 nodes with every fault (speed).
# Prints each run's last line (seeds, failures, simulated hours per real
# second) and every failing seed with the command that replays it; the full
# outputs and summary JSONs go to SWEEP_OUT.
# Usage: bench/sim_sweep.sh   (env: SWEEP_SEEDS [1000], SWEEP_BUILD [build],
#        SWEEP_OUT [/tmp/poolcoord-sim-sweep-<time>]). Builds poolcoord-sim.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${SWEEP_SEEDS:=1000}" "${SWEEP_BUILD:=$ROOT/build}"
: "${SWEEP_OUT:=/tmp/poolcoord-sim-sweep-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$SWEEP_OUT"
if [ "$SWEEP_BUILD" = "$ROOT/build" ]; then "$ROOT/scripts/build.sh" poolcoord-sim >/dev/null; fi
SIM=$SWEEP_BUILD/poolcoord-sim
FAULTS=(--partition-ratio=0.2 --dead-ratio=0.1 --pool-partition-ratio=0.05 --clock-skew=30
        --clock-jump-ratio=0.1 --lan-loss=0.02 --lan-duplicate=0.02 --lying-pool-ratio=0.1)
run() {
  local name=$1; shift
  echo "== $name: $SIM --deterministic $*"
  local rc=0
  "$SIM" --deterministic "$@" --summary-json="$SWEEP_OUT/$name.json" >"$SWEEP_OUT/$name.txt" || rc=$?
  grep -E '^seed .*FAIL|^  replay:|^    t=' "$SWEEP_OUT/$name.txt" || true
  tail -1 "$SWEEP_OUT/$name.txt"
  echo "   (exit $rc; load average $(cut -d' ' -f1-3 /proc/loadavg))"
}
run sweep --pools=10 --nodes-per-pool=5 --duration=600 "${FAULTS[@]}" --leader-kill-interval=20 \
  --server-restart-interval=200 --seed=1 --seeds="$SWEEP_SEEDS"
run hour --pools=100 --nodes-per-pool=5 --duration=3600 "${FAULTS[@]}" --leader-kill-interval=30 \
  --server-restart-interval=900 --seed=1
echo "outputs: $SWEEP_OUT"
