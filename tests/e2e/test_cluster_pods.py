"""The chart as real pods on real kubelets (tests/e2e/kube_nodes.py): kubelet,
containerd and kube-proxy 1.32 in one namespace per node, kube-scheduler, and
kube-controller-manager 1.32 (--node-monitor-grace-period 40s,
--node-monitor-period 2s) judging them; poolcoord installed with `helm install`
of charts/poolcoord as an operator would, the memory store, the image
scripts/build-image.sh builds. No stand-in: every Lease a node renews is its own
kubelet's, every agent signs with its kubelet's bootstrapped client certificate.

Nodes: c1 (cloud: the server's pod, `nodeSelector`) and e1, e2, e3, pool "edge"
(its LAN, the pool label; the agent DaemonSet, and one workload pod each that
tolerates unreachable/not-ready for 10 s). Values: nodeSelector and
agent.enabled=true; everything else the chart's defaults.

Set-up: nodes Ready, pods Running and Ready by their own probes, the APIService
Available through the Service, the pool led by one of its agents. Then one
timeline, its scenarios side by side (roles by who leads):
  cut   a member's cloud link goes down (its agent still hears the pool over the
        LAN) for grace + 25 s: it stays Ready and keeps its pod; meanwhile the
        server's pod is deleted (`kubectl delete pod`): the Deployment's
        replacement takes over, no node goes Unknown, and kube-controller-manager
        sees no 504 "Too large resource version" (the new memory store starts
        above the old one's resourceVersions); back, every mark of ours goes;
  kill  another member dies (kubelet, containerd, kube-proxy, its pods and agent:
        SIGKILL): Unknown on kube-controller-manager's schedule, its pod evicted
        10 s later; its kubelet returns: Ready, the taints gone.
Then: the webhook is reached through the Service (a denial only it can give);
`kubectl logs` and `kubectl exec` into the server's pod; /metrics scraped at the
pods' ports; `helm upgrade` with a changed value rolls the server's pod (the
APIService's unavailability measured); `helm uninstall` (its post-delete
cleanup hook) leaves no APIService, webhook, admission policy or mark, and
discovery and namespace deletion work. test_cluster_pods_replicas.py
uninstalls with a node delegated.

Root only; skipped (exit 77) without the binaries, tools or root.
"""
import json
import os
import ssl
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import expect  # noqa: E402
from kube_cluster import (DELEGATE, POOL_LABEL, parse_micro, run_cluster_cases, run_scenarios,  # noqa: E402
                          unknown_bound)
from kube_nodes import ROLE, HelmRelease, NodeCluster, PodWatch, scrape  # noqa: E402

GRACE = 40.0
MONITOR_PERIOD = 2.0
INTERVAL = 5.0          # the agents' --heartbeat-interval (the chart's)
SLACK = 4.0             # watch delivery and scheduling on a busy 2-core machine
TOLERATION = 10         # the workload pods' tolerationSeconds for unreachable/not-ready
CLOUD = "c1"
EDGE = ["e1", "e2", "e3"]
POOL = "edge"
NS = "pool-system"
TAINT = "node.openyurt.io/unschedulable:NoSchedule"
UNREACHABLE = "node.kubernetes.io/unreachable:NoExecute"
APISERVICE = "v1alpha1.coordination.pool"
GROUP = "/apis/coordination.pool/v1alpha1"
VALUES = [f"nodeSelector.{ROLE.replace('.', chr(92) + '.')}=cloud", "agent.enabled=true"]
TOO_LARGE = "Too large resource version"


def ours(annotations):
    return sorted(k for k in annotations if k == DELEGATE or k.startswith("coordination.pool/"))


class Availability:
    """Polls a list of poolleases through kube-apiserver (the aggregator, the
    Service, the pod) every 0.2 s; `changes` holds (t, ok) at each change."""

    def __init__(self, cluster):
        self.cluster, self.changes, self._stop = cluster, [], False
        self.lock = threading.Lock()
        threading.Thread(target=self._run, daemon=True, name="availability").start()

    def _run(self):
        admin = self.cluster.admin()
        while not self._stop:
            try:
                ok = admin.request("GET", f"{GROUP}/poolleases?limit=1").status == 200
            except OSError:
                ok = False
                admin = self.cluster.admin()
            with self.lock:
                if not self.changes or self.changes[-1][1] != ok:
                    self.changes.append((time.time(), ok))
            time.sleep(0.2)

    def outages(self, start, end=None):
        """[(from, to)] of unavailability overlapping [start, end]."""
        with self.lock:
            ch = list(self.changes)
        out = []
        for i, (t, ok) in enumerate(ch):
            if ok:
                continue
            until = ch[i + 1][0] if i + 1 < len(ch) else time.time()
            if until >= start and (end is None or t <= end):
                out.append((max(t, start), until))
        return out

    def ok_now(self):
        with self.lock:
            return bool(self.changes) and self.changes[-1][1]

    def stop(self):
        self._stop = True


class ChartOnNodes:
    """What the suites of the chart on real nodes share: a NodeCluster with the
    cloud nodes `clouds` and the pool `pool` of `edges`, a PodWatch, the
    Availability poller, and `helm install` with `values` (then the pool led).
    A subclass runs its timeline in timeline()."""

    def __init__(self, binary, clouds, edges, values, pool=POOL):
        self.results, self.errors = {}, []
        self.clouds, self.edges, self.pool = list(clouds), list(edges), pool
        self.nc = NodeCluster(binary, grace=f"{GRACE:.0f}s", monitor_period=f"{MONITOR_PERIOD:.0f}s")
        try:
            self.cluster = self.nc.cluster
            self.nw, self.lw = self.nc.nw, self.nc.lw
            for n in self.clouds:
                self.nc.add_node(n, labels={ROLE: "cloud"})
            for n in self.edges:
                self.nc.add_node(n, pool=pool, labels={ROLE: "edge"})
            self.nc.start_nodes()
            self.results["nodes"] = {n: dict(node.times) for n, node in self.nc.nodes.items()}
            self.pw = PodWatch(self.cluster)
            self.before_install()
            self.avail = Availability(self.cluster)
            self.rel = HelmRelease(self.nc, values=[*VALUES, *self.values(values)])
            self.install()
            self.wait_pool_up()
            self.t0 = time.time()
            self.timeline()
            print(f"timeline: {time.time() - self.t0:.0f} s at grace {GRACE:.0f} s", flush=True)
        except BaseException:
            print(self.logs(), flush=True)
            self.stop()
            raise

    def values(self, values):
        return values

    def before_install(self):
        pass

    def timeline(self):
        raise NotImplementedError

    # --- set-up
    def server_pods(self, ready=None):
        pods = self.pw.matching(**{"app.kubernetes.io/component": "apiserver"})
        return {n: p for n, p in pods.items() if "deleting" not in p and (ready is None or p.get("is_ready") == ready)}

    def agent_pods(self):
        return {n: p for n, p in self.pw.matching(**{"app.kubernetes.io/component": "agent"}).items()
                if "deleting" not in p}

    def apiservice_available(self):
        st = self.cluster.admin().request("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/{APISERVICE}")
        if st.status != 200:
            return False
        return any(c["type"] == "Available" and c["status"] == "True"
                   for c in st.json().get("status", {}).get("conditions", []))

    replicas = 1

    def install(self):
        r = self.results.setdefault("install", {})
        r["t"] = time.time()
        self.rel.install()
        r["helm"] = time.time()
        self.pw.wait("the server's pods Ready", lambda: len(self.server_pods(ready=True)) == self.replicas, 120)
        self.pw.wait("an agent Ready on every edge node",
                     lambda: sorted(p["node"] for p in self.agent_pods().values() if p.get("is_ready")) == self.edges,
                     120)
        self.pw.wait("the APIService Available", self.apiservice_available, 60)
        r["available"] = time.time()
        r["pods"] = {n: dict(p) for n, p in self.pw.matching(**{"app.kubernetes.io/name": "poolcoord"}).items()}

    def agent_metrics(self, node):
        """The node's agent's /metrics (kube_nodes.scrape) at its node's address."""
        return scrape(f"http://{self.nc.nodes[node].ip}:10271/metrics")

    def unknown_while(self, node, start, end):
        """Whether `node` went Unknown after `start` and before `end`."""
        t = self.nw.first(node, "Unknown", after=start)
        return t is not None and t <= end

    def holder(self):
        r = self.cluster.admin().request("GET", f"{GROUP}/poolleases/{self.pool}")
        return r.json()["spec"].get("holderIdentity", "") if r.status == 200 else ""

    def delegated_lease(self, node):
        r = self.cluster.admin().request("GET", f"{GROUP}/delegatedleases/{node}")
        return r.json() if r.status == 200 else None

    def wait_pool_up(self, timeout=90):
        def up():
            return self.holder() in self.edges and all(
                self.agent_metrics(n).get("poolcoord_agent_peers_heard") == len(self.edges) - 1 and
                self.agent_metrics(n).get("poolcoord_agent_cloud_sees_node") == 1 for n in self.edges)
        self.pw.wait(f"pool {self.pool} led and every agent hearing the others", up, timeout)
        self.results["pool_up"] = time.time()
        leader = self.holder()
        others = [n for n in self.edges if n != leader]
        self.roles = {"leader": leader, "cut": others[0], "kill": others[-1]}
        print(f"roles: {self.roles}", flush=True)

    def uninstall(self):
        """`helm uninstall` as an operator runs it, the chart's post-delete
        cleanup hook included; then nothing of ours may be left: no APIService,
        webhook configuration, admission policy, RBAC or hook object, no
        annotation or label of ours on any Lease, no taint of ours on any Node,
        and discovery whole. Returns {"took": s, "hook": the hook's pod as
        PodWatch saw it (relative to the start), "log": its log}."""
        out, c = {}, self.cluster

        def follow_hook():
            try:
                pod = self.pw.wait("the cleanup hook's pod running", lambda: next(
                    (n for n, p in self.pw.matching(**{"app.kubernetes.io/component": "cleanup"}).items()
                     if "running" in p), None), 120)
                out["log"] = c.kubectl("logs", "-n", NS, pod, "-f", timeout=200).stdout
            except Exception as e:  # judged below: the hook's pod must have run
                out["log"] = f"(no log: {e})"
        follower = threading.Thread(target=follow_hook, daemon=True, name="cleanup-log")
        follower.start()
        t = time.time()
        self.rel.uninstall()
        out["took"] = time.time() - t
        follower.join(30)
        out.setdefault("log", "(the hook's log was still being read 30 s after helm uninstall)")
        hooks = self.pw.matching(**{"app.kubernetes.io/component": "cleanup"})
        expect(len(hooks) == 1, f"the cleanup hook's pods: {hooks}")
        out["hook"] = {k: v - t for k, v in list(hooks.values())[0].items()
                       if k in ("seen", "scheduled", "running", "deleting")}
        for kind, name in (("apiservice", APISERVICE), ("validatingwebhookconfiguration", "poolcoord"),
                           ("validatingadmissionpolicy", "poolcoord-node-delegate-annotation")):
            p = c.kubectl("get", kind, name)
            expect(p.returncode != 0 and "NotFound" in p.stderr, f"{kind}/{name} left: {p.stdout}")
        instance = "app.kubernetes.io/instance=poolcoord"
        left = [f"{o['kind']}/{o['metadata']['name']}" for kind in
                ("clusterroles", "clusterrolebindings", "validatingwebhookconfigurations",
                 "validatingadmissionpolicies", "validatingadmissionpolicybindings", "apiservices")
                for o in c.kubectl_json("get", kind, "-l", instance)["items"]]
        left += [f"{o['kind']}/{o['metadata']['namespace']}/{o['metadata']['name']}" for ns in (NS, "kube-node-lease")
                 for o in c.kubectl_json("get", "jobs,serviceaccounts,roles,rolebindings", "-n", ns, "-l",
                                         instance)["items"]]
        expect(not left, left)
        leases = c.kubectl_json("get", "leases", "-n", "kube-node-lease")["items"]
        marked = [(x["metadata"]["name"], ours(x["metadata"].get("annotations") or {}),
                   sorted(k for k in x["metadata"].get("labels") or {} if k.startswith("coordination.pool/")))
                  for x in leases]
        marked = [m for m in marked if m[1] or m[2]]
        expect(not marked, f"Leases still marked: {marked}")
        tainted = [n["metadata"]["name"] for n in c.kubectl_json("get", "nodes")["items"]
                   if any(x["key"] == TAINT.split(":")[0] for x in n["spec"].get("taints", []))]
        expect(not tainted, f"nodes still tainted: {tainted}")
        p = c.kubectl("api-resources", timeout=60)
        expect(p.returncode == 0 and "coordination.pool" not in p.stdout, p.stderr)
        return out

    def history(self, node, since):
        with self.nw.lock:
            ready = [(round(t - since, 1), st) for t, st in self.nw.ready.get(node, [])]
        with self.lw.lock:
            leases = [(round(t - since, 1), round(rt - since, 1) if rt else None, ours(a))
                      for t, rt, a in self.lw.versions.get(node, [])]
        return f"{node} Ready: {ready}; Lease versions (seen, renewTime, marks): {leases}"

    def logs(self):
        out = [self.nc.logs()]
        for name, p in (self.pw.pods.items() if hasattr(self, "pw") else []):
            if p.get("namespace") == NS:
                out.append(f"--- pod {name}:\n" + self.cluster.kubectl("logs", "-n", NS, name, "--tail=40").stdout)
        return "\n".join(out)

    def stop(self):
        for part in ("avail", "pw"):
            if getattr(self, part, None):
                getattr(self, part).stop()
        self.nc.stop()


class Env(ChartOnNodes):
    def __init__(self, binary):
        super().__init__(binary, [CLOUD], EDGE, [])

    def before_install(self):
        self.workloads()

    def timeline(self):
        run_scenarios([("cut", self.cut_member), ("kill", self.kill_member)], self.errors)

    def workloads(self):
        """A pause pod on each edge node, evicted 10 s after an unreachable or
        not-ready taint (the DefaultTolerationSeconds admission plugin gives 300)."""
        _, repo, tag = self.nc.images["pause"]
        self.cluster.kubectl("create", "namespace", "work", check=True)
        items = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"work-{n}", "namespace": "work"},
                  "spec": {"nodeName": n, "terminationGracePeriodSeconds": 1,
                           "containers": [{"name": "pause", "image": f"{repo}:{tag}", "imagePullPolicy": "Never"}],
                           "tolerations": [{"key": k, "operator": "Exists", "effect": "NoExecute",
                                            "tolerationSeconds": TOLERATION}
                                           for k in ("node.kubernetes.io/unreachable",
                                                     "node.kubernetes.io/not-ready")]}}
                 for n in EDGE]
        self.cluster.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
                             check=True)

    # --- the timeline
    def cut_member(self):
        n = self.roles["cut"]
        node = self.nc.nodes[n]
        r = self.results.setdefault("cut", {"node": n})
        r["cut"] = node.cut()
        r["dl"] = self.pw.wait(f"a DelegatedLease for {n}", lambda: self.delegated_lease(n), 45)
        r["dl_at"] = time.time()
        r["forwarded"] = self.lw.wait(f"{n}'s Lease renewed with our marks",
                                      lambda: next((t for t, _, a in self.lw.versions.get(n, [])
                                                    if t >= r["dl_at"] and ours(a)), None), 30)
        self.delete_server_pod(r)
        time.sleep(max(0.0, r["cut"] + GRACE + 25 - time.time()))
        r["back"] = node.restore()
        try:
            r["released"] = self.pw.wait(f"{n}'s DelegatedLease gone",
                                         lambda: self.delegated_lease(n) is None and time.time(), 60)
            r["clean"] = self.pw.wait(
                f"{n} without our marks and taint",
                lambda: TAINT not in self.nw.current_taints(n) and
                not ours((self.lw.latest(n) or (0, 0, {}))[2]) and time.time(), 60)
        except AssertionError as e:
            raise AssertionError(f"{e}: {self.history(n, r['cut'])}")

    def delete_server_pod(self, r):
        """`kubectl delete pod` of the server while a node is delegated."""
        old = sorted(self.server_pods(ready=True))
        expect(len(old) == 1, f"server pods {old}")
        r["old_pod"] = old[0]
        r["kcm_log_before"] = len(self.cluster.kcm.log(tail=0))
        admin = self.cluster.admin()
        r["old_rv"] = admin.request("GET", f"{GROUP}/poolleases").json()["metadata"]["resourceVersion"]
        r["deleted"] = time.time()
        self.cluster.kubectl("delete", "pod", "-n", NS, old[0], "--wait=false", check=True)
        new = self.pw.wait("the replacement server pod Ready",
                           lambda: [p for p in self.server_pods(ready=True) if p != old[0]], 90)
        r["new_pod"] = new[0]
        with self.pw.lock:
            r["new_times"] = dict(self.pw.pods[new[0]])
        self.pw.wait("the API answering again", self.avail.ok_now, 60)
        r["available"] = time.time()
        # A client resuming from the old store's resourceVersion, as an informer does.
        r["resume_list"] = admin.request("GET", f"{GROUP}/poolleases?resourceVersion={r['old_rv']}")
        resp, events, conn = admin.watch(f"{GROUP}/poolleases?watch=1&resourceVersion={r['old_rv']}")
        try:
            r["resume_watch"] = (resp.status, next(events, None) if resp.status == 200 else resp.read().decode())
        finally:
            conn.close()

    def kill_member(self):
        n = self.roles["kill"]
        node = self.nc.nodes[n]
        r = self.results.setdefault("kill", {"node": n})
        r["last_renewal"] = self.lw.latest(n)[1]
        r["killed"] = node.kill()
        r["unknown"] = self.nw.wait(f"{n} Unknown", lambda: self.nw.first(n, "Unknown", after=r["killed"]),
                                    GRACE + 30)
        r["evicted"] = self.pw.wait(f"work-{n} evicted",
                                    lambda: self.pw.pods.get(f"work-{n}", {}).get("deleting"), TOLERATION + 30)
        r["restarted"] = time.time()
        node.start()
        r["ready"] = self.nw.wait(f"{n} Ready again", lambda: self.nw.first(n, "True", after=r["restarted"]), 90)
        r["untainted"] = self.nw.wait(f"{n} without the unreachable taint",
                                      lambda: not any(t.startswith("node.kubernetes.io/")
                                                      for t in self.nw.current_taints(n)) and time.time(), 60)
        r["dl_seen"] = self.delegated_lease(n)


# ---------------------------------------------------------------- the verdicts

def no_errors(env):
    expect(not env.errors, "; ".join(env.errors))


def nodes_join_with_bootstrapped_certificates(env):
    """Each kubelet's client certificate was issued through a CSR of the bootstrap
    token, approved and signed by kube-controller-manager."""
    csrs = env.cluster.kubectl_json("get", "csr")["items"]
    issued = [c for c in csrs if c["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
              and c["spec"]["username"] == f"system:bootstrap:{env.nc.token_id}"
              and any(x["type"] == "Approved" for x in c.get("status", {}).get("conditions", []))
              and c.get("status", {}).get("certificate")]
    expect(len(issued) == len(env.nc.nodes), f"{len(issued)} issued bootstrap CSRs for {len(env.nc.nodes)} nodes")
    for n in [CLOUD, *EDGE]:
        node = env.nc.nodes[n]
        p = subprocess.run(["openssl", "x509", "-noout", "-subject", "-issuer", "-in", node.kubelet_certificate()],
                           capture_output=True, text=True)
        expect(f"CN = system:node:{n}" in p.stdout and "O = system:nodes" in p.stdout and
               "CN = cluster-ca" in p.stdout, f"{n}: {p.stdout} {p.stderr}")
    print("  nodes Ready / Lease after start: " + ", ".join(
        f"{n} {t['ready'] - t['started']:.1f}/{t['lease'] - t['started']:.1f} s"
        for n, t in ((n, env.results["nodes"][n]) for n in [CLOUD, *EDGE])), flush=True)


def pods_run_and_are_ready(env):
    r = env.results["install"]
    pods = r["pods"]
    servers = [p for p in pods.values() if p["labels"].get("app.kubernetes.io/component") == "apiserver"]
    agents = [p for p in pods.values() if p["labels"].get("app.kubernetes.io/component") == "agent"]
    expect(len(servers) == 1 and servers[0]["node"] == CLOUD, servers)
    expect(sorted(p["node"] for p in agents) == EDGE, agents)
    for p in agents:  # the host network: the pod's IP is its node's
        expect(p["ip"] == env.nc.nodes[p["node"]].ip, p)
    s = servers[0]
    expect(s["ip"] and s["ip"] != env.nc.nodes[CLOUD].ip, s)
    print(f"  after `helm install` ({r['helm'] - r['t']:.1f} s): the server's pod Running "
          f"{s['running'] - r['t']:.1f} s, Ready {s['ready'] - r['t']:.1f} s; agents Ready "
          + ", ".join(f"{p['node']} {p['ready'] - r['t']:.1f} s" for p in sorted(agents, key=lambda p: p["node"]))
          + f"; APIService Available {r['available'] - r['t']:.1f} s; pool led "
          f"{env.results['pool_up'] - r['t']:.1f} s", flush=True)


def disruption_budget_counts_the_server_alone(env):
    """kube-controller-manager computes the chart's PodDisruptionBudget (it once
    selected the agent's pods too, and kube-controller-manager gave up on it:
    "daemonsets.apps does not implement the scale subresource")."""
    pdb = env.cluster.kubectl_json("get", "pdb", "-n", NS, "poolcoord")
    st = pdb.get("status", {})
    expect(st.get("expectedPods") == 1 and st.get("currentHealthy") == 1 and st.get("disruptionsAllowed") == 1, st)
    fails = [ln for ln in env.cluster.kcm.log(tail=0).splitlines() if "Failed to sync PDB" in ln]
    expect(not fails, fails[:2])


def apiservice_available_through_the_service(env):
    svc = env.cluster.kubectl_json("get", "apiservice", APISERVICE)
    expect(svc["spec"]["service"] == {"name": "poolcoord", "namespace": NS, "port": 443}, svc["spec"])
    eps = env.cluster.kubectl_json("get", "endpoints", "-n", NS, "poolcoord")
    addresses = [a["ip"] for s in eps.get("subsets", []) for a in s.get("addresses", [])]
    servers = list(env.server_pods(ready=True).values())
    expect(addresses == [servers[0]["ip"]], (addresses, servers))
    p = env.cluster.kubectl("get", "poolleases", "-o", "name", check=True)
    expect(f"poollease.coordination.pool/{POOL}" in p.stdout, p.stdout)


def webhook_reached_through_the_service(env):
    """A user who may update node Leases (RBAC) sets the delegate annotation:
    only our webhook refuses that (failurePolicy Ignore would let it through
    were the webhook unreachable)."""
    c = env.cluster
    rbac = [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": "lease-writer", "namespace": "kube-node-lease"},
             "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "lease-writer", "namespace": "kube-node-lease"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "lease-writer"},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "lease-writer"}]}]
    c.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": rbac}), check=True)
    writer = c.user_client("lease-writer", "lease-writer")
    n = env.roles["leader"]
    path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{n}"
    lease = writer.request("GET", path).json()
    lease["metadata"].setdefault("annotations", {})[DELEGATE] = "true"
    w = writer.request("PUT", path, lease)
    expect(w.status == 403 and "denied the request" in w.body and "may not set the annotation" in w.body,
           f"{w.status} {w.body[:400]}")
    print(f"  webhook: {w.json()['message'][:160]}...", flush=True)


def agents_sign_with_the_kubelets_certificates(env):
    """Every agent runs as its node (the only credential of system:node:<n> is the
    kubelet's bootstrapped certificate, mounted from /var/lib/kubelet/pki), and
    the leader's DelegatedLease writes carry proofs (the chart's delegationProof
    required) that the server checked against the members' certificates."""
    pl = env.cluster.admin().request("GET", f"{GROUP}/poolleases/{POOL}").json()
    expect(pl["spec"]["holderIdentity"] == env.roles["leader"], pl["spec"])
    ds = env.cluster.kubectl_json("get", "daemonset", "-n", NS, "poolcoord-agent")
    args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
    expect("--client-certificate=/var/lib/kubelet/pki/kubelet-client-current.pem" in args, args)
    expect(ds["spec"]["template"]["spec"]["hostNetwork"] is True, "agents not on the host network")
    dl = env.results["cut"]["dl"]
    expect(dl["spec"]["delegate"] == env.roles["leader"] and dl.get("status", {}).get("proof"), dl)
    for n in EDGE:
        if n == env.roles["kill"]:
            continue
        m = env.agent_metrics(n)
        expect(m.get("poolcoord_agent_pool_members", 0) >= len(EDGE), (n, m))


def cut_member_stays_ready_and_keeps_its_pod(env):
    r = env.results["cut"]
    n = r["node"]
    expect(not env.unknown_while(n, r["cut"], r["back"]), f"{n} went Unknown while its pool vouched for it: "
                                                          f"{env.history(n, r['cut'])}")
    expect(r["back"] - r["cut"] >= GRACE + 20, f"only {r['back'] - r['cut']:.0f} s observed")
    expect("deleting" not in env.pw.pods.get(f"work-{n}", {}), f"work-{n} was evicted")
    renewals = [t for t, _ in env.lw.renewals(n, r["cut"] - GRACE) if t <= r["back"]]
    gaps = [b - a for a, b in zip(renewals, renewals[1:])]
    expect(gaps and max(gaps) < GRACE, f"{n}'s Lease gaps {gaps}")
    tainted = env.nw.first_taint(n, TAINT, after=r["cut"])
    print(f"  {n} cut off: DelegatedLease {r['dl_at'] - r['cut']:.1f} s after the cut, first forward "
          f"{r['forwarded'] - r['cut']:.1f} s; Ready for {r['back'] - r['cut']:.0f} s, its pod kept; Lease gaps "
          f"max {max(gaps):.1f} s; unschedulable taint "
          f"{'%.0f s after the DelegatedLease' % (tainted - r['dl_at']) if tainted else 'not yet'}; back: "
          f"DelegatedLease gone after {r['released'] - r['back']:.1f} s, marks and taint after "
          f"{r['clean'] - r['back']:.1f} s", flush=True)


def server_pod_replaced_while_delegated(env):
    r = env.results["cut"]
    n = r["node"]
    t = r["new_times"]
    outage = env.avail.outages(r["deleted"], r["available"])
    down = sum(b - a for a, b in outage)
    for other in EDGE:
        if other != env.roles["kill"]:
            expect(not env.unknown_while(other, r["deleted"], r["back"]), f"{other} went Unknown")
    # The new store is past every resourceVersion of the old one: a list "not
    # older than" the old one is served, a watch from it is 410 Expired (relist).
    expect(r["resume_list"].status == 200, f"list at the old resourceVersion: {r['resume_list'].status} "
                                           f"{r['resume_list'].body[:300]}")
    status, first = r["resume_watch"]
    expect(status == 200 and first and first["type"] == "ERROR" and first["object"]["code"] == 410 and
           first["object"]["reason"] == "Expired", f"watch from the old resourceVersion: {status} {first}")
    log = env.cluster.kcm.log(tail=0)[r["kcm_log_before"]:]
    hits = [ln for ln in log.splitlines() if TOO_LARGE in ln]
    expect(not hits, f"kube-controller-manager got {len(hits)} x 504 '{TOO_LARGE}': {hits[:3]}")
    relists = [ln for ln in log.splitlines() if "coordination.pool" in ln]
    for ln in relists[:4]:
        print(f"    kcm: {ln[:220]}", flush=True)
    print(f"  server pod deleted with {n} delegated: replacement {r['new_pod']} scheduled "
          f"{t['scheduled'] - r['deleted']:.1f} s, Running {t['running'] - r['deleted']:.1f} s, Ready "
          f"{t['ready'] - r['deleted']:.1f} s after the delete; the API unavailable {down:.1f} s in "
          f"{len(outage)} stretch(es); no node Unknown; kube-controller-manager: 0 x '{TOO_LARGE}', "
          f"{len(relists)} log lines about coordination.pool", flush=True)


def killed_member_goes_notready_and_its_pod_is_evicted(env):
    r = env.results["kill"]
    n = r["node"]
    after_renewal = r["unknown"] - r["last_renewal"]
    expect(GRACE - 1 <= after_renewal <= unknown_bound(GRACE, MONITOR_PERIOD) + SLACK,
           f"{n} Unknown {after_renewal:.1f} s after its kubelet's last renewal")
    evicted = r["evicted"] - r["unknown"]
    expect(evicted <= TOLERATION + MONITOR_PERIOD + SLACK, f"evicted {evicted:.1f} s after Unknown")
    expect(env.nw.first_taint(n, UNREACHABLE, after=r["killed"]), f"{n} never tainted unreachable")
    expect(r["dl_seen"] is None, f"the pool vouched for a dead node: {r['dl_seen']}")
    forwards = [a for _, _, a in env.lw.versions.get(n, []) if ours(a)]
    expect(not forwards, f"{n}'s Lease carried our marks: {forwards[:2]}")
    print(f"  {n} killed: Unknown {r['unknown'] - r['killed']:.1f} s after the kill "
          f"({after_renewal:.1f} s after its last renewal; grace {GRACE:.0f} s, monitor period "
          f"{MONITOR_PERIOD:.0f} s); work-{n} evicted {evicted:.1f} s after Unknown (tolerationSeconds "
          f"{TOLERATION}); restarted: Ready {r['ready'] - r['restarted']:.1f} s, taints gone "
          f"{r['untainted'] - r['restarted']:.1f} s after", flush=True)


def logs_and_exec(env):
    pod = sorted(env.server_pods(ready=True))[0]
    logs = env.cluster.kubectl("logs", "-n", NS, pod, "--tail=200", check=True).stdout
    expect("poolcoord" in logs.lower() or "serving" in logs.lower(), logs[-500:])
    p = env.cluster.kubectl("exec", "-n", NS, pod, "--", "/usr/local/bin/kubectl-pool", "--help")
    expect(p.returncode == 0 and "pool" in p.stdout, f"{p.returncode} {p.stdout[-300:]} {p.stderr[-300:]}")
    p = env.cluster.kubectl("exec", "-n", NS, pod, "--", "sh", "-c", "id")
    expect(p.returncode != 0 and "not found" in p.stderr, f"a shell in the image? {p.returncode} {p.stderr}")
    refused = p.stderr.strip().splitlines()[-1][:100]
    agent = sorted(env.agent_pods())[0]
    a = env.cluster.kubectl("logs", "-n", NS, agent, "--tail=20", check=True).stdout
    expect(a.strip(), f"no log of {agent}")
    print(f"  kubectl logs: the server's pod and {agent}; exec kubectl-pool --help: exit 0; exec sh: "
          f"refused ({refused})", flush=True)


def metrics_scraped_at_the_pods_ports(env):
    pod = list(env.server_pods(ready=True).values())[0]
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(f"https://{pod['ip']}:8443/metrics", timeout=5, context=ctx) as r:
        text = r.read().decode()
    expect("poolcoord_delegated_nodes" in text and "apiserver_request_total" in text, text[:300])
    m = env.agent_metrics(env.roles["leader"])
    expect(m.get("poolcoord_agent_leader") == 1, m)
    print(f"  /metrics: the server at {pod['ip']}:8443 ({len(text.splitlines())} lines), the agents at their "
          f"node's :10271", flush=True)


def helm_upgrade_rolls_the_pod(env):
    before = set(env.server_pods())
    t = time.time()
    env.rel.upgrade(["server.verbosity=2"])
    new = env.pw.wait("the upgraded pod Ready",
                      lambda: [p for p in env.server_pods(ready=True) if p not in before], 120)
    env.pw.wait("the API answering", env.avail.ok_now, 60)
    time.sleep(1)
    outage = env.avail.outages(t)
    down = sum(b - a for a, b in outage)
    args = env.cluster.kubectl_json("get", "pod", "-n", NS, new[0])["spec"]["containers"][0]["args"]
    expect("--v=2" in args, args)
    expect(down <= 15, f"the API was unavailable {down:.1f} s during the upgrade")
    with env.pw.lock:
        p = dict(env.pw.pods[new[0]])
    print(f"  helm upgrade (Recreate): new pod Ready {p['ready'] - t:.1f} s after; the API unavailable "
          f"{down:.1f} s in {len(outage)} stretch(es)", flush=True)


def helm_uninstall_leaves_nothing(env):
    """No node delegated: the hook finds nothing, and still looks twice."""
    u = env.uninstall()
    expect("nothing of ours found" in u["log"] and "done after 2 passes" in u["log"], u["log"][-1500:])
    t1 = time.time()
    env.cluster.kubectl("delete", "namespace", NS, "--timeout=90s", timeout=100, check=True)
    print(f"  helm uninstall: {u['took']:.1f} s with the cleanup hook (its pod Running "
          f"{u['hook'].get('running', -1):.1f} s after the start); nothing of ours left; discovery whole; "
          f"namespace {NS} deleted in {time.time() - t1:.1f} s", flush=True)


CASES = [no_errors, nodes_join_with_bootstrapped_certificates, pods_run_and_are_ready,
         disruption_budget_counts_the_server_alone, apiservice_available_through_the_service, webhook_reached_through_the_service,
         agents_sign_with_the_kubelets_certificates, cut_member_stays_ready_and_keeps_its_pod,
         server_pod_replaced_while_delegated, killed_member_goes_notready_and_its_pod_is_evicted,
         logs_and_exec, metrics_scraped_at_the_pods_ports, helm_upgrade_rolls_the_pod, helm_uninstall_leaves_nothing]

if __name__ == "__main__":
    sys.exit(run_cluster_cases(CASES, Env, __doc__))
