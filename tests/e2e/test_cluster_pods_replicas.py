"""The chart's etcd3 variant with two replicas as real pods on real kubelets
(tests/e2e/kube_nodes.py, the set-up of test_cluster_pods.py): `helm install` with
storage.backend=etcd3, replicas=2 (etcd on the cloud bridge, where the pods reach
it), leaderElection 4 s / 3 s / 1 s, forwarder.shards=2; cloud nodes c1 and c2, pool
"edge" of e1, e2.

- both replicas Running and Ready on different nodes (the chart's preferred
  anti-affinity), each serving /readyz, /livez and /metrics at its pod's IP and
  holding one forwarding shard (leader_election_master_status per shard Lease),
  /livez saying "[+]leaderElection ok"; the APIService Available through the Service;
- a member cut off from the cloud is delegated, and only the replica holding its
  shard forwards its Lease (poolcoord_forwards_total per pod);
- that replica's process is killed (kill -9): the shard's Lease changes hands no
  earlier than leaseDuration after the dead holder's last renewal and within
  leaseDuration + 2 x retryPeriod of the kill (no margin), the new holder forwards
  when the next renewal falls due (at most 10 s after the last one) or at once if
  that has passed, the kubelet restarts the container and it holds a shard again;
- `kubectl delete pod` of the replica holding the member's shard: the other
  forwards, the Deployment replaces the pod, the API stays available;
- `helm upgrade` with a changed value rolls both pods (RollingUpdate, maxSurge 1,
  maxUnavailable 0) with the API unavailable for (nearly) no time;
- through all of it, and held past the grace period, the cut-off member never goes
  Unknown and its Lease never goes a grace period without a renewal;
- `helm uninstall` with the member still cut off and delegated (its Lease carrying
  our marks, its Node our taint): the post-delete hook's Job (--cleanup) removes
  them while the replicas stop, and nothing of ours is left (no APIService,
  webhook, admission policy, RBAC, hook object, mark or taint); the member's link
  back, its kubelet renews, it is Ready, and nothing of ours comes back.

test_cluster_shards.py keeps the finer checks of the shards (which replica forwards
which of many nodes) with both replicas on the host. Root only; skipped (exit 77)
without the binaries, tools or root.
"""
import os
import re
import ssl
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_fixture import EtcdFixture  # noqa: E402
from harness import expect, wait_for  # noqa: E402
from kube_cluster import forwarder_shard, parse_micro, run_cluster_cases  # noqa: E402
from test_cluster_pods import GRACE, NS, TAINT, ChartOnNodes, ours  # noqa: E402

CLOUDS = ["c1", "c2"]
DELEGATED = "coordination.pool/delegated"  # our label on a delegated node's Lease
EDGES = ["e1", "e2"]
LEASE_S, RENEW_S, RETRY_S = 4.0, 3.0, 1.0
RENEW_INTERVAL = 10.0  # the forwarder's renew interval (the kubelet's)
SHARDS = 2
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"


def shard_lease(node):
    """The name of the Lease of `node`'s forwarding shard (the release is "poolcoord")."""
    return f"poolcoord-shard-{forwarder_shard(node, SHARDS)}"


def holds(metrics_text, lease):
    """Whether a replica's /metrics say it holds `lease`."""
    return f'leader_election_master_status{{name="{lease}"}} 1' in (metrics_text or "")


def pod_get(ip, path):
    """(status, body) of GET https://<pod IP>:8443<path>, the serving certificate
    unchecked (it names the Service); (0, error) when it does not answer."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://{ip}:8443{path}", timeout=3, context=ctx) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except OSError as e:
        return 0, str(e)


def metric(text, name):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


class Env(ChartOnNodes):
    replicas = 2

    def __init__(self, binary):
        super().__init__(binary, CLOUDS, EDGES, [])

    def values(self, values):
        self.etcd = EtcdFixture(name="poolcoord", host=self.nc.net.cloud_host)
        return ["storage.backend=etcd3", "replicas=2", f"storage.etcd.servers={{{self.etcd.endpoint}}}",
                f"leaderElection.leaseDuration={LEASE_S:.0f}s", f"leaderElection.renewDeadline={RENEW_S:.0f}s",
                f"leaderElection.retryPeriod={RETRY_S:.0f}s", f"forwarder.shards={SHARDS}"]

    def pod_metrics(self, pod):
        status, body = pod_get(pod["ip"], "/metrics")
        return body if status == 200 else None

    def holder_pod(self, timeout=30):
        """(name, pod) of the one Ready replica holding the cut member's shard, once
        exactly one does."""
        lease = shard_lease(self.roles["cut"])

        def one():
            pods = self.server_pods(ready=True)
            status = {n: self.pod_metrics(p) for n, p in pods.items()}
            holding = [n for n, m in status.items() if holds(m, lease)]
            if len(holding) == 1 and all(m is not None for m in status.values()):
                return (holding[0], pods[holding[0]])
            return None
        return wait_for(f"exactly one replica holding {lease}", one, timeout, every=0.1)

    def election(self):
        """The spec of the cut member's shard Lease."""
        r = self.cluster.admin().request("GET", f"{LEASES}/{shard_lease(self.roles['cut'])}")
        return r.json()["spec"] if r.status == 200 else {}

    def forwards(self):
        """poolcoord_forwards_total of each Ready replica, by pod name."""
        return {n: metric(self.pod_metrics(p) or "", "poolcoord_forwards_total")
                for n, p in self.server_pods(ready=True).items()}

    def timeline(self):
        r = self.results.setdefault("replicas", {})
        n = self.roles["cut"]
        node = self.nc.nodes[n]
        r["leader"], _ = self.holder_pod()
        r["cut"] = node.cut()
        r["dl"] = self.pw.wait(f"a DelegatedLease for {n}", lambda: self.delegated_lease(n), 45)
        r["forwarded"] = self.lw.wait(f"{n}'s Lease renewed with our marks",
                                      lambda: next((t for t, _, a in self.lw.versions.get(n, [])
                                                    if t >= r["cut"] and ours(a)), None), 30)
        r["forwards_before"] = self.forwards()
        self.kill_leader(r)
        self.delete_holder_pod(r)
        # Held past the grace period: without the replicas' forwarding it would go Unknown.
        time.sleep(max(0.0, r["cut"] + GRACE + 10 - time.time()))
        # Still cut off: upgraded, then (the last case) uninstalled while delegated.
        self.upgrade(r)
        r["held"] = time.time()

    def kill_leader(self, r):
        name, pod = self.holder_pod()
        old = self.election()
        r["killed_pod"] = name
        node = self.nc.nodes[pod["node"]]
        pids = node.pod_processes(pod["uid"], comm="poolcoord-apise")
        expect(len(pids) == 1, f"the forwarding replica's processes: {pids}")
        r["kill"] = time.time()
        os.kill(pids[0], 9)
        acquired = last_renew = new_acquire = None
        deadline = r["kill"] + LEASE_S + 2 * RETRY_S + 20
        while time.time() < deadline:
            e = self.election()
            if e.get("holderIdentity") == old.get("holderIdentity"):
                last_renew = e.get("renewTime")
            elif e.get("holderIdentity"):
                acquired, new_acquire = time.time(), e.get("acquireTime")
                break
            time.sleep(0.05)
        expect(acquired, f"the shard Lease never changed hands: {self.election()}")
        r["acquired"], r["last_renew"], r["new_acquire"] = acquired, last_renew or old["renewTime"], new_acquire
        cut = self.roles["cut"]
        r["kill_forward"] = self.lw.wait("a forward by the shard's new holder",
                                         lambda: next((t for t, _, a in self.lw.versions.get(cut, [])
                                                       if t >= acquired and ours(a)), None), 30)
        # The kubelet restarts the container; the shards are shared again.
        def sharing_again():
            status = self.cluster.kubectl_json("get", "pod", "-n", NS, name)["status"]
            if status["containerStatuses"][0]["restartCount"] < 1 or name not in self.server_pods(ready=True):
                return False
            m = self.pod_metrics(pod)
            return m is not None and any(holds(m, f"poolcoord-shard-{i}") for i in range(SHARDS))
        wait_for(f"{name} restarted and holding a shard", sharing_again, 90, every=0.5)
        r["restarted"] = time.time()
        r["forwards_after_kill"] = self.forwards()

    def delete_holder_pod(self, r):
        name, pod = self.holder_pod()
        r["deleted_pod"] = name
        r["delete"] = time.time()
        self.cluster.kubectl("delete", "pod", "-n", NS, name, "--wait=false", check=True)
        r["delete_leader"] = wait_for("another replica holding the shard",
                                      lambda: (lambda lp: lp[0] if lp[0] != name else None)(self.holder_pod()), 60)
        r["delete_led"] = time.time()
        self.pw.wait("the replacement Ready", lambda: len(self.server_pods(ready=True)) == 2 and
                     name not in self.server_pods(ready=True), 90)
        r["replaced"] = time.time()

    def upgrade(self, r):
        before = set(self.server_pods())
        r["upgrade"] = time.time()
        self.rel.upgrade(["server.verbosity=2"])
        self.pw.wait("both replicas rolled and Ready",
                     lambda: len([p for p in self.server_pods(ready=True) if p not in before]) == 2 and
                     not [p for p in self.server_pods() if p in before], 180)
        r["upgraded"] = time.time()

    def stop(self):
        super().stop()
        if getattr(self, "etcd", None):
            self.etcd.stop()


# ---------------------------------------------------------------- the verdicts

def no_errors(env):
    expect(not env.errors, "; ".join(env.errors))


def both_replicas_ready_on_their_own_nodes_sharing_the_shards(env):
    pods = env.results["install"]["pods"]
    servers = {n: p for n, p in pods.items() if p["labels"].get("app.kubernetes.io/component") == "apiserver"}
    expect(sorted(p["node"] for p in servers.values()) == CLOUDS, servers)
    r = env.results["install"]
    print(f"  after `helm install`: the replicas Ready " +
          ", ".join(f"{p['node']} {p['ready'] - r['t']:.1f} s" for p in servers.values()) +
          f"; APIService Available {r['available'] - r['t']:.1f} s", flush=True)
    env.holder_pod()
    for name, p in env.server_pods(ready=True).items():
        for path in ("/readyz", "/livez", "/healthz"):
            status, body = pod_get(p["ip"], path)
            expect(status == 200, f"{name} {path}: {status} {body[:200]}")
        status, body = pod_get(p["ip"], "/livez?verbose")
        expect("[+]leaderElection ok" in body, f"/livez?verbose of {name}: {body}")
    # After the timeline's last step (a rolling upgrade) the shards move to the new
    # pods: a retry period or two.
    def split():
        held = {n: sum(holds(env.pod_metrics(p), f"poolcoord-shard-{i}") for i in range(SHARDS))
                for n, p in env.server_pods(ready=True).items()}
        return held if len(held) == 2 and all(v == 1 for v in held.values()) else None
    wait_for("each replica holding one of the shards", split, LEASE_S * 4, every=0.2)
    expect(env.election().get("holderIdentity"), "no holder of the member's shard Lease")


def only_the_shard_holder_forwards(env):
    r = env.results["replicas"]
    before = r["forwards_before"]
    leader = r["leader"]
    expect(before.get(leader, 0) >= 1, f"the shard's holder {leader} forwarded nothing: {before}")
    expect(all(v == 0 for n, v in before.items() if n != leader), f"the other replica forwarded: {before}")


def killed_holder_hands_over(env):
    r = env.results["replicas"]
    taken = r["acquired"] - r["kill"]
    gap = parse_micro(r["new_acquire"]) - parse_micro(r["last_renew"])
    bound = LEASE_S + 2 * RETRY_S
    expect(gap >= LEASE_S, f"the shard Lease was taken {gap:.2f} s after the dead holder's last renewal")
    expect(taken <= bound, f"taken {taken:.2f} s after kill -9 (bound {bound:.0f} s)")
    # The new holder renews when the renewal falls due (one renew interval after
    # the dead holder's last), or at once if that has passed when it takes the shard.
    expect(r["kill_forward"] - r["kill"] <= RENEW_INTERVAL + bound + 1, f"the new holder's first forward "
                                                      f"{r['kill_forward'] - r['kill']:.1f} s after the kill")
    after = r["forwards_after_kill"]
    print(f"  kill -9 of the replica forwarding the member {r['killed_pod']}: its shard Lease taken {taken:.2f} s "
          f"after ({gap:.2f} s after its last renewal; leaseDuration {LEASE_S:.0f} s + 2 x retryPeriod "
          f"{RETRY_S:.0f} s = {bound:.0f} s), the new holder's first forward {r['kill_forward'] - r['kill']:.1f} s "
          f"after; the container restarted and holding a shard {r['restarted'] - r['kill']:.1f} s after; forwards "
          f"{after}", flush=True)


def deleted_holder_pod_hands_over_and_is_replaced(env):
    r = env.results["replicas"]
    outage = env.avail.outages(r["delete"], r["replaced"])
    down = sum(b - a for a, b in outage)
    expect(down <= 3, f"the API was unavailable {down:.1f} s with a replica left")
    print(f"  kubectl delete pod of the member's shard holder {r['deleted_pod']}: {r['delete_leader']} holds it "
          f"{r['delete_led'] - r['delete']:.1f} s after, the replacement Ready {r['replaced'] - r['delete']:.1f} s "
          f"after; the API unavailable {down:.1f} s", flush=True)


def cut_member_never_unknown(env):
    r = env.results["replicas"]
    n = env.roles["cut"]
    expect(not env.unknown_while(n, r["cut"], r["held"]), f"{n} went Unknown: {env.history(n, r['cut'])}")
    expect(r["held"] - r["cut"] >= GRACE + 5, f"cut off only {r['held'] - r['cut']:.0f} s")
    renewals = [t for t, _ in env.lw.renewals(n, r["cut"] - GRACE) if t <= r["held"]]
    gaps = [b - a for a, b in zip(renewals, renewals[1:])]
    expect(gaps and max(gaps) < GRACE, f"{n}'s Lease gaps {gaps}")
    print(f"  {n} cut off {r['held'] - r['cut']:.0f} s through both handovers and the rolling upgrade: never "
          f"Unknown, its Lease's longest gap {max(gaps):.1f} s (grace {GRACE:.0f} s)", flush=True)


def helm_upgrade_rolls_both_with_the_api_available(env):
    r = env.results["replicas"]
    outage = env.avail.outages(r["upgrade"], r["upgraded"])
    down = sum(b - a for a, b in outage)
    expect(down <= 3, f"the API was unavailable {down:.1f} s during a rolling upgrade")
    for name, p in env.server_pods(ready=True).items():
        args = env.cluster.kubectl_json("get", "pod", "-n", NS, name)["spec"]["containers"][0]["args"]
        expect("--v=2" in args, args)
    print(f"  helm upgrade (RollingUpdate): both replicas rolled in {r['upgraded'] - r['upgrade']:.1f} s, "
          f"the API unavailable {down:.1f} s", flush=True)


def helm_uninstall_while_delegated_leaves_nothing(env):
    """The member still cut off and delegated: its Lease marked, its Node tainted
    (40 s into the delegation). `helm uninstall` deletes the replicas, then the
    post-delete hook removes the marks and the taint, passes 15 s apart until
    one finds nothing (a replica still stopping may forward once more)."""
    n = env.roles["cut"]
    c = env.cluster
    env.nw.wait(f"{n} tainted {TAINT}", lambda: TAINT in env.nw.current_taints(n), 60)
    before = c.kubectl_json("get", "lease", "-n", "kube-node-lease", n)["metadata"]
    expect(ours(before.get("annotations") or {}) and (before.get("labels") or {}).get(DELEGATED) == "true",
           f"{n}'s Lease before the uninstall: {before}")
    expect(env.delegated_lease(n), f"{n} not delegated before the uninstall")
    u = env.uninstall()
    passes = re.findall(r"cleanup: pass (\d+): (removed our marks[^\n]*|nothing of ours found)", u["log"])
    expect(any(n in what and "Leases of" in what for _, what in passes), f"the hook's log: {u['log'][-1500:]}")
    # Its link back: the kubelet renews its own Lease again, without our marks.
    back = env.nc.nodes[n].restore()
    renewed = env.lw.wait(f"{n}'s kubelet renewing again",
                          lambda: next((t for t, r, _ in env.lw.versions.get(n, []) if r and r > back), None), 60)
    env.nw.wait(f"{n} Ready", lambda: env.nw.status(n) == "True", 90)
    after = c.kubectl_json("get", "lease", "-n", "kube-node-lease", n)["metadata"]
    expect(not ours(after.get("annotations") or {}) and DELEGATED not in (after.get("labels") or {}),
           f"{n}'s Lease after its kubelet's return: {after}")
    expect(TAINT not in env.nw.current_taints(n), env.nw.current_taints(n))
    went_unknown = env.nw.first(n, "Unknown", after=env.results["replicas"]["held"])
    print(f"  helm uninstall with {n} delegated and tainted: {u['took']:.1f} s with the cleanup hook (its pod "
          f"Running {u['hook'].get('running', -1):.1f} s after the start; {len(passes)} passes: "
          f"{'; '.join(f'{i}: {w[:140]}' for i, w in passes)}); nothing of ours left; {n}'s link back: its "
          f"kubelet renewed {renewed - back:.1f} s after, Ready"
          f"{' (it had gone Unknown: its delegation ended with poolcoord)' if went_unknown else ''}, "
          f"no mark came back", flush=True)


CASES = [no_errors, both_replicas_ready_on_their_own_nodes_sharing_the_shards, only_the_shard_holder_forwards,
         killed_holder_hands_over, deleted_holder_pod_hands_over_and_is_replaced, cut_member_never_unknown,
         helm_upgrade_rolls_both_with_the_api_available, helm_uninstall_while_delegated_leaves_nothing]

if __name__ == "__main__":
    sys.exit(run_cluster_cases(CASES, Env, __doc__))
