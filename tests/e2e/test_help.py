"""Every program we ship answers --help with its usage on stdout and exit status 0,
and an unknown flag with a message on stderr and a non-zero exit status: 2 as
kube-apiserver exits, 1 for the kubectl plugin, as kubectl exits. Programs are
found beside the --binary given (the build folder); one that is not built is a
failure, not a skip: ctest builds them all.
"""
import argparse
import os
import subprocess
import sys

# Programs of the build folder, by their path relative to it, and the exit status
# of an unknown flag.
PROGRAMS = [("poolcoord-apiserver", 2), ("poolcoord-sim", 2), ("kubectl-pool", 1), ("poolcoord-agent", 2)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    a = ap.parse_args()
    build = os.path.dirname(os.path.abspath(a.binary))
    passed = failed = 0
    for rel, unknown_flag_exit in PROGRAMS:
        exe = os.path.join(build, rel)
        name = os.path.basename(rel)
        try:
            if not os.access(exe, os.X_OK):
                raise AssertionError(f"{exe} is not built")
            r = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=20)
            if r.returncode != 0:
                raise AssertionError(f"--help exited {r.returncode}: {r.stderr[:300]}")
            if "--" not in r.stdout:
                raise AssertionError(f"--help printed no flags on stdout: {r.stdout[:300]!r}")
            r = subprocess.run([exe, "--no-such-flag-xyz"], capture_output=True, text=True,
                               timeout=20)
            if r.returncode != unknown_flag_exit or "no-such-flag-xyz" not in r.stderr:
                raise AssertionError(f"unknown flag: exit {r.returncode}, stderr {r.stderr[:300]!r}")
            passed += 1
            print(f"PASS {name}", flush=True)
        except Exception as e:  # any failure of one program is that program's case
            failed += 1
            print(f"FAIL {name}: {e}", flush=True)
    # The simulator's values that tested nothing or failed for the wrong reason
    # (found by trying them): --pools=0 passed having run nothing, --workers=0 and
    # --duration=-5 "failed" as "pools never led", --server-binary=/nonexistent
    # waited 30 s for a server that never started. Each is refused at once.
    sim = os.path.join(build, "poolcoord-sim")
    for flag, words in [("--pools=0", '"--pools" flag: must be between 1 and 1000000'),
                        ("--pools=-1", '"--pools" flag: must be between 1 and 1000000'),
                        ("--pools=99999999999", '"--pools" flag: must be between 1 and 1000000'),
                        ("--workers=0", '"--workers" flag: must be between 1 and 100000'),
                        ("--seed=-1", '"--seed" flag: must be at least 0'),
                        ("--grace=40,x", '"--grace" flag: not a number of seconds above 0'),
                        ("--scenario=bogus", "must be fleet, elector or term-selftest"),
                        ("--duration=-5", "--duration must be more than 0"),
                        ("--partition-ratio=2", "between 0 and 1"),
                        ("--server-binary=/nonexistent", "cannot run it")]:
        try:
            r = subprocess.run([sim, flag], capture_output=True, text=True, timeout=20)
            if r.returncode != 2 or words not in r.stderr:
                raise AssertionError(f"exit {r.returncode}, stderr {r.stderr[:300]!r}")
            passed += 1
            print(f"PASS poolcoord-sim {flag}", flush=True)
        except Exception as e:
            failed += 1
            print(f"FAIL poolcoord-sim {flag}: {e}", flush=True)
    # poolcoord-sim --help named a third of its flags with their defaults, several
    # on one line with no meaning (a newcomer found it terse). Now every flag it
    # takes has its own row, "      --name type", its help starting in one column
    # as the server's and the agent's (base::FlagSet::Usage), and its default.
    try:
        r = subprocess.run([sim, "--help"], capture_output=True, text=True, timeout=20)
        rows = [l for l in r.stdout.splitlines() if l.startswith(("      --", "  -h, --"))]
        names = {l.split("--", 1)[1].split()[0] for l in rows}
        want = {"scenario", "server-binary", "server-arg", "server", "ca-file", "work-dir",
                "write-config-only", "pools", "nodes-per-pool", "extra-objects", "partition-ratio",
                "dead-ratio", "pool-partition-ratio", "lying-pool-ratio", "clock-skew",
                "leader-kill-interval", "duration", "lease-duration", "renew-deadline",
                "retry-period", "seed", "workers", "heartbeat-interval", "kubelet-interval", "grace",
                "cloud-port", "allow-belief-overlap", "summary-json", "pl-watch-delay-ms", "help",
                # the deterministic mode's
                "deterministic", "seeds", "lan-delay-min-ms", "lan-delay-max-ms", "lan-loss",
                "lan-duplicate", "clock-jump-ratio", "server-restart-interval", "server-down",
                "server-restart-keeps-objects",
                "real-signature-every", "history-file", "agent-logs"}
        if names != want:
            raise AssertionError(f"rows for {sorted(names ^ want)} missing or unexpected:\n{r.stdout}")
        types = {"string", "int", "float", "duration", "strings", "stringArray"}
        heads = set()
        for l in rows:
            toks = l[l.index("--"):].split()
            head_end = l.index(toks[0]) + len(toks[0])
            if toks[1] in types:
                head_end = l.index(toks[1], head_end) + len(toks[1])
            heads.add(len(l) - len(l[head_end:].lstrip()))
        if len(heads) != 1:
            raise AssertionError(f"help texts start in columns {sorted(heads)}:\n{r.stdout}")
        for flag, default in [("pools", "20"), ("nodes-per-pool", "5"), ("duration", "60"),
                              ("lease-duration", "15"), ("grace", "[40,50]"), ("scenario", '"fleet"'),
                              ("workers", "32"), ("partition-ratio", "0")]:
            row = next(l for l in rows if l.split("--", 1)[1].split()[0] == flag)
            if not row.endswith(f"(default {default})"):
                raise AssertionError(f"--{flag}: {row!r} does not end in (default {default})")
        # Each row is a flag the simulator takes.
        for name in sorted(want - {"help", "write-config-only", "allow-belief-overlap"}):
            r = subprocess.run([sim, f"--{name}=\x01bad", "--scenario=nonesuch"], capture_output=True,
                               text=True, timeout=20)
            if r.returncode != 2 or "unknown flag" in r.stderr:
                raise AssertionError(f"--{name}: exit {r.returncode}, {r.stderr[:200]!r}")
        passed += 1
        print("PASS poolcoord-sim --help lists every flag", flush=True)
    except Exception as e:
        failed += 1
        print(f"FAIL poolcoord-sim --help: {e}", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
