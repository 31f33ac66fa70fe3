#!/usr/bin/env python3
"""End-to-end: poolcoord-sim's lying-leader fault (issue 15) against the real server.

    python3 tests/e2e/test_sim_lying.py --binary build/poolcoord-apiserver

6 pools x 4 agents for 60 s, a quarter of the nodes dying, half the pools lying
(whoever leads there forges liveness for members it has not heard from: the test
build's forging leader, agent/testing/forging_leader.h). Run twice on the same
seed: with --delegation-proof=off the attack must show (forged writes accepted,
false liveness counted, the simulator exits 1); with the server's default
(required) every forged write must be refused on its proof and false liveness
must stay 0 (exit 0). Builds nothing: poolcoord-sim sits beside the server binary.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import sim_beside, verdict  # noqa: E402


def run(sim, binary, duration, extra):
    with tempfile.TemporaryDirectory(prefix="e2e-sim-lying-") as work:
        summary = os.path.join(work, "summary.json")
        cmd = [sim, f"--server-binary={binary}", f"--work-dir={work}", "--pools=6", "--nodes-per-pool=4",
               f"--duration={duration}", "--dead-ratio=0.25", "--lying-pool-ratio=0.5", "--seed=3",
               "--workers=4", f"--summary-json={summary}", *extra]
        print(" ".join(cmd), flush=True)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=duration + 120)
        print(p.stdout[-2500:])
        s = json.load(open(summary)) if os.path.exists(summary) else None
        return p.returncode, s, "\n".join(p.stderr.splitlines()[-10:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True, help="poolcoord-apiserver")
    ap.add_argument("--duration", type=int, default=60)
    args = ap.parse_args()
    binary = os.path.abspath(args.binary)
    sim = sim_beside(binary)
    if sim is None:
        return 1
    failures = []
    rc, off, tail = run(sim, binary, args.duration, ["--server-arg=--delegation-proof=off"])
    if off is None:
        failures.append(f"proofs off: no summary (exit {rc}): {tail}")
    else:
        want = {
            "lying pools": off["lying_pools"] > 0,
            "forged writes accepted": off["forged_accepted"] > 0,
            "false liveness counted": off["false_liveness"] > 0,
            "the simulator fails the run": rc == 1 and not off["ok"],
        }
        failures += [f"proofs off: {k}" for k, ok in want.items() if not ok]
    rc, req, tail = run(sim, binary, args.duration, [])
    if req is None:
        failures.append(f"proofs required: no summary (exit {rc}): {tail}")
    else:
        want = {
            "forged writes made": req["forged_writes"] > 0,
            "none accepted": req["forged_accepted"] == 0,
            "every one refused on its proof": req["forged_refused_proof"] == req["forged_writes"],
            "no false liveness": req["false_liveness"] == 0 and req["cloud_false_liveness"] == 0,
            "no false eviction": req["false_evictions"] == 0,
            "the simulator passes": rc == 0 and req["ok"],
        }
        failures += [f"proofs required: {k}" for k, ok in want.items() if not ok]
    if off and req:
        print(f"lying leaders: proofs off {off['forged_accepted']}/{off['forged_writes']} forged writes accepted, "
              f"false liveness {off['false_liveness']} writes / {off['cloud_false_liveness']} cloud Leases; "
              f"required {req['forged_accepted']}/{req['forged_writes']} accepted, false liveness "
              f"{req['false_liveness']} / {req['cloud_false_liveness']}")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
