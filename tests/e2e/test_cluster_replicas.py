"""The chart's etcd3 variant with two replicas in a real cluster (issue 7's replica
election, issue 11's real control plane): both replicas run with the rendered
Deployment's arguments (--leader-elect, the election Lease in the release's
namespace through the chart's leader-election Role, timings from
values.leaderElection: 4 s / 3 s / 1 s here), sharing one etcd
(tests/e2e/etcd_fixture.py):

- both replicas are ready, live and serve the API and /metrics; exactly one leads;
- only the leader forwards, whichever replica took the DelegatedLease write;
- killing the forwarding replica (kill -9) hands forwarding to the other within
  leaseDuration + 2 x retryPeriod (no margin), and the election Lease is never
  taken before leaseDuration has passed since the dead leader's last renewal
  (both measured and printed); the restarted replica comes back as the standby.

The store-level replica cases (parallel updates, watches across replicas, kill -9
under load, lease expiry judged by each replica) are test_replicas.py's, which
needs no cluster. Skipped (exit 77) without kube-apiserver/kube-controller-manager
binaries."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_fixture import EtcdFixture  # noqa: E402
from harness import BASE, GV, expect, expect_status, microtime  # noqa: E402
from harness import wait_for as harness_wait_for  # noqa: E402
from kube_cluster import DELEGATE, POOL_LABEL, ChartInstall, KubeCluster, Kubelet, parse_micro, run_cluster_cases  # noqa: E402

LEASE_S, RENEW_S, RETRY_S = 4.0, 3.0, 1.0
NODE_LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def wait_for(what, fn, timeout=30, every=0.1):
    return harness_wait_for(what, fn, timeout, every)


class Env:
    def __init__(self, binary):
        self.cluster = KubeCluster(kcm=False)
        try:
            self.etcd = EtcdFixture(name="poolcoord")
            self.pc = ChartInstall(self.cluster, binary, values=[
                "storage.backend=etcd3", "replicas=2", f"storage.etcd.servers={{{self.etcd.endpoint}}}",
                f"leaderElection.leaseDuration={LEASE_S:.0f}s", f"leaderElection.renewDeadline={RENEW_S:.0f}s",
                f"leaderElection.retryPeriod={RETRY_S:.0f}s",
                "server.extraArgs={--forwarder-resync-period=500ms}"])
            for n in ("hz-1", "hz-2", "hz-3"):
                Kubelet(self.cluster, n, {POOL_LABEL: "hangzhou"}).register()
            self.admin = self.cluster.admin()
            self.election = (f"/apis/coordination.k8s.io/v1/namespaces/{self.pc.namespace}/leases/"
                             f"{self.pc.one('Deployment')['metadata']['name']}")
        except BaseException:
            self.cluster.stop()
            raise

    def master(self, i):
        try:
            return self.pc.metric("leader_election_master_status", replica=i)
        except OSError:
            return None

    def leader(self):
        """The one replica whose /metrics says it leads, once exactly one does."""
        def one():
            status = {i: self.master(i) for i in range(2) if self.pc.procs[i].alive()}
            leaders = [i for i, v in status.items() if v == 1]
            return (leaders[0],) if len(leaders) == 1 and all(v in (0, 1) for v in status.values()) else None
        return wait_for("exactly one replica leading", one, timeout=LEASE_S * 4)[0]

    def election_lease(self):
        return expect_status(self.admin.request("GET", self.election), 200).json()

    def node_lease_rv(self, node):
        r = self.admin.request("GET", f"{NODE_LEASES}/{node}")
        return int(r.json()["metadata"]["resourceVersion"]) if r.status == 200 else 0

    def logs(self):
        return self.cluster.logs()

    def stop(self):
        self.cluster.stop()
        self.etcd.stop()


def standby_ready_live_and_serves(env):
    leader = env.leader()
    standby = 1 - leader
    anon = env.pc.direct(replica=standby)
    for path in ("/readyz", "/livez", "/healthz"):
        expect_status(anon.request("GET", path, accept=None), 200)
    r = expect_status(anon.request("GET", "/livez?verbose", accept=None), 200)
    expect("[+]leaderElection ok" in r.body, f"/livez?verbose on the standby: {r.body}")
    expect(env.master(standby) == 0 and env.master(leader) == 1, "master status")
    node = env.pc.direct(cert=env.cluster.pki.node("hz-1"), replica=standby)
    expect_status(node.request("GET", BASE + "/poolleases"), 200)
    holder = env.election_lease()["spec"].get("holderIdentity")
    expect(holder, "the election Lease in the release's namespace has a holder")


def delegated(node, pool, delegate):
    return {"apiVersion": GV, "kind": "DelegatedLease",
            "metadata": {"name": node, "annotations": {DELEGATE: "true"}},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": microtime(),
                     "poolName": pool, "delegate": delegate}}


def only_leader_forwards_and_handover(env):
    pc = env.pc
    leader = env.leader()
    standby = 1 - leader
    hz1 = {i: pc.direct(cert=env.cluster.pki.node("hz-1"), replica=i) for i in range(2)}
    now = microtime()
    expect_status(hz1[standby].request(
        "POST", BASE + "/poolleases",
        {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": "hangzhou"},
         "spec": {"holderIdentity": "hz-1", "leaseDurationSeconds": 120, "acquireTime": now,
                  "renewTime": now, "leaseTransitions": 0}}), 201)
    before = {i: pc.metric("poolcoord_forwards_total", replica=i) for i in range(2)}
    expect_status(hz1[standby].request("POST", BASE + "/delegatedleases", delegated("hz-3", "hangzhou", "hz-1")), 201)
    expect_status(hz1[leader].request("POST", BASE + "/delegatedleases", delegated("hz-2", "hangzhou", "hz-1")), 201)
    for node in ("hz-3", "hz-2"):
        wait_for(f"{node}'s Lease forwarded", lambda: (
            env.admin.request("GET", f"{NODE_LEASES}/{node}").json()["metadata"].get("annotations") or {}
        ).get(DELEGATE) == "true")
    wait_for("the leader to count both forwards",
             lambda: pc.metric("poolcoord_forwards_total", replica=leader) - before[leader] >= 2)
    after = {i: pc.metric("poolcoord_forwards_total", replica=i) for i in range(2)}
    expect(after[standby] == before[standby] == 0, f"the standby forwarded: {before} -> {after}")

    stop = threading.Event()
    renew_errors = []

    def renewer():
        c = pc.direct(cert=env.cluster.pki.node("hz-1"), replica=standby)
        while not stop.is_set():
            dl = c.request("GET", BASE + "/delegatedleases/hz-3")
            if dl.status == 200:
                body = dl.json()
                body["spec"]["renewTime"] = microtime()
                r = c.request("PUT", BASE + "/delegatedleases/hz-3", body)
                if r.status not in (200, 409):
                    renew_errors.append(f"{r.status} {r.body[:200]}")
            stop.wait(0.2)
    t = threading.Thread(target=renewer)
    t.start()
    try:
        rv0 = env.node_lease_rv("hz-3")
        wait_for("renewals forwarded before the kill", lambda: env.node_lease_rv("hz-3") >= rv0 + 2)
        old_identity = env.election_lease()["spec"]["holderIdentity"]
        pc.procs[leader].kill()
        t_kill = time.monotonic()
        # A forward already on the wire may still land in the first moments;
        # anything after 1 s is the new leader's.
        quiet_rv = t_acquired = t_forward = last_renew = new_acquire = None
        deadline = t_kill + LEASE_S + 2 * RETRY_S + 15
        while time.monotonic() < deadline and t_forward is None:
            now = time.monotonic()
            if quiet_rv is None and now - t_kill >= 1.0:
                quiet_rv = env.node_lease_rv("hz-3")
            rec = env.election_lease()
            if rec["spec"].get("holderIdentity") == old_identity:
                last_renew = rec["spec"]["renewTime"]
            if t_acquired is None and rec["spec"].get("holderIdentity") not in ("", old_identity):
                t_acquired = now
                new_acquire = rec["spec"]["acquireTime"]
            if quiet_rv is not None and env.node_lease_rv("hz-3") > quiet_rv:
                t_forward = now
            time.sleep(0.02)
        expect(t_forward is not None, f"no forward by the new leader within {LEASE_S + 2 * RETRY_S + 15:.0f}s")
        expect(t_acquired is not None and t_acquired <= t_forward + 0.05,
               "the forward came before the election Lease changed hands")
        handover = t_forward - t_kill
        bound = LEASE_S + 2 * RETRY_S
        expect(last_renew is not None and new_acquire is not None,
               f"renewTime of {old_identity} / acquireTime of its successor not seen")
        lease_gap = parse_micro(new_acquire) - parse_micro(last_renew)
        print(f"  handover: election Lease taken {t_acquired - t_kill:.2f}s after kill -9 of the leader "
              f"({lease_gap:.2f}s after its last renewal), first forward by the new leader {handover:.2f}s "
              f"after the kill (bound leaseDuration {LEASE_S:.0f}s + 2 x retryPeriod {RETRY_S:.0f}s = "
              f"{bound:.1f}s)", flush=True)
        expect(handover <= bound, f"handover took {handover:.2f}s > {bound:.1f}s")
        expect(lease_gap >= LEASE_S, f"the Lease was taken early: {lease_gap:.3f}s after the last renewal")
        floor = LEASE_S - RETRY_S - 0.1
        expect(handover >= floor, f"handover after {handover:.2f}s (< {floor:.1f}s): the lease was taken early")
        wait_for("the survivor to report itself leader", lambda: env.master(standby) == 1, timeout=5)
        expect(not renew_errors, f"renewals through the standby failed: {renew_errors[:3]}")
    finally:
        stop.set()
        t.join(10)
        if not pc.procs[leader].alive():
            pc.procs[leader].start()
            pc.wait_ready(replica=leader)
    wait_for("the restarted replica to report standby", lambda: env.master(leader) == 0)
    expect(env.leader() == standby, "leadership moved again")


CASES = [standby_ready_live_and_serves, only_leader_forwards_and_handover]

if __name__ == "__main__":
    sys.exit(run_cluster_cases(CASES, Env, __doc__))
