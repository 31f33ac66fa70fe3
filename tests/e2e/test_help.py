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
    for flag, words in [("--pools=0", "--pools must be at least 1"),
                        ("--pools=-1", "--pools must be at least 1"),
                        ("--pools=99999999999", "not an integer"),
                        ("--workers=0", "--workers must be at least 1"),
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
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
