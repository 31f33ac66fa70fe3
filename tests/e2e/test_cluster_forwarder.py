"""The forwarder against a real kube-apiserver (tests/e2e/kube_cluster.py), with
poolcoord deployed from its chart, so its writes of node Leases, Nodes and Events
carry the chart ServiceAccount's identity through RBAC, NodeRestriction's
neighbours, the webhook and the ValidatingAdmissionPolicy: membership from the
Nodes' pool label (followed live), a missing cloud Lease created, renewTime that
never goes backwards whatever the edge clocks say, the clean-up when the kubelet
renews its own Lease again (also across a restart of poolcoord in between), the
Events and metrics. The chart's server.extraArgs shorten the taint threshold and
the resync period (2 s, 500 ms). Stand-in kubelets renew with the nodes' own
client certificates; no kube-controller-manager runs (the node lifecycle
controller's verdicts are test_cluster_lifecycle.py's).

Skipped (exit 77) without kube-apiserver/kube-controller-manager binaries."""
import os
import sys
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import BASE, GV, expect, expect_status, microtime, wait_for  # noqa: E402
from kube_cluster import (DELEGATE, POOL_LABEL, ChartInstall, KubeCluster, Kubelet, parse_micro,  # noqa: E402
                          run_cluster_cases)

NODE_LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
TAINT = "node.openyurt.io/unschedulable"
NODES = {"hz-1": "hangzhou", "hz-2": "hangzhou", "hz-3": "hangzhou", "hz-4": "hangzhou",
         "bj-1": "beijing", "bj-2": "beijing"}


class Env:
    def __init__(self, binary):
        self.cluster = KubeCluster(kcm=False)
        try:
            self.pc = ChartInstall(self.cluster, binary, values=[
                "server.extraArgs={--delegation-taint-after=2s,--forwarder-resync-period=500ms}"])
            # hz-3 has no Lease yet; the kubelets renew only when a case asks.
            self.kubelets = {n: Kubelet(self.cluster, n, {POOL_LABEL: p}).register(lease=(n != "hz-3"))
                             for n, p in NODES.items()}
            self.admin = self.cluster.admin()
        except BaseException:
            self.cluster.stop()
            raise

    def lease(self, node):
        r = self.admin.request("GET", f"{NODE_LEASES}/{node}")
        return r.json() if r.status == 200 else None

    def node(self, node):
        return expect_status(self.admin.request("GET", f"/api/v1/nodes/{node}"), 200).json()

    def events(self, node=None):
        items = expect_status(self.admin.request("GET", "/api/v1/namespaces/default/events"), 200).json()["items"]
        return [e for e in items if node is None or e["involvedObject"]["name"] == node]

    def logs(self):
        return self.cluster.logs()

    def stop(self):
        self.cluster.stop()


def delegated(node, pool, delegate, renew=None):
    return {"apiVersion": GV, "kind": "DelegatedLease",
            "metadata": {"name": node, "annotations": {DELEGATE: "true"}},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": renew or microtime(),
                     "poolName": pool, "delegate": delegate}}


def lead(env, pool, node):
    c = env.cluster.node_client(node)

    def acquire():
        now = microtime()
        r = c.request("POST", BASE + "/poolleases",
                      {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": pool},
                       "spec": {"holderIdentity": node, "leaseDurationSeconds": 120, "acquireTime": now,
                                "renewTime": now, "leaseTransitions": 0}})
        return r.status in (201, 409)
    wait_for("membership from the Nodes and the PoolLease", acquire)
    return c


def annotated(lease):
    return lease is not None and (lease["metadata"].get("annotations") or {}).get(DELEGATE) == "true"


def membership_from_node_labels(env):
    r = env.cluster.node_client("hz-2").request(
        "POST", BASE + "/poolleases", {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": "beijing"},
                                       "spec": {"holderIdentity": "hz-2", "leaseDurationSeconds": 30}})
    expect_status(r, 403, "Forbidden")
    leader = lead(env, "hangzhou", "hz-1")
    probe = BASE + "/delegatedleases?dryRun=All"
    env.cluster.kubectl("label", "node", "hz-4", f"{POOL_LABEL}=beijing", "--overwrite", check=True)
    wait_for("hz-4 moved to beijing", lambda: leader.request(
        "POST", probe, delegated("hz-4", "hangzhou", "hz-1")).status == 422)
    env.cluster.kubectl("label", "node", "hz-4", f"{POOL_LABEL}=hangzhou", "--overwrite", check=True)
    wait_for("hz-4 back in hangzhou", lambda: leader.request(
        "POST", probe, delegated("hz-4", "hangzhou", "hz-1")).status == 201)


def missing_cloud_lease_is_created(env):
    leader = lead(env, "hangzhou", "hz-1")
    expect(env.lease("hz-3") is None, "hz-3 starts without a Lease")
    expect_status(leader.request("POST", BASE + "/delegatedleases", delegated("hz-3", "hangzhou", "hz-1")), 201)
    lease = wait_for("hz-3's Lease created by the forwarder", lambda: annotated(env.lease("hz-3")) and env.lease("hz-3"))
    expect(lease["spec"]["holderIdentity"] == "hz-3", lease["spec"])
    wait_for("a DelegationStarted Event", lambda: [e for e in env.events("hz-3") if e["reason"] == "DelegationStarted"])
    expect_status(leader.request("DELETE", BASE + "/delegatedleases/hz-3"), 200)


def renew_time_never_goes_backwards(env):
    leader = lead(env, "hangzhou", "hz-1")
    # The kubelet's clock ran an hour ahead before the node lost the cloud ...
    future = (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    env.kubelets["hz-2"].renew(renew_time=future)
    # ... and the leader's clock runs ten minutes behind.
    old = (datetime.now(timezone.utc) - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    expect_status(leader.request("POST", BASE + "/delegatedleases", delegated("hz-2", "hangzhou", "hz-1", old)), 201)
    lease = wait_for("hz-2 forwarded", lambda: annotated(env.lease("hz-2")) and env.lease("hz-2"))
    first = parse_micro(lease["spec"]["renewTime"])
    expect(first > parse_micro(future), f"renewTime went backwards: {lease['spec']['renewTime']} <= {future}")
    dl = expect_status(leader.request("GET", BASE + "/delegatedleases/hz-2"), 200).json()
    dl["spec"]["renewTime"] = (datetime.now(timezone.utc) - timedelta(minutes=9)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    expect_status(leader.request("PUT", BASE + "/delegatedleases/hz-2", dl), 200)
    wait_for("a later forward", lambda: parse_micro(env.lease("hz-2")["spec"]["renewTime"]) > first)
    expect_status(leader.request("DELETE", BASE + "/delegatedleases/hz-2"), 200)


def cleanup_after_restart(env):
    """The kubelet renews while poolcoord is down: after the restart, the marks go
    (all state lives on the cloud objects)."""
    leader = lead(env, "hangzhou", "hz-1")
    env.kubelets["hz-4"].renew(renew_time=microtime(-60))
    expect_status(leader.request("POST", BASE + "/delegatedleases", delegated("hz-4", "hangzhou", "hz-1")), 201)
    wait_for("hz-4 delegated", lambda: annotated(env.lease("hz-4")))
    env.pc.proc.stop()
    env.kubelets["hz-4"].renew()  # writes back the annotations it read (the admission policy allows that)
    env.pc.proc.start()
    env.pc.wait_ready()
    env.pc.wait_available()
    leader = env.cluster.node_client("hz-1")

    def cleaned():
        lease = env.lease("hz-4")
        ours = [k for k in (lease["metadata"].get("annotations") or {})
                if k == DELEGATE or k.startswith("coordination.pool/")]
        taints = [t for t in env.node("hz-4")["spec"].get("taints", []) if t["key"] == TAINT]
        return not ours and not taints
    wait_for("annotations removed after the kubelet's own renewal", cleaned, timeout=30)
    wait_for("DelegationStopped", lambda: [e for e in env.events("hz-4") if e["reason"] == "DelegationStopped"])
    leader.request("DELETE", BASE + "/delegatedleases/hz-4")


def metrics_and_leader_events(env):
    m = env.pc.metrics()
    for name in ("poolcoord_forwards_total", "poolcoord_forward_duration_seconds_bucket",
                 "poolcoord_delegated_nodes", "poolcoord_forward_errors_total"):
        expect(name in m, f"{name} missing from /metrics")
    expect(env.pc.metric("poolcoord_forwards_total") > 0, "nothing forwarded")
    changed = [e for e in env.events() if e["reason"] == "LeaderChanged"]
    expect(changed and changed[0]["involvedObject"]["kind"] == "PoolLease", f"LeaderChanged: {changed[:1]}")
    expect(changed[0]["source"].get("component") or changed[0].get("reportingComponent"), changed[0])


def taint_after_threshold(env):
    """Defect 1: the taint is a patch (the chart grants nodes patch, not update), it
    goes on once the node has been delegated for --delegation-taint-after (2 s
    here) and off when the kubelet renews again; no forwarding error."""
    errors_before = env.pc.metric("poolcoord_forward_errors_total")
    env.kubelets["bj-2"].renew(renew_time=microtime(-60))
    # bj-2 is in beijing: its leader is bj-1.
    leader = lead(env, "beijing", "bj-1")
    expect_status(leader.request("POST", BASE + "/delegatedleases", delegated("bj-2", "beijing", "bj-1")), 201)

    def tainted():
        dl = leader.request("GET", BASE + "/delegatedleases/bj-2").json()
        dl["spec"]["renewTime"] = microtime()
        leader.request("PUT", BASE + "/delegatedleases/bj-2", dl)
        return any(t["key"] == TAINT and t["effect"] == "NoSchedule" and t.get("value") == "true"
                   for t in env.node("bj-2")["spec"].get("taints", []))
    wait_for("the taint after the threshold", tainted, timeout=30)
    errors = env.pc.metric("poolcoord_forward_errors_total") - errors_before
    expect(errors == 0, f"{errors} forwarding errors while tainting")
    expect_status(leader.request("DELETE", BASE + "/delegatedleases/bj-2"), 200)
    env.kubelets["bj-2"].renew()
    wait_for("the taint removed after the kubelet's own renewal", lambda: not any(
        t["key"] == TAINT for t in env.node("bj-2")["spec"].get("taints", [])), timeout=30)
    wait_for("TaintAdded and TaintRemoved Events", lambda: {"TaintAdded", "TaintRemoved"} <= {
        e["reason"] for e in env.events("bj-2")})


CASES = [membership_from_node_labels, missing_cloud_lease_is_created, renew_time_never_goes_backwards,
         metrics_and_leader_events, taint_after_threshold, cleanup_after_restart]

if __name__ == "__main__":
    sys.exit(run_cluster_cases(CASES, Env, __doc__))
