"""Forwarding shared among the chart's etcd3 replicas, precisely: which replica
forwards which node, and how fast a dead replica's shards move
(controllers/forwarder_shards.h). Two replicas run with the rendered Deployment's
arguments (--leader-elect, --forwarder-shards from forwarder.shards, the shard and
presence Leases in the release's namespace through the chart's leader-election Role,
timings from values.leaderElection: 4 s / 3 s / 1 s here), sharing one etcd
(tests/e2e/etcd_fixture.py):

- both replicas are ready, live and serve the API and /metrics; each holds half of
  the shards, every shard exactly one holder (leader_election_master_status per
  shard Lease, and the Leases themselves);
- each replica forwards the nodes of its own shards, whichever replica took the
  DelegatedLease write;
- killing a replica that holds shards (kill -9) moves its shards to the other: no
  shard Lease is taken before leaseDuration has passed since the dead holder's last
  renewal, and no delegated node's cloud Lease goes unrenewed for longer than the
  renew interval + leaseDuration + 2 x retryPeriod (both measured and printed); the
  restarted replica gets its half back.

Both processes run on the host (as ChartInstall runs the chart), so nodes are
registered Nodes only: what the shards do to real pods and a real kubelet is
test_cluster_pods_replicas.py's; the same handover under the real node lifecycle
controller with hundreds of nodes is test_cluster_forwarder_scale.py's; the
store-level replica cases are test_replicas.py's. Skipped (exit 77) without
kube-apiserver/kube-controller-manager binaries."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_fixture import EtcdFixture  # noqa: E402
from harness import BASE, GV, expect, expect_status, microtime  # noqa: E402
from harness import wait_for as harness_wait_for  # noqa: E402
from kube_cluster import (DELEGATE, POOL_LABEL, ChartInstall, KubeCluster, Kubelet, forwarder_shard,  # noqa: E402
                          parse_micro, run_cluster_cases)

LEASE_S, RENEW_S, RETRY_S = 4.0, 3.0, 1.0
SHARDS = 4
RENEW_INTERVAL = 10.0  # the forwarder's (the kubelet's) renew interval
NODE_LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def wait_for(what, fn, timeout=30, every=0.1):
    return harness_wait_for(what, fn, timeout, every)


def shard_of(name):
    return forwarder_shard(name, SHARDS)


class Env:
    def __init__(self, binary):
        self.cluster = KubeCluster(kcm=False)
        try:
            self.etcd = EtcdFixture(name="poolcoord")
            self.pc = ChartInstall(self.cluster, binary, values=[
                "storage.backend=etcd3", "replicas=2", f"storage.etcd.servers={{{self.etcd.endpoint}}}",
                f"leaderElection.leaseDuration={LEASE_S:.0f}s", f"leaderElection.renewDeadline={RENEW_S:.0f}s",
                f"leaderElection.retryPeriod={RETRY_S:.0f}s", f"forwarder.shards={SHARDS}",
                "server.extraArgs={--forwarder-resync-period=500ms}"])
            self.name = self.pc.one("Deployment")["metadata"]["name"]
            self.nodes = [f"hz-{i}" for i in range(1, 13)]
            for n in self.nodes:
                Kubelet(self.cluster, n, {POOL_LABEL: "hangzhou"}).register()
            self.admin = self.cluster.admin()
        except BaseException:
            self.cluster.stop()
            raise

    def shard_lease(self, i):
        path = f"/apis/coordination.k8s.io/v1/namespaces/{self.pc.namespace}/leases/{self.name}-shard-{i}"
        r = self.admin.request("GET", path)
        return r.json() if r.status == 200 else None

    def held(self, replica):
        """The shards whose Lease `replica` holds, by its own /metrics."""
        try:
            text = self.pc.metrics(replica)
        except OSError:
            return None
        return {i for i in range(SHARDS)
                if f'leader_election_master_status{{name="{self.name}-shard-{i}"}} 1' in text}

    def split(self):
        """(shards of replica 0, of replica 1) once they hold half each, disjoint."""
        def even():
            a, b = self.held(0), self.held(1)
            ok = a is not None and b is not None and len(a) == len(b) == SHARDS // 2 and not a & b
            return (a, b) if ok else None
        return wait_for("the shards split evenly between the replicas", even, timeout=LEASE_S * 6)

    def renew_time(self, node):
        r = self.admin.request("GET", f"{NODE_LEASES}/{node}")
        return r.json()["spec"].get("renewTime") if r.status == 200 else None

    def logs(self):
        return self.cluster.logs()

    def stop(self):
        self.cluster.stop()
        self.etcd.stop()


def both_serve_and_split_the_shards(env):
    a, b = env.split()
    for i in range(2):
        anon = env.pc.direct(replica=i)
        for path in ("/readyz", "/livez", "/healthz"):
            expect_status(anon.request("GET", path, accept=None), 200)
        r = expect_status(anon.request("GET", "/livez?verbose", accept=None), 200)
        expect("[+]leaderElection ok" in r.body, f"/livez?verbose of replica {i}: {r.body}")
        expect(env.pc.metric("poolcoord_forwarder_owned_shards", replica=i) == SHARDS // 2,
               f"replica {i} owns {SHARDS // 2} shards")
        node = env.pc.direct(cert=env.cluster.pki.node("hz-1"), replica=i)
        expect_status(node.request("GET", BASE + "/poolleases"), 200)
    holders = {env.shard_lease(i)["spec"].get("holderIdentity") for i in range(SHARDS)}
    expect(len(holders) == 2 and "" not in holders and None not in holders,
           f"the shard Leases name two holders: {holders}")
    print(f"  shards: replica 0 holds {sorted(a)}, replica 1 holds {sorted(b)}", flush=True)


def delegated(node, pool, delegate):
    return {"apiVersion": GV, "kind": "DelegatedLease",
            "metadata": {"name": node, "annotations": {DELEGATE: "true"}},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": microtime(),
                     "poolName": pool, "delegate": delegate}}


def each_forwards_its_shards_and_a_kill_moves_them(env):
    pc = env.pc
    a, b = env.split()
    owner = {n: (0 if shard_of(n) in a else 1) for n in env.nodes[1:]}
    expect(set(owner.values()) == {0, 1}, f"both replicas own some of the nodes: {owner}")
    hz1 = {i: pc.direct(cert=env.cluster.pki.node("hz-1"), replica=i) for i in range(2)}
    now = microtime()
    expect_status(hz1[0].request(
        "POST", BASE + "/poolleases",
        {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": "hangzhou"},
         "spec": {"holderIdentity": "hz-1", "leaseDurationSeconds": 300, "acquireTime": now,
                  "renewTime": now, "leaseTransitions": 0}}), 201)
    before = {i: pc.metric("poolcoord_forwards_total", replica=i) for i in range(2)}
    # Each DelegatedLease is written through the replica that does NOT forward it.
    for n, o in owner.items():
        expect_status(hz1[1 - o].request("POST", BASE + "/delegatedleases", delegated(n, "hangzhou", "hz-1")), 201)
    for n in owner:
        wait_for(f"{n}'s Lease forwarded", lambda n=n: (
            env.admin.request("GET", f"{NODE_LEASES}/{n}").json()["metadata"].get("annotations") or {}
        ).get(DELEGATE) == "true")
    counts = {i: sum(1 for o in owner.values() if o == i) for i in range(2)}
    wait_for("each replica to count the forwards of its own nodes", lambda: all(
        pc.metric("poolcoord_forwards_total", replica=i) - before[i] >= counts[i] for i in range(2)))
    early = {i: pc.metric("poolcoord_forwards_total", replica=i) - before[i] for i in range(2)}
    expect(early == counts, f"forwards by replica {early}, nodes owned {counts}: a node forwarded twice")

    # The leader keeps renewing (through the survivor); replica 0 is killed.
    stop = threading.Event()
    errors = []

    def renewer():
        c = hz1[1]
        while not stop.is_set():
            for n in owner:
                dl = c.request("GET", BASE + f"/delegatedleases/{n}")
                if dl.status == 200:
                    body = dl.json()
                    body["spec"]["renewTime"] = microtime()
                    r = c.request("PUT", BASE + f"/delegatedleases/{n}", body)
                    if r.status != 200:
                        errors.append(f"{n}: {r.status} {r.body[:200]}")
            stop.wait(2.0)
    t = threading.Thread(target=renewer)
    t.start()
    victims = [n for n, o in owner.items() if o == 0]
    last_change = {n: (env.renew_time(n), time.monotonic()) for n in victims}
    longest = {n: 0.0 for n in victims}
    try:
        last_renew = {i: env.shard_lease(i)["spec"]["renewTime"] for i in a}
        pc.procs[0].kill()
        t_kill = time.monotonic()
        taken, took = {}, {}
        deadline = t_kill + RENEW_INTERVAL + LEASE_S + 2 * RETRY_S + 12
        while time.monotonic() < deadline:
            now = time.monotonic()
            for i in a:
                rec = env.shard_lease(i)["spec"]
                if i not in taken and rec.get("acquireTime") and rec["acquireTime"] > last_renew[i] \
                        and rec.get("holderIdentity"):
                    taken[i] = rec["acquireTime"]
                    took[i] = now - t_kill
                elif i not in taken:
                    last_renew[i] = rec.get("renewTime") or last_renew[i]
            for n in victims:
                rt = env.renew_time(n)
                if rt != last_change[n][0]:
                    longest[n] = max(longest[n], now - last_change[n][1])
                    last_change[n] = (rt, now)
            time.sleep(0.05)
        for n in victims:
            longest[n] = max(longest[n], time.monotonic() - last_change[n][1])
        expect(set(taken) == a, f"shards taken over: {sorted(taken)} of {sorted(a)}")
        gaps = {i: parse_micro(taken[i]) - parse_micro(last_renew[i]) for i in a}
        bound = RENEW_INTERVAL + LEASE_S + 2 * RETRY_S
        worst = max(longest.values())
        print(f"  kill -9 of replica 0: its shards {sorted(a)} taken after "
              f"{', '.join(f'{took[i]:.2f}' for i in sorted(a))} s ({', '.join(f'{gaps[i]:.2f}' for i in sorted(a))} s "
              f"after its last renewals); its nodes' cloud Leases went at most {worst:.2f} s unrenewed "
              f"(bound: renew interval {RENEW_INTERVAL:.0f} s + leaseDuration {LEASE_S:.0f} s + "
              f"2 x retryPeriod {RETRY_S:.0f} s = {bound:.0f} s)", flush=True)
        expect(all(g >= LEASE_S - 0.05 for g in gaps.values()), f"a shard was taken early: {gaps}")
        expect(worst <= bound + 1.0, f"a delegated node's Lease went {worst:.2f} s unrenewed (> {bound:.0f} s)")
        expect(env.held(1) == set(range(SHARDS)), f"the survivor holds {env.held(1)}")
        expect(not errors, f"renewals through the survivor failed: {errors[:3]}")
    finally:
        stop.set()
        t.join(15)
        if not pc.procs[0].alive():
            pc.procs[0].start()
            pc.wait_ready(replica=0)
    a2, b2 = env.split()
    print(f"  after the restart: replica 0 holds {sorted(a2)}, replica 1 holds {sorted(b2)}", flush=True)


CASES = [both_serve_and_split_the_shards, each_forwards_its_shards_and_a_kill_moves_them]

if __name__ == "__main__":
    sys.exit(run_cluster_cases(CASES, Env, __doc__))
