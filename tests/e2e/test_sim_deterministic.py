#!/usr/bin/env python3
"""poolcoord-sim's deterministic mode replays exactly: the whole system (the
agents' core, the server's rules, store, watch cache and forwarder, the
modelled kube-apiserver) in one process on one simulated clock, driven by one
seeded scheduler (agent/sim/README.md "The deterministic mode").

    python3 tests/e2e/test_sim_deterministic.py --binary build/poolcoord-apiserver

Builds nothing: poolcoord-sim must sit beside the server binary. Checks:
- two processes running one seed with every fault write the same history,
  byte for byte, and print the same digest (the SHA-256 of that history);
- another seed gives another history;
- the faults really happened in that run, and no write broke a term or made
  a dead node live (the invariants over many seeds are test_sim_sweep's);
- a failing run (a grace period shorter than the kubelets' renew interval,
  which must flag false evictions) prints the command that replays it, and
  that command gives the same failure with the same digest.
About 5 s.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import sim_beside, verdict  # noqa: E402

EVERY_FAULT = ["--pools=20", "--nodes-per-pool=5", "--duration=300", "--partition-ratio=0.2",
               "--dead-ratio=0.1", "--pool-partition-ratio=0.1", "--clock-skew=30",
               "--clock-jump-ratio=0.2", "--leader-kill-interval=10", "--lan-loss=0.02",
               "--lan-duplicate=0.02", "--server-restart-interval=100", "--lying-pool-ratio=0.2"]


def run(cmd, timeout=120):
    print(" ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    print(p.stdout, end="")
    return p


def digest_of(out):
    m = re.search(r"^seed \d+: (PASS|FAIL) digest ([0-9a-f]{64})$", out, re.M)
    return (m.group(1), m.group(2)) if m else (None, None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True, help="poolcoord-apiserver")
    args = ap.parse_args()
    sim = sim_beside(args.binary)
    if sim is None:
        return 1
    failures = []
    with tempfile.TemporaryDirectory(prefix="e2e-simdet-") as work:
        runs = []
        for i in (1, 2):
            history = os.path.join(work, f"history{i}.txt")
            summary = os.path.join(work, f"summary{i}.json")
            p = run([sim, "--deterministic", *EVERY_FAULT, "--seed=7", f"--history-file={history}",
                     f"--summary-json={summary}"])
            runs.append((p, history, summary))
        (p1, h1, s1), (p2, h2, _) = runs
        v1, d1 = digest_of(p1.stdout)
        v2, d2 = digest_of(p2.stdout)
        if v1 is None or v1 != v2 or p1.returncode != p2.returncode:
            failures.append(f"two runs of seed 7, two verdicts: {v1} (exit {p1.returncode}) and "
                            f"{v2} (exit {p2.returncode})")
        if d1 is None or d1 != d2:
            failures.append(f"two runs of seed 7, two digests: {d1} and {d2}")
        b1, b2 = open(h1, "rb").read(), open(h2, "rb").read()
        if b1 != b2:
            failures.append("two runs of seed 7 wrote different histories")
        lines = b1.count(b"\n")
        if lines < 10000:
            failures.append(f"a history of {lines} lines: too short to mean anything")
        s = json.load(open(s1))["runs"][0]
        want = {
            "nodes died": s["dead"] > s["kills"],
            "nodes were cut off": s["cut_off"] > 0,
            "leaders were killed, and replaced": s["kills"] > 0 and s["failovers"] > 0,
            "clocks stepped": s["clock_steps"] > 0,
            "the server restarted": s["server_restarts"] > 0,
            "datagrams were lost and duplicated": s["datagrams_lost"] > 0 and s["datagrams_duplicated"] > 0,
            "lying leaders forged writes, none accepted": s["forged_writes"] > 0 and s["forged_accepted"] == 0,
            "cut-off nodes were delegated": s["dl_writes"] > 0,
            "the sample that signs for real was delegated, its proofs verified for real":
                s["real_signature_proofs"] > 0,
            "the server's forwarder wrote the cloud's Leases": s["forwarder_lease_writes"] > 0,
            "every accepted DelegatedLease write checked against the term ledger":
                s["term_writes_checked"] == s["dl_writes"],
            "no false liveness": s["false_liveness"] == 0 and s["cloud_false_liveness"] == 0,
            "no term violation": s["term_violations"] == 0 and s["same_term_overlaps"] == 0,
        }
        failures += [f"seed 7: {k} ({json.dumps(s)})" for k, v in want.items() if not v]

        p3 = run([sim, "--deterministic", *EVERY_FAULT, "--seed=8"])
        _, d3 = digest_of(p3.stdout)
        if d3 is None or d3 == d1:
            failures.append(f"seeds 7 and 8 gave the same digest {d1}")

        # A run that must fail: grace 5 s against kubelets renewing every 10 s.
        p4 = run([sim, "--deterministic", "--pools=3", "--nodes-per-pool=3", "--duration=60",
                  "--grace=5", "--seed=4"])
        v4, d4 = digest_of(p4.stdout)
        m = re.search(r"^  replay: (.*)$", p4.stdout, re.M)
        if p4.returncode != 1 or v4 != "FAIL" or "false evictions at grace 5s" not in p4.stdout:
            failures.append(f"a 5 s grace period did not fail the run (exit {p4.returncode})")
        elif m is None:
            failures.append("the failing seed's replay command was not printed")
        else:
            replay = shlex.split(m.group(1))
            if "--seed=4" not in replay or "--grace=5" not in replay:
                failures.append(f"the replay command lacks the seed or a flag: {m.group(1)}")
            p5 = run(replay)
            v5, d5 = digest_of(p5.stdout)
            if p5.returncode != 1 or v5 != "FAIL" or d5 != d4:
                failures.append(f"the replay did not fail the same way: exit {p5.returncode}, "
                                f"digest {d5} (first run {d4})")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
