"""A partition storm on the real control plane: many nodes of one pool cut off at
once, their leader delegating every one of them, and the real node lifecycle
controller judging each. Shared by tests/e2e/test_cluster_forwarder_scale.py (a
few hundred nodes, in CI) and bench/forwarder_scale.py (up to tens of thousands).

How a storm is made (all on a KubeCluster started without kube-controller-manager):
  1. StormNodes.create(): N Nodes (Ready, in the pool) and their Leases, in bulk as
     system:masters; nobody renews those Leases afterwards: the nodes are cut off.
  2. The pool's leader (a member whose own Lease is kept fresh) takes the pool's
     PoolLease, and kube-controller-manager is started: its node lifecycle
     controller sees every node at once and starts each one's grace period then.
  3. The leader writes all N DelegatedLeases at once and renews each every
     `period` seconds (a JSON merge patch of spec.renewTime straight to poolcoord,
     one request each), as poolcoord-agent would for members it still hears.
From then on only poolcoord's forwarder keeps the nodes Ready; ReadyWatch records
every node that the node lifecycle controller stops calling Ready, and LeaseWatch
the age each delegated Lease reaches between two renewals.

Standard library only.
"""
import concurrent.futures
import json
import os
import threading
import time

from harness import BASE, GV, Client, microtime
from kube_cluster import DELEGATE, POOL_LABEL, now_micro, parse_micro

NODE_LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def _pool(threads, fn, items):
    """Runs fn(client_index, item) over `items` on `threads` threads; returns the
    failures as (item, message)."""
    failures = []
    lock = threading.Lock()
    chunks = [items[i::threads] for i in range(threads)]

    def run(i):
        for item in chunks[i]:
            try:
                fn(i, item)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                with lock:
                    failures.append((item, str(e)[:300]))
    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        list(ex.map(run, range(threads)))
    return failures


class StormNodes:
    """`count` nodes named <prefix>-<i> in pool `pool`, plus the leader node."""

    def __init__(self, cluster, count, pool="storm", prefix="sn", leader="storm-leader", threads=16):
        self.cluster, self.pool, self.leader, self.threads = cluster, pool, leader, threads
        self.names = [f"{prefix}-{i:05d}" for i in range(count)]
        self.clients = [cluster.admin() for _ in range(threads)]
        self.created_at = None

    def _node(self, name):
        now = now_micro()[:19] + "Z"
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, POOL_LABEL: self.pool}},
                "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                           "message": "kubelet is posting ready status",
                                           "lastHeartbeatTime": now, "lastTransitionTime": now}]}}

    def _lease(self, name, uid):
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease",
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}]},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": microtime()}}

    def create(self):
        """Creates every Node and Lease (and the leader's); returns the seconds taken."""
        t0 = time.monotonic()

        def one(i, name):
            c = self.clients[i]
            r = c.request("POST", "/api/v1/nodes", self._node(name))
            if r.status == 409:
                r = c.request("GET", f"/api/v1/nodes/{name}")
            if r.status not in (200, 201):
                raise AssertionError(f"node {name}: {r.status} {r.body[:200]}")
            lease = self._lease(name, r.json()["metadata"]["uid"])
            w = c.request("POST", NODE_LEASES, lease)
            if w.status not in (201, 409):
                raise AssertionError(f"lease {name}: {w.status} {w.body[:200]}")
        failures = _pool(self.threads, one, [self.leader, *self.names])
        if failures:
            raise AssertionError(f"{len(failures)} nodes not created, e.g. {failures[:3]}")
        self.created_at = time.monotonic()
        return self.created_at - t0

    def renew_leader(self):
        """The leader's own kubelet: one renewal of its Lease."""
        c = self.clients[0]
        r = c.request("GET", f"{NODE_LEASES}/{self.leader}")
        lease = r.json()
        lease["spec"]["renewTime"] = microtime()
        c.request("PUT", f"{NODE_LEASES}/{self.leader}", lease)


class Leader:
    """The pool's leader writing DelegatedLeases straight to poolcoord (one of
    `clients`, each a Client of one replica with the leader's node certificate)."""

    def __init__(self, storm, clients_factory, threads=8, period=10.0, duration=40):
        self.storm, self.period, self.duration, self.threads = storm, period, duration, threads
        self.clients = [clients_factory(i) for i in range(threads)]
        self.errors = []
        self.renewals = 0
        self._stop = threading.Event()
        self._thread = None

    def take_pool(self):
        now = microtime()
        c = self.clients[0]
        body = {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": self.storm.pool},
                "spec": {"holderIdentity": self.storm.leader, "leaseDurationSeconds": 300,
                         "acquireTime": now, "renewTime": now, "leaseTransitions": 0}}
        r = c.request("POST", BASE + "/poolleases", body)
        if r.status != 201:
            raise AssertionError(f"PoolLease {self.storm.pool}: {r.status} {r.body[:300]}")

    def renew_pool(self):
        c = self.clients[0]
        r = c.request("PATCH", f"{BASE}/poolleases/{self.storm.pool}", {"spec": {"renewTime": microtime()}},
                      ctype="application/merge-patch+json")
        if r.status != 200:
            self.errors.append(f"PoolLease renewal: {r.status} {r.body[:200]}")

    def _dl(self, name):
        return {"apiVersion": GV, "kind": "DelegatedLease",
                "metadata": {"name": name, "annotations": {DELEGATE: "true"}},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": self.duration, "renewTime": microtime(),
                         "poolName": self.storm.pool, "delegate": self.storm.leader}}

    def delegate_all(self):
        """Writes every DelegatedLease at once; returns the seconds taken."""
        t0 = time.monotonic()

        def one(i, name):
            r = self.clients[i].request("POST", BASE + "/delegatedleases", self._dl(name))
            if r.status != 201:
                raise AssertionError(f"{r.status} {r.body[:200]}")
        failures = _pool(self.threads, one, self.storm.names)
        if failures:
            raise AssertionError(f"{len(failures)} DelegatedLeases not written, e.g. {failures[:3]}")
        return time.monotonic() - t0

    def start(self, delegations=True):
        """Renews the PoolLease, the leader's own Lease and (unless
        delegations=False: someone else renews them) every DelegatedLease each
        `period`, spread evenly over it."""
        self._thread = threading.Thread(target=self._run, args=(delegations,), daemon=True,
                                        name="storm-leader")
        self._thread.start()
        return self

    def _run(self, delegations):
        names = self.storm.names if delegations else []
        while not self._stop.is_set():
            t0 = time.monotonic()
            self.renew_pool()
            try:
                self.storm.renew_leader()
            except Exception as e:  # noqa: BLE001
                self.errors.append(f"leader's Lease: {e}")
            done = [0] * self.threads
            deadline = t0 + self.period

            def one(i, name):
                if self._stop.is_set():
                    return
                # Spread over the period: item k of this thread goes at its share of it.
                k = done[i]
                due = t0 + self.period * (k * self.threads + i) / max(len(names), 1)
                wait = due - time.monotonic()
                if wait > 0:
                    self._stop.wait(wait)
                r = self.clients[i].request("PATCH", f"{BASE}/delegatedleases/{name}",
                                            {"spec": {"renewTime": microtime()}},
                                            ctype="application/merge-patch+json")
                done[i] += 1
                if r.status != 200:
                    raise AssertionError(f"{r.status} {r.body[:200]}")
            failures = _pool(self.threads, one, names)
            self.renewals += sum(done)
            self.errors.extend(f"{n}: {m}" for n, m in failures[:5])
            rest = deadline - time.monotonic()
            if rest > 0:
                self._stop.wait(rest)

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(self.period + 30)


class _Watch:
    """A watch of `path` (list first, then watch from its resourceVersion) on a
    thread of its own, handing each object to record(type, obj, t)."""

    def __init__(self, cluster, path):
        self.cluster, self.path = cluster, path
        self._stop = threading.Event()
        self.errors = []
        self.synced = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"watch {path}")

    def start(self):
        self._thread.start()
        if not self.synced.wait(60):
            raise AssertionError(f"watch of {self.path}: no list within 60 s")
        return self

    def _run(self):
        c = self.cluster.admin()
        sep = "&" if "?" in self.path else "?"
        while not self._stop.is_set():
            try:
                r = c.request("GET", self.path)
                listed = r.json()
                for o in listed.get("items", []):
                    self.record("ADDED", o, time.monotonic())
                self.synced.set()
                rv = listed["metadata"]["resourceVersion"]
                resp, events, conn = c.watch(f"{self.path}{sep}watch=true&resourceVersion={rv}"
                                             f"&allowWatchBookmarks=true&timeoutSeconds=3600", timeout=3600)
                for ev in events:
                    if self._stop.is_set():
                        break
                    if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self.record(ev["type"], ev["object"], time.monotonic())
                conn.close()
            except Exception as e:  # noqa: BLE001 - relist, as a reflector does
                self.errors.append(str(e)[:200])
                self._stop.wait(0.5)

    def stop(self):
        self._stop.set()


class ReadyWatch(_Watch):
    """Every node of the pool that the node lifecycle controller stopped calling
    Ready: name -> (monotonic time, status)."""

    def __init__(self, cluster, pool):
        super().__init__(cluster, f"/api/v1/nodes?labelSelector={POOL_LABEL}%3D{pool}")
        self.not_ready = {}
        self.lock = threading.Lock()

    def record(self, typ, node, t):
        ready = [c for c in node.get("status", {}).get("conditions", []) if c["type"] == "Ready"]
        status = ready[0]["status"] if ready else "Missing"
        if status != "True":
            with self.lock:
                self.not_ready.setdefault(node["metadata"]["name"], (t, status))


class LeaseWatch(_Watch):
    """The delegated (marked) Leases: for each node, when its renewTime last
    changed and the longest it went unchanged."""

    def __init__(self, cluster):
        super().__init__(cluster, f"{NODE_LEASES}?labelSelector=coordination.pool%2Fdelegated%3Dtrue")
        self.lock = threading.Lock()
        self.last = {}      # name -> (renewTime, monotonic time seen)
        self.longest = {}   # name -> seconds
        self.first = {}     # name -> monotonic time of the first forward seen
        self.changes = 0

    def record(self, typ, lease, t):
        if typ == "DELETED":
            return
        name = lease["metadata"]["name"]
        rt = lease["spec"].get("renewTime")
        with self.lock:
            prev = self.last.get(name)
            if prev is None:
                self.first.setdefault(name, t)
            elif prev[0] != rt:
                self.longest[name] = max(self.longest.get(name, 0.0), t - prev[1])
                self.changes += 1
            if prev is None or prev[0] != rt:
                self.last[name] = (rt, t)

    def worst(self, now=None):
        """The longest any delegated Lease went unrenewed, counting the time since
        its last renewal as well."""
        now = now or time.monotonic()
        with self.lock:
            gaps = [max(self.longest.get(n, 0.0), now - t) for n, (_, t) in self.last.items()]
        return max(gaps) if gaps else 0.0


def cpu_seconds(pid):
    """User + system CPU seconds of process `pid` (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick


def thread_cpu_seconds(pid, prefix):
    """User + system CPU seconds of the threads of `pid` whose name starts with
    `prefix` (poolcoord names its forwarder's threads fwd-*)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                head, _, rest = f.read().rpartition(")")
            if head.split("(", 1)[1].startswith(prefix):
                fields = rest.split()
                total += int(fields[11]) + int(fields[12])
        except OSError:  # the thread ended
            pass
    return total / tick


def metric(text, name):
    """The sum of the samples of `name` in a Prometheus text exposition."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            if series.partition("{")[0] == name:
                total += float(value)
    return total


def dump(path, data):
    with open(path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)


__all__ = ["StormNodes", "Leader", "ReadyWatch", "LeaseWatch", "cpu_seconds", "thread_cpu_seconds", "metric", "dump",
           "parse_micro"]
