#!/usr/bin/env python3
"""A short seed sweep of poolcoord-sim's deterministic mode: 30 seeds of 10
pools x 5 nodes for 10 simulated minutes each, with every fault (node and
whole-pool partitions, dead nodes, leader kills, +-5 s clock skew, LAN loss,
duplication and reordering, server restarts on the memory store, lying
leaders), then 10 seeds whose server restarts keep their objects (etcd3). Every run must
keep every invariant: no false eviction at 40 s or 50 s, no false liveness, no
DelegatedLease write outside its writer's term, no two believers of one term,
every pool led. A failing seed's output carries the command that replays it.

    python3 tests/e2e/test_sim_sweep.py --binary build/poolcoord-apiserver

About 20 s. The long sweep (1,000 seeds, +-30 s skew and clock steps) is
bench/sim_sweep.sh, its figures in BENCHMARKS.md. The skew is kept under the
kubelets' renew interval here: with a kubelet clock ahead by more than that,
the forwarder takes the kubelet's last renewal for fresher than it is
(BENCHMARKS.md "Deterministic simulation" lists the seeds that show it).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import sim_beside, verdict  # noqa: E402

SEEDS = 30


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True, help="poolcoord-apiserver")
    ap.add_argument("--seeds", type=int, default=SEEDS)
    args = ap.parse_args()
    sim = sim_beside(args.binary)
    if sim is None:
        return 1
    failures = []
    with tempfile.TemporaryDirectory(prefix="e2e-simsweep-") as work:
        summary = os.path.join(work, "summary.json")
        faults = ["--deterministic", "--pools=10", "--nodes-per-pool=5", "--duration=600",
                  "--partition-ratio=0.2", "--dead-ratio=0.1", "--pool-partition-ratio=0.05",
                  "--clock-skew=5", "--leader-kill-interval=20", "--lan-loss=0.02",
                  "--lan-duplicate=0.02", "--server-restart-interval=200", "--lying-pool-ratio=0.1"]
        # The server restarts on its memory store (the chart's default), then,
        # for a third as many seeds, on a store it keeps (etcd3).
        for extra, seeds, out in [([], args.seeds, summary),
                                  (["--server-restart-keeps-objects"], max(1, args.seeds // 3), None)]:
            cmd = [sim, *faults, *extra, "--seed=1", f"--seeds={seeds}"]
            if out:
                cmd.append(f"--summary-json={out}")
            print(" ".join(cmd), flush=True)
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=600)
            print(p.stdout)
            if p.returncode != 0:
                failures.append(f"poolcoord-sim exited {p.returncode}: a seed broke an invariant "
                                "(its replay command is above)")
        if not os.path.exists(summary):
            failures.append("no summary JSON written")
        else:
            s = json.load(open(summary))
            runs = s["runs"]
            total = lambda k: sum(r[k] for r in runs)  # noqa: E731
            want = {
                f"{args.seeds} seeds run": s["seeds"] == args.seeds and len(runs) == args.seeds,
                "every seed passed": s["failed"] == 0 and all(r["ok"] for r in runs),
                "seeds gave distinct histories": len({r["digest"] for r in runs}) == len(runs),
                "leaders were killed and replaced": total("kills") > 0 and total("failovers") > 0,
                "nodes were cut off and delegated": total("cut_off") > 0 and total("dl_writes") > 0,
                "the server restarted": total("server_restarts") > 0,
                "the forwarder wrote the cloud's Leases": total("forwarder_lease_writes") > 0,
                "forged writes were refused": total("forged_writes") > 0 and total("forged_accepted") == 0,
                "datagrams were lost": total("datagrams_lost") > 0,
            }
            failures += [f"sweep: {k}" for k, v in want.items() if not v]
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
