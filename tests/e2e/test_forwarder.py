"""Forwarding delegated heartbeats into the cloud's node Leases, against the cloud
fixture (tests/e2e/cloud_fixture.py, kube-apiserver semantics): membership from
the Nodes' pool label, a cloud Lease created when missing, renewTime that never
goes backwards whatever the edge clocks say, the taint after the threshold, and the
clean-up when the kubelet renews its own Lease again — also across a restart of
poolcoord in between. Events and metrics are checked on the way."""
import os
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cloud_fixture import CloudFixture  # noqa: E402
from harness import BASE, GV, Server, expect, expect_status, microtime, run_cases, wait_for  # noqa: E402

POOL_LABEL = "apps.openyurt.io/nodepool"
DELEGATE = "openyurt.io/delegate-heartbeat"
TAINT = "node.openyurt.io/unschedulable"
FORWARDER = "system:serviceaccount:kube-system:poolcoord"

CLOUD = None



def delegated(node, pool, delegate, renew=None):
    return {"apiVersion": GV, "kind": "DelegatedLease",
            "metadata": {"name": node, "annotations": {DELEGATE: "true"}},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": renew or microtime(),
                     "poolName": pool, "delegate": delegate}}


def lead(s, pool, node):
    c = s.token(f"{node}-token")

    def acquire():
        now = microtime()
        r = c.request("POST", BASE + "/poolleases",
                      {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": pool},
                       "spec": {"holderIdentity": node, "leaseDurationSeconds": 60, "acquireTime": now,
                                "renewTime": now, "leaseTransitions": 0}})
        return r.status in (201, 409)
    wait_for("membership from Nodes and the PoolLease", acquire)
    return c


def membership_from_node_labels(s):
    # hz-* carry the pool label in the cloud; no membership file was given
    c = s.token("hz-2-token")
    r = c.request("POST", BASE + "/poolleases",
                  {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": "beijing"},
                   "spec": {"holderIdentity": "hz-2", "leaseDurationSeconds": 30}})
    expect_status(r, 403, "Forbidden")
    leader = lead(s, "hangzhou", "hz-1")
    # relabelling a Node moves it between pools, live
    CLOUD.state.relabel_node("hz-4", {POOL_LABEL: "beijing"})
    # dry runs: the rules judge the write, nothing is stored
    probe = BASE + "/delegatedleases?dryRun=All"
    wait_for("hz-4 moved to beijing", lambda: leader.request(
        "POST", probe, delegated("hz-4", "hangzhou", "hz-1")).status == 422)
    CLOUD.state.relabel_node("hz-4", {POOL_LABEL: "hangzhou"})
    wait_for("hz-4 back in hangzhou", lambda: leader.request(
        "POST", probe, delegated("hz-4", "hangzhou", "hz-1")).status == 201)


def missing_cloud_lease_is_created(s):
    leader = lead(s, "hangzhou", "hz-1")
    expect(CLOUD.state.lease("hz-3") is None, "fixture starts without hz-3's Lease")
    expect_status(leader.request("POST", BASE + "/delegatedleases", delegated("hz-3", "hangzhou", "hz-1")), 201)
    lease = wait_for("cloud Lease hz-3", lambda: CLOUD.state.lease("hz-3"))
    expect(lease["metadata"]["annotations"].get(DELEGATE) == "true", lease)
    expect(lease["spec"]["holderIdentity"] == "hz-3", lease)
    ev = wait_for("DelegationStarted event", lambda: [e for e in CLOUD.state.events
                                                      if e["reason"] == "DelegationStarted"
                                                      and e["involvedObject"]["name"] == "hz-3"])
    expect(ev, "event")


def renew_time_never_goes_backwards(s):
    leader = lead(s, "hangzhou", "hz-1")
    # the kubelet's clock ran an hour ahead before the node lost the cloud
    future = (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    CLOUD.state.put_lease({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                           "metadata": {"name": "hz-2"},
                           "spec": {"holderIdentity": "hz-2", "leaseDurationSeconds": 40, "renewTime": future}})
    # and the leader's clock runs ten minutes behind
    old = (datetime.now(timezone.utc) - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    expect_status(leader.request("POST", BASE + "/delegatedleases", delegated("hz-2", "hangzhou", "hz-1", old)), 201)
    lease = wait_for("forwarded hz-2", lambda: (l := CLOUD.state.lease("hz-2")) and
                     DELEGATE in (l["metadata"].get("annotations") or {}) and l)
    expect(lease["spec"]["renewTime"] > future, f"renewTime went backwards: {lease['spec']['renewTime']} <= {future}")
    first = lease["spec"]["renewTime"]
    dl = expect_status(leader.request("GET", BASE + "/delegatedleases/hz-2"), 200).json()
    dl["spec"]["renewTime"] = (datetime.now(timezone.utc) - timedelta(minutes=9)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    expect_status(leader.request("PUT", BASE + "/delegatedleases/hz-2", dl), 200)
    wait_for("second forward", lambda: CLOUD.state.lease("hz-2")["spec"]["renewTime"] > first)


def taint_after_threshold_and_cleanup_after_restart(s):
    leader = lead(s, "hangzhou", "hz-1")
    CLOUD.state.put_lease({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "hz-4"},
                           "spec": {"holderIdentity": "hz-4", "leaseDurationSeconds": 40,
                                    "renewTime": microtime(-60)}})
    expect_status(leader.request("POST", BASE + "/delegatedleases", delegated("hz-4", "hangzhou", "hz-1")), 201)
    wait_for("hz-4 delegated", lambda: DELEGATE in (CLOUD.state.lease("hz-4")["metadata"].get("annotations") or {}))

    def renew_dl():
        dl = leader.request("GET", BASE + "/delegatedleases/hz-4").json()
        dl["spec"]["renewTime"] = microtime()
        leader.request("PUT", BASE + "/delegatedleases/hz-4", dl)

    def tainted():
        renew_dl()
        n = CLOUD.state.node("hz-4")
        return any(t["key"] == TAINT and t["effect"] == "NoSchedule" and t["value"] == "true"
                   for t in n["spec"].get("taints", []))
    wait_for("taint after the threshold", tainted, timeout=30)
    # Issue 11: the taint is a patch (the chart's RBAC grants nodes patch, not
    # update; the fixture refuses a PUT with 403), and nothing failed on the way.
    expect(CLOUD.state.count("PATCH", "/api/v1/nodes/hz-4") >= 1, "the taint is a PATCH")
    expect(CLOUD.state.count("PUT", "/api/v1/nodes/hz-4") == 0, "no PUT of the Node")
    m = s.anonymous().request("GET", "/metrics", accept=None).body
    expect("poolcoord_forward_errors_total 0\n" in m, "forwarding errors counted: " + m[:2000])
    # poolcoord restarts; meanwhile the node comes back and its kubelet renews
    s.stop()
    CLOUD.state.kubelet_renew("hz-4", microtime())
    s.start()
    leader = s.token("hz-1-token")

    def cleaned():
        l = CLOUD.state.lease("hz-4")
        n = CLOUD.state.node("hz-4")
        return (DELEGATE not in (l["metadata"].get("annotations") or {})
                and not any(t["key"] == TAINT for t in n["spec"].get("taints", [])))
    wait_for("annotation and taint removed after the kubelet's own renewal", cleaned, timeout=30)
    # Events follow the writes they report (best effort, after the write).
    wait_for("the four events", lambda: {"DelegationStarted", "TaintAdded", "DelegationStopped", "TaintRemoved"}
             <= {e["reason"] for e in CLOUD.state.events if e["involvedObject"]["name"] == "hz-4"})


def metrics_and_leader_events(s):
    m = s.anonymous().request("GET", "/metrics", accept=None).body
    for name in ("poolcoord_forwards_total", "poolcoord_forward_duration_seconds_bucket",
                 "poolcoord_delegated_nodes", "poolcoord_forward_errors_total"):
        expect(name in m, f"{name} missing from /metrics")
    expect(any(e["reason"] == "LeaderChanged" for e in CLOUD.state.events), "no LeaderChanged event")


def make_server(binary):
    global CLOUD
    work = tempfile.mkdtemp(prefix="poolcoord-cloud-")
    CLOUD = CloudFixture(work)
    for n in ("hz-1", "hz-2", "hz-3", "hz-4"):
        CLOUD.state.add_node(n, {POOL_LABEL: "hangzhou"})
    for n in ("bj-1", "bj-2"):
        CLOUD.state.add_node(n, {POOL_LABEL: "beijing"})
    return Server(binary, membership_file=False,
                  extra_args=[f"--kubeconfig={CLOUD.kubeconfig}", f"--forwarder-user={FORWARDER}",
                              "--delegation-taint-after=2s", "--forwarder-resync-period=500ms"])


CASES = [membership_from_node_labels, missing_cloud_lease_is_created, renew_time_never_goes_backwards,
         taint_after_threshold_and_cleanup_after_restart, metrics_and_leader_events]

if __name__ == "__main__":
    rc = run_cases(CASES, make_server)
    if CLOUD:
        CLOUD.stop()
    sys.exit(rc)
