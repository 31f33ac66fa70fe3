"""`kubectl pool` (build/kubectl-pool, found on PATH by the real kubectl 1.32) in a
real cluster (tests/e2e/kube_cluster.py) with poolcoord deployed from its chart:
through kube-apiserver's aggregator the members are the Nodes carrying the pool
label (Nodes registered by stand-in kubelets), the leader and the delegations are
what the nodes wrote with their own certificates; a user with only the chart's
aggregated "view" role may not list Nodes, so the plugin warns and takes the
members from the DelegatedLeases; straight to poolcoord (no Nodes API there) the
same leader shows, with the members from the DelegatedLeases.

Skipped (exit 77) without kube-apiserver/kube-controller-manager binaries."""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import BASE, GV, expect, expect_status, kubectl_binary, microtime, wait_for  # noqa: E402
from kube_cluster import (DELEGATE, POOL_LABEL, ChartInstall, KubeCluster, Kubelet,  # noqa: E402
                          run_cluster_cases, write_kubeconfig)

NODES = {"hz-1": "hangzhou", "hz-2": "hangzhou", "hz-3": "hangzhou", "hz-4": "hangzhou",
         "bj-1": "beijing", "bj-2": "beijing"}


class Env:
    def __init__(self, binary):
        self.build = os.path.dirname(binary)
        if not os.access(os.path.join(self.build, "kubectl-pool"), os.X_OK):
            raise RuntimeError(f"{self.build}/kubectl-pool is not built")
        self.cluster = KubeCluster(kcm=False)
        try:
            self.pc = ChartInstall(self.cluster, binary)
            for n, p in NODES.items():
                Kubelet(self.cluster, n, {POOL_LABEL: p}).register()
            self.leader = self.cluster.node_client("hz-1")

            def acquire():
                now = microtime()
                r = self.leader.request(
                    "POST", BASE + "/poolleases",
                    {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": "hangzhou"},
                     "spec": {"holderIdentity": "hz-1", "leaseDurationSeconds": 120, "acquireTime": now,
                              "renewTime": now, "leaseTransitions": 0}})
                return r.status in (201, 409)
            wait_for("membership from the Nodes and the PoolLease", acquire)
            self.renew = microtime()
            expect_status(self.leader.request(
                "POST", BASE + "/delegatedleases",
                {"apiVersion": GV, "kind": "DelegatedLease",
                 "metadata": {"name": "hz-3", "annotations": {DELEGATE: "true"}},
                 "spec": {"holderIdentity": "hz-3", "leaseDurationSeconds": 120, "renewTime": self.renew,
                          "poolName": "hangzhou", "delegate": "hz-1"}}), 201)
        except BaseException:
            self.cluster.stop()
            raise

    def pool(self, *args, kubeconfig=None):
        cmd = [kubectl_binary(), "pool", "--kubeconfig", kubeconfig or self.cluster.admin_kubeconfig, *args]
        env = {**os.environ, "PATH": self.build + os.pathsep + os.environ.get("PATH", ""),
               "HOME": self.cluster.workdir}
        env.pop("KUBECONFIG", None)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
        expect(r.returncode == 0, f"kubectl pool {' '.join(args)}: exit {r.returncode}: {r.stderr}{r.stdout}")
        return r

    def logs(self):
        return self.cluster.logs()

    def stop(self):
        self.cluster.stop()


def rows(text):
    lines = [line for line in text.splitlines() if line.strip()]
    head = re.split(r"\s{3,}", lines[0].strip())
    return {r[0]: dict(zip(head, r)) for r in (re.split(r"\s{3,}", line.strip()) for line in lines[1:])}


def through_the_aggregator_members_are_labelled_nodes(env):
    r = env.pool()
    t = rows(r.stdout)
    hz, bj = t["hangzhou"], t["beijing"]
    expect(hz["LEADER"] == "hz-1" and hz["TERM"] == "0" and re.fullmatch(r"in \d+(s|m\d*s?)", hz["EXPIRES"]), hz)
    expect(hz["MEMBERS (NODES)"] == "4" and hz["DELEGATED"] == "1", hz)
    expect(re.fullmatch(r"hz-3 \(\d+s\)", hz["LONGEST DELEGATION"]), hz)
    # beijing has labelled Nodes but nobody has taken its PoolLease yet.
    expect(bj["LEADER"] == "<none>" and bj["TERM"] == "<none>" and bj["MEMBERS (NODES)"] == "2", bj)
    expect(r.stderr == "", r.stderr)

    d = json.loads(env.pool("-o", "json").stdout)
    expect(d["membersFrom"] == "Nodes" and d["poolLabel"] == POOL_LABEL and d["serverTimeSource"] == "Date", d)
    items = {p["metadata"]["name"]: p for p in d["items"]}
    expect([m["name"] for m in items["hangzhou"]["members"]] == ["hz-1", "hz-2", "hz-3", "hz-4"], items)
    expect(items["beijing"]["poolLease"] is None, items["beijing"])

    out = env.pool("describe", "hangzhou").stdout
    expect(re.search(rf"^Members:\s+4 from Nodes labelled {re.escape(POOL_LABEL)}=hangzhou$", out, re.M), out)
    line = [x for x in out.splitlines() if x.startswith("  hz-3 ")][0]
    cells = re.split(r"\s{3,}", line.strip())
    expect(cells[1:4] == ["yes", "hz-1", env.renew] and cells[6] == "current", cells)
    for node in ("hz-1", "hz-2", "hz-4"):
        expect(re.search(rf"^  {node}\s+no\s+<none>", out, re.M), f"{node} undelegated:\n{out}")


def viewer_without_nodes_gets_a_warning(env):
    """The chart aggregates read access to our kinds into "view", which does not
    cover Nodes, so the members come from the DelegatedLeases. (No
    kube-controller-manager runs here to aggregate: the user is bound to "view"
    and to the chart's aggregate-to-view ClusterRole, which is what aggregation
    would add to "view".)"""
    cert = env.cluster.pki.client("pool-viewer", "pool-viewer")
    aggregate = [o["metadata"]["name"] for o in env.pc.objects if o["kind"] == "ClusterRole" and
                 (o["metadata"].get("labels") or {}).get("rbac.authorization.k8s.io/aggregate-to-view") == "true"]
    expect(len(aggregate) == 1, f"the chart's aggregate-to-view ClusterRole: {aggregate}")
    for role in ("view", aggregate[0]):
        env.cluster.kubectl("create", "clusterrolebinding", f"pool-viewer-{role}", f"--clusterrole={role}",
                            "--user=pool-viewer", check=True)
    kc = write_kubeconfig(os.path.join(env.cluster.workdir, "viewer.kubeconfig"), env.cluster.url,
                          env.cluster.pki.ca[0], *cert)

    def listed():
        r = subprocess.run([kubectl_binary(), "auth", "can-i", "list", "delegatedleases.coordination.pool",
                            "--kubeconfig", kc], capture_output=True, text=True)
        return r.stdout.strip() == "yes"
    wait_for("the viewer's bindings", listed)
    r = env.pool(kubeconfig=kc)
    expect(r.stderr.startswith('Warning: cannot list Nodes (nodes is forbidden: User "pool-viewer" cannot list '
                               'resource "nodes"'), r.stderr)
    hz = rows(r.stdout)["hangzhou"]
    expect(hz["LEADER"] == "hz-1" and hz["MEMBERS (DELEGATEDLEASES)"] == "1" and hz["DELEGATED"] == "1", hz)


def straight_to_poolcoord_members_from_delegated_leases(env):
    # The chart's serving certificate names the Service, not 127.0.0.1: like
    # kubectl, --insecure-skip-tls-verify drops the kubeconfig's CA for it.
    r = env.pool("--server", f"https://127.0.0.1:{env.pc.port}", "--insecure-skip-tls-verify")
    t = rows(r.stdout)
    expect(set(t) == {"hangzhou"}, f"only pools with a PoolLease or DelegatedLease: {t}")
    hz = t["hangzhou"]
    expect(hz["LEADER"] == "hz-1" and hz["MEMBERS (DELEGATEDLEASES)"] == "1" and hz["DELEGATED"] == "1", hz)


CASES = [through_the_aggregator_members_are_labelled_nodes, viewer_without_nodes_gets_a_warning,
         straight_to_poolcoord_members_from_delegated_leases]

if __name__ == "__main__":
    sys.exit(run_cluster_cases(CASES, Env, __doc__))
