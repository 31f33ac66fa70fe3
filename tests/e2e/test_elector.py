#!/usr/bin/env python3
"""End-to-end: the client-side LeaderElector over PoolLeaseLock against the real server.

    python3 tests/e2e/test_elector.py --binary build/poolcoord-apiserver

Runs `poolcoord-sim --scenario=elector` (found beside the server binary), which
starts the server with node bearer tokens and checks, on the real clock with
3 s / 2 s / 0.5 s timings: two electors, exactly one leads; killing the leader
hands over no earlier than the lease duration after its last renewal and
within LeaseDuration + 2 x RetryPeriod x 2.2 (+ slack); a candidate configured
with 3 s respects a 6 s record; a leader whose renewals fail stops within
RenewDeadline and later competes again; N parallel takeovers of an expired
lease give exactly one winner; ReleaseOnCancel lets the next candidate take
the lease at once.
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import server_log_tail, sim_beside, verdict  # noqa: E402

CHECKS = [
    "two_electors_exactly_one_leads",
    "killed_leader_handover_within_lease_plus_2_retry",
    "candidates_respect_the_records_duration",
    "failing_leader_stops_within_renew_deadline_and_competes_again",
    "n_parallel_takeovers_one_winner",
    "release_on_cancel_then_immediate_takeover",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True, help="poolcoord-apiserver")
    args = ap.parse_args()
    sim = sim_beside(args.binary)
    if sim is None:
        return 1
    with tempfile.TemporaryDirectory(prefix="e2e-elector-") as work:
        cmd = [sim, "--scenario=elector", f"--server-binary={os.path.abspath(args.binary)}",
               f"--work-dir={work}"]
        print(" ".join(cmd), flush=True)
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=300)
        except subprocess.TimeoutExpired:
            print("FAIL: elector checks did not finish in 300 s", file=sys.stderr)
            return 1
        print(p.stdout)
        failures = []
        if p.returncode != 0:
            failures.append(f"exit {p.returncode}; stderr:\n{p.stderr[-2000:]}")
            if log := server_log_tail(work):
                failures.append(log)
        for name in CHECKS:
            if f"PASS {name}" not in p.stdout:
                failures.append(f"check {name} did not pass")
        return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
