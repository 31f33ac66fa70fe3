#!/usr/bin/env bash
# Longer runs of the robustness suite (tests/robustness/README.md): every fault
# ROUNDS times on fresh clusters, each with more load around it and the fault
# held HOLD_SCALE times its default, every history checked; a table of what each
# run did in $BENCH_OUT/robustness.md, the histories beside it.
#
#   bench/robustness.sh [path/to/poolcoord-apiserver]
#   ROUNDS=3 WARMUP=20 SETTLE=30 HOLD_SCALE=2 POOLS=6 CANDIDATES=8 FAULTS="kill-etcd-leader compaction"
#
# As root (network namespaces); without root the two partition faults are skipped.
# Exit 1 when any run found a violation.
set -euo pipefail
cd "$(dirname "$0")/.."
BINARY="${1:-build/poolcoord-apiserver}"
ROUNDS="${ROUNDS:-3}"
WARMUP="${WARMUP:-20}"
SETTLE="${SETTLE:-30}"
HOLD_SCALE="${HOLD_SCALE:-2}"
POOLS="${POOLS:-6}"
CANDIDATES="${CANDIDATES:-8}"
FAULTS="${FAULTS:-kill-etcd-member kill-etcd-leader partition-etcd-member partition-replica kill-replica compaction}"
BENCH_OUT="${BENCH_OUT:-/tmp/poolcoord-robustness-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$BENCH_OUT"
if [ ! -x "$BINARY" ]; then scripts/build.sh poolcoord-apiserver; fi
scripts/install-deps.sh --packages etcd-server iproute2 nftables
results="$BENCH_OUT/results.jsonl"
status=0
for round in $(seq 1 "$ROUNDS"); do
  for fault in $FAULTS; do
    echo "== round $round: $fault"
    python3 tests/robustness/robustness.py --binary "$BINARY" --fault "$fault" \
      --warmup "$WARMUP" --settle "$SETTLE" --hold-scale "$HOLD_SCALE" --pools "$POOLS" \
      --candidates "$CANDIDATES" --seed "$((round * 7919 + RANDOM))" \
      --history "$BENCH_OUT/r$round-$fault.json" --results "$results" \
      | tee "$BENCH_OUT/r$round-$fault.log" || { rc=$?; [ "$rc" = 77 ] || status=1; }
  done
done
python3 - "$results" "$BENCH_OUT/robustness.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cols = ["fault", "seed", "hold", "seconds", "requests", "writes_acknowledged", "writes_refused",
        "writes_unknown", "revisions", "acquisitions", "watch_streams", "watch_events", "expired",
        "max_write_s", "max_watch_delay_s", "load", "violations"]
out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
for r in rows:
    r["violations"] = ", ".join(f"{k} {n}" for k, n in r["violations"].items()) or "none"
    r["load"] = f"{r['load']:.1f}"
    out.append("| " + " | ".join(str(r[c]) for c in cols) + " |")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
echo "histories and logs in $BENCH_OUT"
exit "$status"
