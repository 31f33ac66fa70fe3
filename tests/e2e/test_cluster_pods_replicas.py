"""The chart's etcd3 variant with two replicas as real pods on real kubelets
(tests/e2e/kube_nodes.py, the set-up of test_cluster_pods.py): `helm install` with
storage.backend=etcd3, replicas=2 (etcd on the cloud bridge, where the pods reach
it), leaderElection 4 s / 3 s / 1 s; cloud nodes c1 and c2, pool "edge" of e1, e2.

- both replicas Running and Ready on different nodes (the chart's preferred
  anti-affinity), each serving /readyz, /livez and /metrics at its pod's IP; exactly
  one leads (leader_election_master_status), the standby's /livez says
  "[+]leaderElection ok"; the APIService Available through the Service;
- a member cut off from the cloud is delegated, and only the leading replica
  forwards its Lease (poolcoord_forwards_total per pod);
- the leading replica's process is killed (kill -9): the election Lease changes
  hands no earlier than leaseDuration after the dead leader's last renewal and
  within leaseDuration + 2 x retryPeriod of the kill (no margin), the new leader
  forwards within one forwarding interval (10 s) more, the kubelet restarts the
  container and it comes back as the standby;
- `kubectl delete pod` of the leading replica: the other forwards, the Deployment
  replaces the pod, the API stays available;
- through all of it, and held past the grace period, the cut-off member never goes
  Unknown and its Lease never goes a grace period without a renewal; back, every
  mark of ours goes;
- `helm upgrade` with a changed value rolls both pods (RollingUpdate, maxSurge 1,
  maxUnavailable 0) with the API unavailable for (nearly) no time.

Replaces test_cluster_replicas.py, which ran both replicas on the host behind an
ExternalName Service. Root only; skipped (exit 77) without the binaries, tools or root.
"""
import os
import ssl
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_fixture import EtcdFixture  # noqa: E402
from harness import expect, wait_for  # noqa: E402
from kube_cluster import parse_micro, run_cluster_cases  # noqa: E402
from test_cluster_pods import GRACE, NS, TAINT, ChartOnNodes, ours  # noqa: E402

CLOUDS = ["c1", "c2"]
EDGES = ["e1", "e2"]
LEASE_S, RENEW_S, RETRY_S = 4.0, 3.0, 1.0
# A delegated node's Lease is forwarded about every 10 s (as its kubelet renews
# it): the new leader's first forward comes at the next one after it leads.
FORWARD_INTERVAL = 10.0
ELECTION = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/poolcoord"


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
                f"leaderElection.retryPeriod={RETRY_S:.0f}s"]

    def pod_metrics(self, pod):
        status, body = pod_get(pod["ip"], "/metrics")
        return body if status == 200 else None

    def leader_pod(self, timeout=30):
        """(name, pod) of the one Ready replica that says it leads, once exactly one does."""
        def one():
            pods = self.server_pods(ready=True)
            status = {n: self.pod_metrics(p) for n, p in pods.items()}
            leading = [n for n, m in status.items() if m and metric(m, "leader_election_master_status") == 1]
            if len(leading) == 1 and all(m is not None for m in status.values()):
                return (leading[0], pods[leading[0]])
            return None
        return wait_for("exactly one replica leading", one, timeout, every=0.1)

    def election(self):
        r = self.cluster.admin().request("GET", ELECTION)
        return r.json()["spec"] if r.status == 200 else {}

    def forwards(self):
        """poolcoord_forwards_total of each Ready replica, by pod name."""
        return {n: metric(self.pod_metrics(p) or "", "poolcoord_forwards_total")
                for n, p in self.server_pods(ready=True).items()}

    def timeline(self):
        r = self.results.setdefault("replicas", {})
        n = self.roles["cut"]
        node = self.nc.nodes[n]
        r["leader"], _ = self.leader_pod()
        r["cut"] = node.cut()
        r["dl"] = self.pw.wait(f"a DelegatedLease for {n}", lambda: self.delegated_lease(n), 45)
        r["forwarded"] = self.lw.wait(f"{n}'s Lease renewed with our marks",
                                      lambda: next((t for t, _, a in self.lw.versions.get(n, [])
                                                    if t >= r["cut"] and ours(a)), None), 30)
        r["forwards_before"] = self.forwards()
        self.kill_leader(r)
        self.delete_leader_pod(r)
        # Held past the grace period: without the replicas' forwarding it would go Unknown.
        time.sleep(max(0.0, r["cut"] + GRACE + 10 - time.time()))
        r["back"] = node.restore()
        r["clean"] = self.pw.wait(
            f"{n} without our marks and taint",
            lambda: self.delegated_lease(n) is None and TAINT not in self.nw.current_taints(n) and
            not ours((self.lw.latest(n) or (0, 0, {}))[2]) and time.time(), 60)
        self.upgrade(r)

    def kill_leader(self, r):
        name, pod = self.leader_pod()
        old = self.election()
        r["killed_pod"] = name
        node = self.nc.nodes[pod["node"]]
        pids = node.pod_processes(pod["uid"], comm="poolcoord-apise")
        expect(len(pids) == 1, f"the leading replica's processes: {pids}")
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
        expect(acquired, f"the election Lease never changed hands: {self.election()}")
        r["acquired"], r["last_renew"], r["new_acquire"] = acquired, last_renew or old["renewTime"], new_acquire
        cut = self.roles["cut"]
        r["kill_forward"] = self.lw.wait("a forward by the new leader",
                                         lambda: next((t for t, _, a in self.lw.versions.get(cut, [])
                                                       if t >= acquired and ours(a)), None), 30)
        # The kubelet restarts the container; it comes back as the standby.
        def standby_again():
            status = self.cluster.kubectl_json("get", "pod", "-n", NS, name)["status"]
            if status["containerStatuses"][0]["restartCount"] < 1 or name not in self.server_pods(ready=True):
                return False
            m = self.pod_metrics(pod)
            return m is not None and metric(m, "leader_election_master_status") == 0
        wait_for(f"{name} restarted as the standby", standby_again, 90, every=0.5)
        r["restarted"] = time.time()
        r["forwards_after_kill"] = self.forwards()

    def delete_leader_pod(self, r):
        name, pod = self.leader_pod()
        r["deleted_pod"] = name
        r["delete"] = time.time()
        self.cluster.kubectl("delete", "pod", "-n", NS, name, "--wait=false", check=True)
        r["delete_leader"] = wait_for("another replica leading",
                                      lambda: (lambda lp: lp[0] if lp[0] != name else None)(self.leader_pod()), 60)
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


def both_replicas_ready_on_their_own_nodes_and_one_leads(env):
    pods = env.results["install"]["pods"]
    servers = {n: p for n, p in pods.items() if p["labels"].get("app.kubernetes.io/component") == "apiserver"}
    expect(sorted(p["node"] for p in servers.values()) == CLOUDS, servers)
    r = env.results["install"]
    print(f"  after `helm install`: the replicas Ready " +
          ", ".join(f"{p['node']} {p['ready'] - r['t']:.1f} s" for p in servers.values()) +
          f"; APIService Available {r['available'] - r['t']:.1f} s", flush=True)
    leader, _ = env.leader_pod()
    for name, p in env.server_pods(ready=True).items():
        for path in ("/readyz", "/livez", "/healthz"):
            status, body = pod_get(p["ip"], path)
            expect(status == 200, f"{name} {path}: {status} {body[:200]}")
        if name != leader:
            status, body = pod_get(p["ip"], "/livez?verbose")
            expect("[+]leaderElection ok" in body, f"/livez?verbose on the standby: {body}")
    expect(env.election().get("holderIdentity"), "no holder of the election Lease")


def only_the_leader_forwards(env):
    r = env.results["replicas"]
    before = r["forwards_before"]
    leader = r["leader"]
    expect(before.get(leader, 0) >= 1, f"the leader {leader} forwarded nothing: {before}")
    expect(all(v == 0 for n, v in before.items() if n != leader), f"the standby forwarded: {before}")


def killed_leader_hands_over(env):
    r = env.results["replicas"]
    taken = r["acquired"] - r["kill"]
    gap = parse_micro(r["new_acquire"]) - parse_micro(r["last_renew"])
    bound = LEASE_S + 2 * RETRY_S
    expect(gap >= LEASE_S, f"the election Lease was taken {gap:.2f} s after the dead leader's last renewal")
    expect(taken <= bound, f"taken {taken:.2f} s after kill -9 (bound {bound:.0f} s)")
    expect(r["kill_forward"] - r["kill"] <= bound + FORWARD_INTERVAL,
           f"the new leader's first forward {r['kill_forward'] - r['kill']:.1f} s after the kill")
    after = r["forwards_after_kill"]
    print(f"  kill -9 of the leading replica {r['killed_pod']}: the election Lease taken {taken:.2f} s after "
          f"({gap:.2f} s after its last renewal; leaseDuration {LEASE_S:.0f} s + 2 x retryPeriod "
          f"{RETRY_S:.0f} s = {bound:.0f} s), the new leader's first forward {r['kill_forward'] - r['kill']:.1f} s "
          f"after; the container restarted as the standby {r['restarted'] - r['kill']:.1f} s after; forwards "
          f"{after}", flush=True)
    expect(after.get(r["killed_pod"], 0) == 0, f"the restarted standby forwarded: {after}")


def deleted_leader_pod_hands_over_and_is_replaced(env):
    r = env.results["replicas"]
    outage = env.avail.outages(r["delete"], r["replaced"])
    down = sum(b - a for a, b in outage)
    expect(down <= 3, f"the API was unavailable {down:.1f} s with a replica left")
    print(f"  kubectl delete pod of the leading replica {r['deleted_pod']}: {r['delete_leader']} leads "
          f"{r['delete_led'] - r['delete']:.1f} s after, the replacement Ready {r['replaced'] - r['delete']:.1f} s "
          f"after; the API unavailable {down:.1f} s", flush=True)


def cut_member_never_unknown(env):
    r = env.results["replicas"]
    n = env.roles["cut"]
    expect(not env.unknown_while(n, r["cut"], r["back"]), f"{n} went Unknown: {env.history(n, r['cut'])}")
    expect(r["back"] - r["cut"] >= GRACE + 5, f"cut off only {r['back'] - r['cut']:.0f} s")
    renewals = [t for t, _ in env.lw.renewals(n, r["cut"] - GRACE) if t <= r["back"]]
    gaps = [b - a for a, b in zip(renewals, renewals[1:])]
    expect(gaps and max(gaps) < GRACE, f"{n}'s Lease gaps {gaps}")
    print(f"  {n} cut off {r['back'] - r['cut']:.0f} s through both handovers: never Unknown, its Lease's "
          f"longest gap {max(gaps):.1f} s (grace {GRACE:.0f} s); marks gone {r['clean'] - r['back']:.1f} s after "
          f"its link is back", flush=True)


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


CASES = [no_errors, both_replicas_ready_on_their_own_nodes_and_one_leads, only_the_leader_forwards,
         killed_leader_hands_over, deleted_leader_pod_hands_over_and_is_replaced, cut_member_never_unknown,
         helm_upgrade_rolls_both_with_the_api_available]

if __name__ == "__main__":
    sys.exit(run_cluster_cases(CASES, Env, __doc__))
