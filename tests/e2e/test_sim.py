#!/usr/bin/env python3
"""End-to-end: a short, bounded poolcoord-sim fleet scenario against the real server:
100 agents running the real agent core on modelled LANs, the server's forwarder
writing into the simulator's modelled cloud.

    python3 tests/e2e/test_sim.py --binary build/poolcoord-apiserver

Builds nothing: poolcoord-sim must sit beside the server binary (same build dir).
20 pools x 5 agents for 75 s with node partitions, dead nodes, a whole-pool
partition, +-30 s clock skew and a leader kill every 10 s. Passes when the
simulator exits 0 (no false eviction at grace 40 s or 50 s, no false liveness, no DelegatedLease
write outside its writer's own term, no two believers of one term, every pool
led) and its summary shows that the faults really happened. First, the term
checker runs on a hand-made history with one violation of each kind
(--scenario=term-selftest) and must flag each of them.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import server_log_tail, sim_beside, verdict  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True, help="poolcoord-apiserver")
    ap.add_argument("--duration", type=int, default=75)
    args = ap.parse_args()
    sim = sim_beside(args.binary)
    if sim is None:
        return 1
    st = subprocess.run([sim, "--scenario=term-selftest"], stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True, timeout=30)
    print(st.stdout)
    if st.returncode != 0 or "result: PASS" not in st.stdout:
        print("FAIL: the term checker did not flag its hand-made violations", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="e2e-sim-") as work:
        summary = os.path.join(work, "summary.json")
        cmd = [sim, f"--server-binary={os.path.abspath(args.binary)}", f"--work-dir={work}",
               "--pools=20", "--nodes-per-pool=5", f"--duration={args.duration}",
               "--partition-ratio=0.2", "--dead-ratio=0.1", "--pool-partition-ratio=0.1",
               "--clock-skew=30", "--leader-kill-interval=10", "--seed=7", "--workers=8",
               f"--summary-json={summary}"]
        print(" ".join(cmd), flush=True)
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=args.duration + 120)
        except subprocess.TimeoutExpired:
            print("FAIL: poolcoord-sim did not finish in time", file=sys.stderr)
            return 1
        print(p.stdout)
        tail = "\n".join(p.stderr.splitlines()[-15:])
        failures = []
        if p.returncode != 0:
            failures.append(f"poolcoord-sim exited {p.returncode}; stderr tail:\n{tail}")
            if log := server_log_tail(work):
                failures.append(log)
        if not os.path.exists(summary):
            failures.append("no summary JSON written")
        else:
            s = json.load(open(summary))
            want = {
                "agents == 100": s["agents"] == 100,
                "some requests": s["requests"] > 1000,
                "request errors < 1%": s["request_errors"] < 0.01 * s["requests"],
                "DelegatedLeases written for cut-off nodes": s["dl_writes"] > 0,
                "nodes were cut off": s["cut_off"] > 0,
                "leaders were killed": s["kills"] > 0,
                "failovers measured": s["failovers"] > 0,
                "failover within lease + 2 jittered polls + slack": s["failover_max_s"] <= 15 + 8.8 + 5,
                "p99 latency < 1 s": s["latency_ms"]["p99"] < 1000,
                "no false eviction": s["false_evictions"] == 0,
                "judged at grace 40 s and 50 s": [g["grace_s"] for g in s["graces"]] == [40, 50],
                "the server's forwarder wrote the modelled cloud's Leases": s["forwarder_lease_writes"] > 0,
                "signed LAN heartbeats verified, none dropped":
                    s["heartbeats_verified"] > 0 and s["heartbeats_dropped"] == 0,
                "no cloud Lease renewed after a death": s["cloud_false_liveness"] == 0,
                "no false liveness": s["false_liveness"] == 0,
                "every accepted DelegatedLease write checked against the term ledger":
                    s["term_writes_checked"] == s["dl_writes"],
                "terms were acquired": s["terms_acquired"] >= 20,
                "no DelegatedLease write outside its writer's term": s["term_violations"] == 0,
                "no two believers of one term": s["same_term_overlaps"] == 0,
                "every pool led": s["never_led"] == 0,
                "summary says ok": s["ok"] is True,
            }
            failures += [f"summary check failed: {k} ({json.dumps(s)})" for k, v in want.items() if not v]
        return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
