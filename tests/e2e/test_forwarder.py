"""The forwarder when the cloud misbehaves: what a real kube-apiserver cannot be made
to do, against the cloud fixture (tests/e2e/cloud_fixture.py, kube-apiserver's
semantics plus injected faults). Everything else the forwarder does is tested
against the real one (test_cluster_forwarder.py, test_cluster_lifecycle.py).

Each failed read or write of a cloud Lease or Node (an HTTP 500, a connection
dropped on every attempt, no answer within the client's 10 s) is counted in
poolcoord_forward_errors_total and logged with the node and what failed, and the
next resync forwards (or taints) once the cloud answers again; a connection
dropped once or twice is sent again (three attempts, cloud/rest_client.h) and
costs nothing."""
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cloud_fixture import CloudFixture  # noqa: E402
from harness import BASE, GV, Server, expect, expect_status, microtime, run_cases, wait_for  # noqa: E402

POOL_LABEL = "apps.openyurt.io/nodepool"
DELEGATE = "openyurt.io/delegate-heartbeat"
TAINT = "node.openyurt.io/unschedulable"
FORWARDER = "system:serviceaccount:kube-system:poolcoord"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"

CLOUD = None


def delegated(node, pool, delegate):
    return {"apiVersion": GV, "kind": "DelegatedLease",
            "metadata": {"name": node, "annotations": {DELEGATE: "true"}},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": microtime(),
                     "poolName": pool, "delegate": delegate}}


def lead(s):
    c = s.token("hz-1-token")

    def acquire():
        now = microtime()
        r = c.request("POST", BASE + "/poolleases",
                      {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": "hangzhou"},
                       "spec": {"holderIdentity": "hz-1", "leaseDurationSeconds": 300, "acquireTime": now,
                                "renewTime": now, "leaseTransitions": 0}})
        return r.status in (201, 409)
    wait_for("membership from Nodes and the PoolLease", acquire)
    return c


def errors(s):
    body = s.anonymous().request("GET", "/metrics", accept=None).body
    line = [x for x in body.splitlines() if x.startswith("poolcoord_forward_errors_total ")]
    return float(line[0].split()[1]) if line else 0.0


def stale_lease(node):
    CLOUD.state.put_lease({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": node},
                           "spec": {"holderIdentity": node, "leaseDurationSeconds": 40,
                                    "renewTime": microtime(-60)}})


def annotated(node):
    lease = CLOUD.state.lease(node)
    return lease is not None and (lease["metadata"].get("annotations") or {}).get(DELEGATE) == "true"


def expect_counted_and_logged(s, before, node, what):
    wait_for(f"{what}: the error counted", lambda: errors(s) > before, timeout=20)
    log = s.read_log()
    expect(f"forwarder: node {node}: " in log and "failed" in log, f"{what}: not logged:\n{log[-1500:]}")


def lease_write_failure_is_counted_and_retried(s):
    leader = lead(s)
    stale_lease("hz-2")
    before = errors(s)
    CLOUD.state.inject("PUT", f"{LEASES}/hz-2", 500, times=2)
    expect_status(leader.request("POST", BASE + "/delegatedleases", delegated("hz-2", "hangzhou", "hz-1")), 201)
    expect_counted_and_logged(s, before, "hz-2", "PUT of hz-2's Lease answered 500")
    wait_for("hz-2 forwarded once the cloud answers", lambda: annotated("hz-2"), timeout=15)


def dropped_connections_are_retried_then_counted(s):
    """The cloud client sends an idempotent request again when its connection drops
    (three attempts): two drops cost nothing; a drop on every attempt counts."""
    leader = lead(s)
    stale_lease("hz-3")
    before = errors(s)
    CLOUD.state.inject("PUT", f"{LEASES}/hz-3", "drop", times=2)
    expect_status(leader.request("POST", BASE + "/delegatedleases", delegated("hz-3", "hangzhou", "hz-1")), 201)
    wait_for("hz-3 forwarded through two dropped connections", lambda: annotated("hz-3"), timeout=10)
    expect(errors(s) == before, "a retried drop was counted as an error")
    stale_lease("hz-5")
    CLOUD.state.inject("PUT", f"{LEASES}/hz-5", "drop", times=100000)
    expect_status(leader.request("POST", BASE + "/delegatedleases", delegated("hz-5", "hangzhou", "hz-1")), 201)
    expect_counted_and_logged(s, before, "hz-5", "every PUT of hz-5's Lease dropped")
    CLOUD.state.faults.clear()
    wait_for("hz-5 forwarded once the cloud answers", lambda: annotated("hz-5"), timeout=15)


def lease_read_timeout_is_counted(s):
    leader = lead(s)
    stale_lease("hz-4")
    before = errors(s)
    CLOUD.state.inject("GET", f"{LEASES}/hz-4", "timeout")
    t0 = time.time()
    expect_status(leader.request("POST", BASE + "/delegatedleases", delegated("hz-4", "hangzhou", "hz-1")), 201)
    expect_counted_and_logged(s, before, "hz-4", "GET of hz-4's Lease timing out")
    wait_for("hz-4 forwarded after the timeout", lambda: annotated("hz-4"), timeout=20)
    expect(time.time() - t0 < 20, "forwarding stalled behind one hung request")


def taint_failure_is_counted_and_retried(s):
    leader = lead(s)
    stale_lease("bj-9")
    CLOUD.state.add_node("bj-9", {POOL_LABEL: "hangzhou"})
    before = errors(s)
    CLOUD.state.inject("PATCH", "/api/v1/nodes/bj-9", 500, times=2)
    expect_status(leader.request("POST", BASE + "/delegatedleases", delegated("bj-9", "hangzhou", "hz-1")), 201)

    def tainted():
        dl = leader.request("GET", BASE + "/delegatedleases/bj-9").json()
        dl["spec"]["renewTime"] = microtime()
        leader.request("PUT", BASE + "/delegatedleases/bj-9", dl)
        return any(t["key"] == TAINT for t in CLOUD.state.node("bj-9")["spec"].get("taints", []))
    wait_for("the taint once the Node's PATCH succeeds", tainted, timeout=30)
    expect(errors(s) >= before + 1, "the failed PATCH of the Node was not counted")
    expect("forwarder: node bj-9: " in s.read_log(), "the failed PATCH was not logged")


def make_server(binary):
    global CLOUD
    work = tempfile.mkdtemp(prefix="poolcoord-cloud-")
    CLOUD = CloudFixture(work)
    for n in ("hz-1", "hz-2", "hz-3", "hz-4", "hz-5"):
        CLOUD.state.add_node(n, {POOL_LABEL: "hangzhou"})
    return Server(binary, membership_file=False,
                  extra_args=[f"--kubeconfig={CLOUD.kubeconfig}", f"--forwarder-user={FORWARDER}",
                              "--delegation-taint-after=2s", "--forwarder-resync-period=500ms"])


CASES = [lease_write_failure_is_counted_and_retried, dropped_connections_are_retried_then_counted,
         lease_read_timeout_is_counted, taint_failure_is_counted_and_retried]

if __name__ == "__main__":
    rc = run_cases(CASES, make_server)
    if CLOUD:
        CLOUD.stop()
        shutil.rmtree(CLOUD.workdir, ignore_errors=True)  # its CA, keys and kubeconfig
    sys.exit(rc)
