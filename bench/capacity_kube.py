#!/usr/bin/env python3
"""kube-apiserver's share of poolcoord's paths (BENCHMARKS.md, "Capacity on
paper"): CPU per request of the real kube-apiserver 1.32.6, its etcd and
poolcoord, for what the agents and the forwarder send through it, at fixed rates.

    bench/capacity_kube.py --binary build/poolcoord-apiserver [--seconds 20] [--rate 100]

The cluster is tests/e2e/kube_cluster.py's (kube-apiserver with aggregation,
NodeRestriction and RBAC, its own etcd; no controller manager) with the chart
deployed (one poolcoord, memory store: poolcoord's and etcd's own costs are
bench/capacity.py's); 10 Nodes in pool p0, n0 holding p0's PoolLease and
delegating n1..n9. Phases, each at `rate` requests/s from 10 client threads:
- lease_get: a node GETs its own Lease in kube-node-lease (an agent's probe of
  "does the cloud see me", every heartbeat interval);
- lease_renew: a node PUTs its own Lease with a new renewTime (a kubelet's
  renewal: there without poolcoord too);
- pl_get_aggregated: a node GETs its pool's PoolLease through the aggregator (a
  follower's poll);
- dl_renew_aggregated: n0 merge-PATCHes a member's DelegatedLease through the
  aggregator (a delegated renewal);
- lease_forward: the chart's ServiceAccount (the forwarder's identity) GETs a
  delegated member's Lease and PUTs it with a new renewTime and the delegate
  annotation, which kube-apiserver sends to poolcoord's webhook: one forwarded
  renewal as the forwarder of this tree makes it (a GET and a PUT; the
  forwarder's own CPU is not in it).
CPU is utime + stime of each process over the measured window, above its idle
rate, per request (per GET+PUT pair for lease_forward).
"""
import argparse
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
from harness import Client, microtime  # noqa: E402
from kube_cluster import POOL_LABEL, ChartInstall, KubeCluster, Kubelet, Skip  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
GV = "coordination.pool/v1alpha1"
BASE = "/apis/" + GV
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
DELEGATE = "openyurt.io/delegate-heartbeat"
NODES = [f"n{i}" for i in range(10)]


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def drive(seconds, rate, workers):
    """Runs each worker(i) as often as `rate` per second in all, spread over
    the workers' threads, for `seconds`; returns (completed, statuses)."""
    stop = time.monotonic() + seconds
    period = len(workers) / rate
    statuses, lock = {}, threading.Lock()

    def loop(i, w):
        due = time.monotonic() + period * i / len(workers)
        while due < stop:
            time.sleep(max(0, due - time.monotonic()))
            for st in w():
                with lock:
                    statuses[st] = statuses.get(st, 0) + 1
            due += period
    threads = [threading.Thread(target=loop, args=(i, w)) for i, w in enumerate(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


class Bench:
    def __init__(self, a):
        self.a = a
        self.cluster = KubeCluster(kcm=False)
        try:
            self.pc = ChartInstall(self.cluster, a.binary)
            for n in NODES:
                Kubelet(self.cluster, n, {POOL_LABEL: "p0"}).register()
            token = self.cluster.kubectl("create", "token", self.pc.service_account, "-n",
                                         self.pc.namespace, check=True).stdout.strip()
            self.forwarder = lambda: Client(self.cluster.port, self.cluster.pki.ca[0], token=token)
            self.setup_delegation()
        except BaseException:
            self.cluster.stop()
            raise
        self.pids = {"kube-apiserver": self.cluster.apiserver.proc.pid,
                     "etcd (kube-apiserver's)": self.cluster.etcd.proc.pid,
                     "poolcoord": self.pc.procs[0].proc.pid}

    def setup_delegation(self):
        n0 = self.cluster.node_client("n0")
        deadline = time.monotonic() + 60
        while True:
            # Until poolcoord's membership (from the Nodes' pool label) has n0.
            now = microtime()
            r = n0.request("POST", f"{BASE}/poolleases", {
                "apiVersion": GV, "kind": "PoolLease", "metadata": {"name": "p0"},
                "spec": {"holderIdentity": "n0", "leaseDurationSeconds": 300, "acquireTime": now,
                         "renewTime": now, "leaseTransitions": 0}})
            if r.status == 201:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"PoolLease: {r.status} {r.body[:300]}")
            time.sleep(0.5)
        for n in NODES[1:]:
            r = n0.request("POST", f"{BASE}/delegatedleases", {
                "apiVersion": GV, "kind": "DelegatedLease",
                "metadata": {"name": n, "annotations": {DELEGATE: "true"}},
                "spec": {"holderIdentity": n, "leaseDurationSeconds": 300, "renewTime": microtime(),
                         "poolName": "p0", "delegate": "n0"}})
            if r.status != 201:
                raise RuntimeError(f"DelegatedLease {n}: {r.status} {r.body[:300]}")

    def requests_served(self):
        """kube-apiserver's apiserver_request_total by verb and resource."""
        out = {}
        for line in self.cluster.admin().request("GET", "/metrics", accept=None).body.splitlines():
            if line.startswith("apiserver_request_total{"):
                labels = dict(kv.split("=", 1) for kv in line[line.index("{") + 1:line.index("}")].split(","))
                key = f"{labels['verb'].strip(chr(34))} {labels.get('resource', '').strip(chr(34))}"
                out[key] = out.get(key, 0) + float(line.rsplit(" ", 1)[1])
        return out

    def measure(self, name, rate, workers, per_op=1):
        r0 = self.requests_served()
        c0 = {k: cpu_s(p) for k, p in self.pids.items()}
        t0 = time.monotonic()
        statuses = drive(self.a.seconds, rate, workers)
        t1 = time.monotonic()
        c1 = {k: cpu_s(p) for k, p in self.pids.items()}
        r1 = self.requests_served()
        served = {k: round((v - r0.get(k, 0)) / (t1 - t0), 1) for k, v in r1.items()
                  if v - r0.get(k, 0) >= 0.2 * (t1 - t0)}
        ops = sum(statuses.values()) / per_op
        row = {"phase": name, "rate": round(ops / (t1 - t0), 1), "statuses": statuses,
               "kube_apiserver_requests_per_s": served,
               "us_per_op": {k: round((c1[k] - c0[k] - self.idle[k] * (t1 - t0)) * 1e6 / max(ops, 1), 1)
                             for k in self.pids},
               "load": round(os.getloadavg()[0], 2)}
        print(json.dumps(row), flush=True)
        return row

    def run(self):
        rows = []
        c0, t0 = {k: cpu_s(p) for k, p in self.pids.items()}, time.monotonic()
        time.sleep(10)
        self.idle = {k: (cpu_s(p) - c0[k]) / (time.monotonic() - t0) for k, p in self.pids.items()}
        rows.append({"phase": "idle", "cpu_ms_per_s": {k: round(v * 1e3, 2) for k, v in self.idle.items()}})
        print(json.dumps(rows[-1]), flush=True)
        rate = self.a.rate

        def lease_get(n):
            c = self.cluster.node_client(n)
            return lambda: [c.request("GET", f"{LEASES}/{n}").status]
        rows.append(self.measure("lease_get", rate, [lease_get(n) for n in NODES]))

        def lease_renew(n):
            c = self.cluster.node_client(n)
            cur = {"o": c.request("GET", f"{LEASES}/{n}").json()}

            def once():
                o = cur["o"]
                o["spec"]["renewTime"] = microtime()
                r = c.request("PUT", f"{LEASES}/{n}", o)
                cur["o"] = r.json() if r.status == 200 else c.request("GET", f"{LEASES}/{n}").json()
                return [r.status]
            return once
        rows.append(self.measure("lease_renew", rate, [lease_renew(n) for n in NODES]))

        def pl_get(n):
            c = self.cluster.node_client(n)
            return lambda: [c.request("GET", f"{BASE}/poolleases/p0").status]
        rows.append(self.measure("pl_get_aggregated", rate, [pl_get(n) for n in NODES]))

        def dl_renew(n):
            c = self.cluster.node_client("n0")
            return lambda: [c.request("PATCH", f"{BASE}/delegatedleases/{n}",
                                      {"spec": {"renewTime": microtime()}},
                                      ctype="application/merge-patch+json").status]
        rows.append(self.measure("dl_renew_aggregated", rate, [dl_renew(n) for n in NODES[1:]]))

        def forward(n):
            c = self.forwarder()

            def once():
                r = c.request("GET", f"{LEASES}/{n}")
                if r.status != 200:
                    return [r.status]
                o = r.json()
                o["metadata"].setdefault("annotations", {})[DELEGATE] = "true"
                o["spec"]["renewTime"] = microtime()
                return [r.status, c.request("PUT", f"{LEASES}/{n}", o).status]
            return once
        rows.append(self.measure("lease_forward", rate / 2, [forward(n) for n in NODES[1:]], per_op=2))
        return rows

    def close(self):
        self.cluster.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--rate", type=float, default=100)
    ap.add_argument("--out")
    a = ap.parse_args()
    a.binary = os.path.abspath(a.binary)
    try:
        b = Bench(a)
    except Skip as e:
        print(f"SKIP: {e}")
        return 77
    try:
        rows = b.run()
    finally:
        b.close()
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
