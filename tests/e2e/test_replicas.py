"""Two poolcoord-apiserver replicas on one etcd (issue 7, "Done when"):

- optimistic concurrency holds across replicas (N parallel updates, one wins);
- a watch on one replica sees the writes made on the other, in order;
- kill -9 of a replica under write load loses no acknowledged write;
- a PoolLease renewed through one replica is never judged expired early by the
  other.

Each replica is a real server process on its own free port, sharing one etcd
(tests/e2e/etcd_fixture.py) and one --etcd-prefix, with the membership file (no
cloud cluster). Replica election and the forwarding handover need a cloud
cluster: test_cluster_pods_replicas.py runs the chart's replicas as real pods. Prints
one line per case and ends with "N passed, N failed".
"""
import http.client
import json
import os
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_fixture import EtcdFixture  # noqa: E402
from harness import (BASE, GV, Server, e2e_args, expect, expect_status, microtime, pool_lease,  # noqa: E402
                     run_one, uniq)
from harness import wait_for as harness_wait_for  # noqa: E402


def wait_for(what, fn, timeout=30, every=0.1):
    """harness.wait_for with this file's longer default: replicas start and elect."""
    return harness_wait_for(what, fn, timeout, every)


class Env:
    etcd = None
    replicas = {}   # "A"/"B" -> Server

    @classmethod
    def other(cls, name):
        return "B" if name == "A" else "A"



# ------------------------------------------------------------------- cases --

def parallel_updates_one_winner(rs):
    """N updates of one object read once, half through each replica: one 200."""
    a, b = rs["A"], rs["B"]
    name = uniq("race")
    expect_status(a.admin().request("POST", BASE + "/poolleases", pool_lease(name)), 201)
    base = expect_status(b.admin().request("GET", f"{BASE}/poolleases/{name}"), 200).json()
    n = 20
    barrier = threading.Barrier(n)
    results = [None] * n

    def update(i):
        client = (a if i % 2 == 0 else b).token("admin-token")
        client.request("GET", "/readyz", accept=None)  # connect before the race starts
        body = json.loads(json.dumps(base))
        body["metadata"]["labels"] = {"writer": str(i)}
        barrier.wait(30)
        results[i] = client.request("PUT", f"{BASE}/poolleases/{name}", body)
    threads = [threading.Thread(target=update, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    codes = [r.status if r else None for r in results]
    winners = [i for i, r in enumerate(results) if r and r.status == 200]
    expect(len(winners) == 1, f"want exactly one 200, got {codes}")
    for i, r in enumerate(results):
        if i != winners[0]:
            expect_status(r, 409, "Conflict")
    won = results[winners[0]].json()
    for s in (a, b):
        got = expect_status(s.admin().request("GET", f"{BASE}/poolleases/{name}"), 200).json()
        expect(got["metadata"]["labels"] == {"writer": str(winners[0])}, f"winner's write not stored: {got}")
        expect(got["metadata"]["resourceVersion"] == won["metadata"]["resourceVersion"],
               f"resourceVersion {got['metadata']['resourceVersion']} != the winner's "
               f"{won['metadata']['resourceVersion']}")
    print(f"  {n} parallel updates through both replicas: {codes.count(200)} x 200, "
          f"{codes.count(409)} x 409", flush=True)


def watch_on_a_sees_writes_on_b(rs):
    a, b = rs["A"].admin(), rs["B"].admin()
    tag = uniq("xw")
    start = expect_status(a.request("GET", BASE + "/poolleases"), 200).json()["metadata"]["resourceVersion"]
    r, events, conn = a.watch(f"{BASE}/poolleases?watch=true&resourceVersion={start}"
                              f"&labelSelector=s%3D{tag}&timeoutSeconds=30", timeout=40)
    try:
        expect(r.status == 200, f"watch {r.status}")
        name = f"{tag}-1"
        want = []
        o = expect_status(b.request("POST", BASE + "/poolleases", pool_lease(name, labels={"s": tag})), 201).json()
        want.append(("ADDED", o["metadata"]["resourceVersion"]))
        o["spec"]["leaseDurationSeconds"] = 33
        o = expect_status(b.request("PUT", f"{BASE}/poolleases/{name}", o), 200).json()
        want.append(("MODIFIED", o["metadata"]["resourceVersion"]))
        o = expect_status(b.request("PATCH", f"{BASE}/poolleases/{name}", {"spec": {"leaseDurationSeconds": 34}},
                                    ctype="application/merge-patch+json"), 200).json()
        want.append(("MODIFIED", o["metadata"]["resourceVersion"]))
        d = expect_status(b.request("DELETE", f"{BASE}/poolleases/{name}"), 200).json()
        got = []
        for ev in events:
            if ev["type"] == "BOOKMARK":
                continue
            got.append((ev["type"], ev["object"]["metadata"]["resourceVersion"]))
            if len(got) == 3:
                expect(ev["object"]["spec"]["leaseDurationSeconds"] == 34, f"last MODIFIED carries the patch: {ev}")
            if len(got) == 4:
                expect(ev["object"]["metadata"]["name"] == name, ev)
                break
        expect([t for t, _ in got] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"], f"events on A: {got}")
        expect([rv for _, rv in got[:3]] == [rv for _, rv in want], f"resourceVersions on A {got} vs B {want}")
        expect(int(got[3][1]) > int(got[2][1]), f"DELETED must come at a later revision: {got}")
        del d
    finally:
        conn.close()


def kill9_under_load_loses_no_acknowledged_write(rs):
    """Writers create and update objects through B; B gets SIGKILL while they run;
    every write B acknowledged is then read back through A."""
    a, b = rs["A"], rs["B"]
    tag = uniq("k9")
    acked = {}          # name -> (resourceVersion, counter) of the last acknowledged write
    count = [0]         # acknowledged writes
    lock = threading.Lock()
    stop = threading.Event()
    errors = []

    def writer(w):
        c = b.token("admin-token")
        i = 0
        try:
            while not stop.is_set():
                name = f"{tag}-{w}-{i // 4}"
                if i % 4 == 0:
                    r = c.request("POST", BASE + "/poolleases",
                                  pool_lease(name, labels={"s": tag, "n": "0"}))
                    want = 201
                else:
                    r = c.request("PATCH", f"{BASE}/poolleases/{name}",
                                  {"metadata": {"labels": {"n": str(i % 4)}}},
                                  ctype="application/merge-patch+json")
                    want = 200
                if r.status != want:
                    errors.append(f"{name}: {r.status} {r.body[:200]}")
                    return
                with lock:
                    acked[name] = (int(r.json()["metadata"]["resourceVersion"]), str(i % 4))
                    count[0] += 1
                i += 1
        except (OSError, http.client.HTTPException):
            return  # B is gone: this write was not acknowledged

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    wait_for("100 acknowledged writes through B", lambda: count[0] >= 100, timeout=60, every=0.05)
    b.stop(sig=9)           # SIGKILL, mid-load
    stop.set()
    for t in threads:
        t.join(30)
    expect(not errors, f"writes failed before the kill: {errors[:3]}")
    with lock:
        snapshot = dict(acked)
    reader = a.admin()
    lost = []
    for name, (rv, n) in sorted(snapshot.items()):
        r = reader.request("GET", f"{BASE}/poolleases/{name}")
        if r.status != 200:
            lost.append(f"{name}: {r.status}")
            continue
        o = r.json()
        got_rv = int(o["metadata"]["resourceVersion"])
        if got_rv < rv or (got_rv == rv and o["metadata"]["labels"].get("n") != n):
            lost.append(f"{name}: acknowledged rv {rv} n={n}, A has rv {got_rv} n={o['metadata']['labels'].get('n')}")
    expect(not lost, f"{len(lost)} acknowledged writes lost: {lost[:5]}")
    print(f"  {count[0]} writes acknowledged by B before its kill -9 ({len(snapshot)} objects): the last "
          "acknowledged write of each found through A", flush=True)
    b.start()  # back for the next cases
    expect_status(b.admin().request("GET", f"{BASE}/poolleases?labelSelector=s%3D{tag}"), 200)


def lease_renewed_on_b_not_expired_on_a(rs):
    """bj-1 holds pool beijing (3 s leases) and renews through B; bj-2 tries to take
    it through A. A must refuse for as long as the renewals go on (well past
    several lease durations), and accept only once a full duration has passed
    since the last renewal."""
    a, b = rs["A"], rs["B"]
    duration = 3
    holder, taker = b.token("bj-1-token"), a.token("bj-2-token")
    now = microtime()
    r = holder.request("POST", BASE + "/poolleases",
                       {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": "beijing"},
                        "spec": {"holderIdentity": "bj-1", "leaseDurationSeconds": duration, "acquireTime": now,
                                 "renewTime": now, "leaseTransitions": 0}})
    expect_status(r, 201)
    stop = threading.Event()
    last_renewal = {"t": time.monotonic()}
    renew_errors = []

    def renewer():
        while not stop.is_set():
            t0 = time.monotonic()
            cur = holder.request("GET", BASE + "/poolleases/beijing").json()
            cur["spec"]["renewTime"] = microtime()
            r = holder.request("PUT", BASE + "/poolleases/beijing", cur)
            if r.status == 200:
                last_renewal["t"] = t0   # the renewal was sent no earlier than this
            elif r.status != 409:
                renew_errors.append(f"{r.status} {r.body[:200]}")
            stop.wait(1.0)

    def takeover():
        cur = taker.request("GET", BASE + "/poolleases/beijing").json()
        cur["spec"].update(holderIdentity="bj-2", acquireTime=microtime(), renewTime=microtime(),
                           leaseTransitions=cur["spec"].get("leaseTransitions", 0) + 1)
        return taker.request("PUT", BASE + "/poolleases/beijing", cur)

    t = threading.Thread(target=renewer)
    t.start()
    refusals = live_refusals = 0
    try:
        t_end = time.monotonic() + 3 * duration + 1
        while time.monotonic() < t_end:
            r = takeover()
            expect(r.status != 200, f"A let bj-2 take a lease bj-1 renews through B: {r.body[:300]}")
            expect_status(r, 409, "Conflict")
            refusals += 1
            if "bj-1" in r.json()["message"]:
                live_refusals += 1
            time.sleep(0.5)
    finally:
        stop.set()
        t.join(10)
    expect(not renew_errors, f"renewals through B failed: {renew_errors[:3]}")
    expect(live_refusals >= refusals // 2, f"only {live_refusals}/{refusals} refusals named the live holder")
    # Renewals stopped: the takeover through A succeeds, but not before a full
    # duration after the last renewal.
    won = wait_for("the takeover through A after the renewals stopped",
                   lambda: (r := takeover()).status == 200 and (time.monotonic(), r), timeout=duration * 4,
                   every=0.2)
    waited = won[0] - last_renewal["t"]
    expect(waited >= duration, f"A judged the lease expired {waited:.2f}s after the last renewal (< {duration}s)")
    expect(won[1].json()["spec"]["holderIdentity"] == "bj-2", won[1].body[:300])
    print(f"  {refusals} takeovers refused through A while B renewed; accepted {waited:.2f}s after the "
          f"last renewal (duration {duration}s)", flush=True)


CASES = [parallel_updates_one_winner, watch_on_a_sees_writes_on_b, lease_renewed_on_b_not_expired_on_a,
         kill9_under_load_loses_no_acknowledged_write]


def main():
    args = e2e_args()
    binary = args.binary
    passed = failed = 0
    Env.etcd = EtcdFixture()
    try:
        # Memberships from a file: no cloud cluster, so no replica election here
        # (test_cluster_pods_replicas.py runs the chart's replicas as real pods).
        prefix = f"/replicas/{uuid.uuid4().hex[:8]}"
        flags = ["--storage-backend=etcd3", f"--etcd-servers={Env.etcd.endpoint}", f"--etcd-prefix={prefix}"]
        for name in ("A", "B"):
            Env.replicas[name] = Server(binary, extra_args=flags)
        for case in CASES:
            if run_one(case, Env.replicas):
                passed += 1
            else:
                failed += 1
            for name, s in Env.replicas.items():
                if s.proc.poll() is not None:
                    print(f"replica {name} exited ({s.proc.returncode}) after {case.__name__}:\n{s.read_log()}")
                    failed += 1
                    s.start()
    finally:
        for name, s in Env.replicas.items():
            s.stop()
            if failed or args.keep:
                print(f"replica {name} log tail:\n{s.read_log()}")
            s.cleanup()
        Env.etcd.stop()
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
