"""Runs a conformance script (CI passes the shared acceptance checks' path with
--script) against a server on the etcd3 store: a fresh etcd (tests/e2e/etcd_fixture.py), the
server started by the script with --storage-backend=etcd3 --etcd-servers=<it>.
Passes when the script passes, and when its writes reached that etcd (so the
run really used etcd, not the memory store). Prints the script's output, its
tally line, and ends with "N passed, N failed".
"""
import argparse
import os
import subprocess
import sys
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
from etcd_fixture import EtcdFixture  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--script", required=True, help="the conformance script to run")
    a = ap.parse_args()
    passed = failed = 0
    if not os.path.exists(a.script):
        print(f"FAIL conformance_on_etcd3: {a.script} not found ")
        print("0 passed, 1 failed")
        return 1
    prefix = f"/conformance/{uuid.uuid4().hex[:8]}"
    with EtcdFixture() as etcd:
        t0 = time.time()
        proc = subprocess.run([sys.executable, a.script, "--binary", os.path.abspath(a.binary),
                               "--server-arg=--storage-backend=etcd3",
                               f"--server-arg=--etcd-servers={etcd.endpoint}",
                               f"--server-arg=--etcd-prefix={prefix}"],
                              capture_output=True, text=True, timeout=900)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        lines = [l for l in proc.stdout.splitlines() if l.strip()]
        tally = lines[-1] if lines else "(no output)"
        print(f"conformance.py on etcd3 ({time.time() - t0:.0f}s), tally: {tally}", flush=True)
        if proc.returncode == 0 and tally.endswith(" 0 failed"):
            passed += 1
            print("PASS conformance_on_etcd3")
        else:
            failed += 1
            print(f"FAIL conformance_on_etcd3: exit {proc.returncode}")
        # The checks write PoolLeases and DelegatedLeases: a fresh etcd starts at
        # revision 1, so its revision counts the writes that reached it.
        revision = etcd.revision()
        if revision > 10:
            passed += 1
            print(f"PASS writes_reached_etcd (etcd at revision {revision})")
        else:
            failed += 1
            print(f"FAIL writes_reached_etcd: etcd at revision {revision}: the server did not use it")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
