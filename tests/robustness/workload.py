"""The robustness suite's workload and its recorders (tests/robustness/README.md).

- `Candidate`: one node campaigning for its pool's PoolLease as client-go's
  LeaseLock does (GET, then PUT with the resourceVersion read; expiry judged on
  its own clock from when it saw the record change); as holder it renews, now
  and then releases or deletes the lease, and renews, creates and deletes the
  DelegatedLeases of its pool's cut-off members; deposed or following, it now
  and then tries a delegation anyway (the server must refuse it).
- `WatchChain`: on one replica, one kind: a list, then watches resumed from the
  last resourceVersion seen (events and bookmarks), each ending after a few
  seconds (timeoutSeconds), relisting after 410 Expired, moving to the next
  replica when its replica does not answer.
- `TruthRecorder`: a watch straight on etcd over the whole key space, resumed
  on another member when its member fails: etcd's history, the reference every
  answer is judged against.
- `History`: everything recorded, as the JSON checker.py reads.

Every request carries no retry of its own (a write sent twice could be applied
once and refused once, and its history would lie), and each write carries a
unique id in the annotation WRITE_ANNOTATION, which etcd's history then shows.

Standard library only.
"""
import base64
import http.client
import json
import random
import socket
import ssl
import threading
import time
import urllib.request
from datetime import datetime, timezone

GV = "coordination.pool/v1alpha1"
BASE = "/apis/" + GV
WRITE_ANNOTATION = "robustness.poolcoord.test/write"
DELEGATE_ANNOTATION = "openyurt.io/delegate-heartbeat"


def now_micro():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def summary(obj):
    """What the checker needs of an object (API or storage JSON)."""
    md, spec, st = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    term = st.get("leaderTerm")
    return {"uid": md.get("uid"), "write": (md.get("annotations") or {}).get(WRITE_ANNOTATION),
            "holder": spec.get("holderIdentity"), "transitions": spec.get("leaseTransitions", 0),
            "duration": spec.get("leaseDurationSeconds"), "renew": spec.get("renewTime"),
            "delegate": spec.get("delegate"), "pool": spec.get("poolName"),
            "observed": st.get("observedTime"),
            "term": [term.get("poolLeaseUID"), term.get("leaseTransitions", 0)] if term else None}


class History:
    """The run's record. Lists are appended from many threads (atomic in CPython)."""

    def __init__(self, params):
        self.params = params
        self.ops, self.watches = [], []
        self.cutoffs, self.excused, self.faults = [], [], []
        self.final, self.sentinels = {}, {}
        self._seq = 0
        self._lock = threading.Lock()

    def next_id(self, prefix):
        with self._lock:
            self._seq += 1
            return f"{prefix}#{self._seq}"

    def to_json(self, truth):
        return {"params": self.params, "ops": self.ops, "watches": [w.record() for w in self.watches],
                "cutoffs": self.cutoffs, "excused": self.excused, "faults": self.faults,
                "final": self.final, "sentinels": self.sentinels, "truth": truth.events,
                "truth_from": truth.first, "truth_to": truth.last, "other_revs": truth.other_revs}


class Replicas:
    """Where the replicas are: name -> (host, port), and the CA that signed them."""

    def __init__(self, endpoints, ca):
        self.endpoints = dict(endpoints)
        self.names = sorted(self.endpoints)
        self.ctx = ssl.create_default_context(cafile=ca)

    def next(self, name):
        return self.names[(self.names.index(name) + 1) % len(self.names)]


class Api:
    """One client identity's connections to the replicas; no retries."""

    def __init__(self, replicas, token, user, history, timeout=45):
        self.replicas, self.token, self.user, self.h = replicas, token, user, history
        self.timeout = timeout
        self.conns = {}

    def _conn(self, replica):
        c = self.conns.get(replica)
        if c is None:
            host, port = self.replicas.endpoints[replica]
            c = http.client.HTTPSConnection(host, port, context=self.replicas.ctx, timeout=self.timeout)
            self.conns[replica] = c
        return c

    def raw(self, replica, method, path, body=None, ctype="application/json"):
        """(status or None, decoded JSON or None, t0, t1)."""
        headers = {"Accept": "application/json", "Authorization": "Bearer " + self.token}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = ctype
        t0 = time.monotonic()
        try:
            c = self._conn(replica)
            c.request(method, path, body=data, headers=headers)
            r = c.getresponse()
            raw = r.read()
            status = r.status
        except (OSError, http.client.HTTPException):
            self.close(replica)
            return None, None, t0, time.monotonic()
        t1 = time.monotonic()
        try:
            return status, json.loads(raw), t0, t1
        except ValueError:
            return status, None, t0, t1

    def close(self, replica):
        c = self.conns.pop(replica, None)
        if c is not None:
            c.close()

    def op(self, replica, verb, kind, name, method, path, body=None, fresh=True, write=None):
        """Makes one request and records it; returns (status, JSON)."""
        status, doc, t0, t1 = self.raw(replica, method, path, body)
        self.record(replica, verb, kind, name, status, doc, t0, t1, fresh, write)
        return status, doc

    def record(self, replica, verb, kind, name, status, doc, t0, t1, fresh, write):
        rec = {"id": self.h.next_id("op"), "user": self.user, "replica": replica, "verb": verb,
               "kind": kind, "name": name, "t0": t0, "t1": t1, "status": status, "fresh": fresh,
               "write": write, "rv": None, "obj": None}
        if status is not None and 200 <= status < 300 and isinstance(doc, dict):
            rv = (doc.get("metadata") or {}).get("resourceVersion")
            rec["rv"] = int(rv) if rv else None
            if verb == "list":
                rec["items"] = [[i["metadata"]["name"], int(i["metadata"]["resourceVersion"]),
                                 summary(i)["write"]] for i in doc.get("items", [])]
            else:
                rec["obj"] = summary(doc)
        self.h.ops.append(rec)


def _path(kind, name=None, query=""):
    return f"{BASE}/{kind}" + (f"/{name}" if name else "") + (f"?{query}" if query else "")


class Candidate(threading.Thread):
    """One member of `pool` campaigning for its PoolLease (see the module doc)."""

    def __init__(self, node, pool, members, replicas, history, stop, seed, lease_seconds=2,
                 retry=0.4, delegated=()):
        super().__init__(daemon=True, name=f"candidate-{node}")
        self.node, self.pool, self.members, self.h, self.stopping = node, pool, members, history, stop
        self.rng = random.Random(seed)
        self.replica = replicas.names[seed % len(replicas.names)]
        self.replicas = replicas
        self.api = Api(replicas, f"{node}-token", node, history)
        self.lease_seconds, self.retry = lease_seconds, retry
        self.delegated = list(delegated)   # the pool's cut-off members this node delegates for
        self.observed, self.observed_at = None, 0.0
        self.was_leader = False

    def write_id(self):
        return self.h.next_id(self.node)

    def failed(self, status):
        """A replica that did not answer (or answered 5xx): the next one, as a
        client behind a load balancer would be moved."""
        if status is None or status >= 500:
            self.api.close(self.replica)
            self.replica = self.replicas.next(self.replica)

    def run(self):
        while not self.stopping.is_set():
            try:
                self.round()
            except Exception as e:  # a workload bug must not end the run silently
                self.h.faults.append({"name": "workload-error", "detail": f"{self.node}: {e!r}",
                                      "t0": time.monotonic(), "t1": time.monotonic()})
            self.stopping.wait(self.retry * self.rng.uniform(0.5, 1.2))
        for r in list(self.api.conns):
            self.api.close(r)

    def round(self):
        if self.rng.random() < 0.1:
            # A read from the watch cache (resourceVersion=0): may be stale, never unknown.
            self.api.op(self.replica, "get", "poolleases", self.pool, "GET",
                        _path("poolleases", self.pool, "resourceVersion=0"), fresh=False)
        status, doc = self.api.op(self.replica, "get", "poolleases", self.pool, "GET",
                                  _path("poolleases", self.pool))
        if status == 404:
            w = self.write_id()
            now = now_micro()
            body = {"apiVersion": GV, "kind": "PoolLease",
                    "metadata": {"name": self.pool, "annotations": {WRITE_ANNOTATION: w}},
                    "spec": {"holderIdentity": self.node, "leaseDurationSeconds": self.lease_seconds,
                             "acquireTime": now, "renewTime": now, "leaseTransitions": 0}}
            s, _ = self.api.op(self.replica, "create", "poolleases", self.pool, "POST",
                               _path("poolleases"), body, write=w)
            self.failed(s)
            return
        if status != 200 or not isinstance(doc, dict):
            self.failed(status)
            return
        spec = doc.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        if record != self.observed:
            self.observed, self.observed_at = record, time.monotonic()
        holder = spec.get("holderIdentity") or ""
        if holder == self.node:
            self.lead(doc)
        elif not holder or self.observed_at + self.lease_seconds < time.monotonic():
            self.take(doc)
        elif self.rng.random() < 0.03:
            # Impatient: a takeover of a lease it sees live; the server judges.
            self.take(doc)
        else:
            if self.was_leader or self.rng.random() < 0.05:
                # Deposed (it may not know yet) or following: a delegation now
                # must be refused.
                self.delegate(self.rng.choice(self.delegated))
            self.was_leader = False

    def _put(self, doc, verb_name="update"):
        w = self.write_id()
        doc.setdefault("metadata", {}).setdefault("annotations", {})[WRITE_ANNOTATION] = w
        s, out = self.api.op(self.replica, verb_name, "poolleases", self.pool, "PUT",
                             _path("poolleases", self.pool), doc, write=w)
        self.failed(s)
        return s, out

    def take(self, doc):
        now = now_micro()
        spec = doc["spec"]
        spec.update(holderIdentity=self.node, acquireTime=now, renewTime=now,
                    leaseDurationSeconds=self.lease_seconds,
                    leaseTransitions=(spec.get("leaseTransitions") or 0) + 1)
        s, _ = self._put(doc)
        self.was_leader = s == 200

    def lead(self, doc):
        r = self.rng.random()
        if r < 0.04:
            # A holder that stalls (a GC pause, a slow link) around its lease
            # duration, then carries on with what it read before: its renewal
            # and its delegations may come after another member took over.
            # It then delegates whatever its renewal's answer: the server must
            # refuse a delegation from a deposed holder.
            self.stopping.wait(self.lease_seconds * self.rng.uniform(0.6, 1.6))
            doc["spec"]["renewTime"] = now_micro()
            s, _ = self._put(doc)
            self.was_leader = s == 200
            for node in self.delegated:
                self.delegate(node)
            return
        if r < 0.02:
            doc["spec"]["holderIdentity"] = ""
            self._put(doc)
            self.was_leader = False
            return
        if r < 0.03:
            s, _ = self.api.op(self.replica, "delete", "poolleases", self.pool, "DELETE",
                               _path("poolleases", self.pool))
            self.failed(s)
            self.was_leader = False
            return
        doc["spec"]["renewTime"] = now_micro()
        s, _ = self._put(doc)
        self.was_leader = s == 200
        if s == 200:
            for node in self.delegated:
                if self.stopping.is_set():
                    return
                self.delegate(node)

    def delegate(self, node):
        """Renews (or creates, or now and then deletes) `node`'s DelegatedLease."""
        status, doc = self.api.op(self.replica, "get", "delegatedleases", node, "GET",
                                  _path("delegatedleases", node))
        w = self.write_id()
        if status == 404:
            body = {"apiVersion": GV, "kind": "DelegatedLease",
                    "metadata": {"name": node, "annotations": {DELEGATE_ANNOTATION: "true",
                                                               WRITE_ANNOTATION: w}},
                    "spec": {"holderIdentity": node, "leaseDurationSeconds": 10,
                             "renewTime": now_micro(), "poolName": self.pool, "delegate": self.node}}
            s, _ = self.api.op(self.replica, "create", "delegatedleases", node, "POST",
                               _path("delegatedleases"), body, write=w)
        elif status == 200 and isinstance(doc, dict):
            if self.rng.random() < 0.1:
                s, _ = self.api.op(self.replica, "delete", "delegatedleases", node, "DELETE",
                                   _path("delegatedleases", node))
            else:
                doc["metadata"].setdefault("annotations", {})[WRITE_ANNOTATION] = w
                doc["spec"].update(renewTime=now_micro(), delegate=self.node)
                s, _ = self.api.op(self.replica, "update", "delegatedleases", node, "PUT",
                                   _path("delegatedleases", node), doc, write=w)
        else:
            s = status
        self.failed(s)


class Prober(threading.Thread):
    """One after another through one replica: writes (`verb` "update": a merge
    patch of the PoolLease `name`, as the admin) or reads without
    resourceVersion ("get" of it, "list" of every PoolLease); what a replica
    cut off from etcd must answer with errors."""

    def __init__(self, replica, name, verb, replicas, history, stop):
        super().__init__(daemon=True, name=f"probe-{replica}-{name}-{verb}")
        self.replica, self.name, self.verb, self.h, self.stopping = replica, name, verb, history, stop
        self.api = Api(replicas, "admin-token", "admin", history)

    def run(self):
        path = _path("poolleases", self.name)
        status, _ = self.api.op(self.replica, "get", "poolleases", self.name, "GET", path)
        if status == 404:
            w = self.h.next_id("probe")
            self.api.op(self.replica, "create", "poolleases", self.name, "POST", _path("poolleases"),
                        {"apiVersion": GV, "kind": "PoolLease",
                         "metadata": {"name": self.name, "annotations": {WRITE_ANNOTATION: w}},
                         "spec": {"leaseDurationSeconds": 5}}, write=w)
        while not self.stopping.is_set():
            if self.verb == "update":
                w = self.h.next_id("probe")
                status, doc, t0, t1 = self.api.raw(
                    self.replica, "PATCH", path, {"metadata": {"annotations": {WRITE_ANNOTATION: w}}},
                    ctype="application/merge-patch+json")
                self.api.record(self.replica, "update", "poolleases", self.name, status, doc, t0, t1,
                                True, w)
            elif self.verb == "get":
                self.api.op(self.replica, "get", "poolleases", self.name, "GET", path)
            else:
                self.api.op(self.replica, "list", "poolleases", None, "GET", _path("poolleases"))
            self.stopping.wait(0.2)


class Stream:
    """One watch stream's record."""

    def __init__(self, sid, replica, kind, start):
        self.id, self.replica, self.kind, self.start = sid, replica, kind, start
        self.events, self.end, self.t_open = [], None, time.monotonic()
        self.conn = None

    def vouched(self):
        return max([self.start] + [e[1] for e in self.events])

    def record(self):
        return {"id": self.id, "replica": self.replica, "kind": self.kind, "start": self.start,
                "t_open": self.t_open, "events": self.events, "end": self.end}


class WatchChain(threading.Thread):
    """List, then watch and resume, on one replica and kind (see the module doc)."""

    def __init__(self, replica, kind, replicas, admin_token, history, seed, max_seconds=8):
        super().__init__(daemon=True, name=f"watch-{replica}-{kind}")
        self.replica, self.kind, self.replicas, self.h = replica, kind, replicas, history
        self.api = Api(replicas, admin_token, "admin", history)
        self.token = admin_token
        self.rng = random.Random(seed)
        self.max_seconds = max_seconds
        self.stopping = threading.Event()
        self.current = None
        self.rv = None
        self.relists = self.resumes = self.expired = 0

    def relist(self):
        status, doc = self.api.op(self.replica, "list", self.kind, None, "GET", _path(self.kind))
        if status == 200 and isinstance(doc, dict):
            self.rv = int(doc["metadata"]["resourceVersion"])
            self.relists += 1
            return True
        self.api.close(self.replica)
        self.replica = self.replicas.next(self.replica)
        return False

    def run(self):
        while not self.stopping.is_set():
            if self.rv is None and not self.relist():
                self.stopping.wait(0.3)
                continue
            self.watch_once()

    def watch_once(self):
        s = Stream(self.h.next_id("w"), self.replica, self.kind, self.rv)
        self.current = s
        self.h.watches.append(s)
        host, port = self.replicas.endpoints[self.replica]
        timeout_s = self.rng.randint(2, self.max_seconds)
        conn = http.client.HTTPSConnection(host, port, context=self.replicas.ctx, timeout=timeout_s + 30)
        s.conn = conn
        try:
            conn.request("GET", _path(self.kind, query=f"watch=true&resourceVersion={self.rv}"
                                      f"&allowWatchBookmarks=true&timeoutSeconds={timeout_s}"),
                         headers={"Accept": "application/json", "Authorization": "Bearer " + self.token})
            r = conn.getresponse()
            if r.status == 410:
                s.end = "expired"
            elif r.status != 200:
                s.end = f"http-{r.status}"
            else:
                s.end = self.read(s, r)
        except (OSError, http.client.HTTPException, ValueError):
            s.end = "broken"
        finally:
            conn.close()
        if self.stopping.is_set():
            s.end = "open-at-end"
            return
        if s.end == "expired":
            self.expired += 1
            self.rv = None
        elif s.end in ("broken",) or s.end.startswith("http-5"):
            self.replica = self.replicas.next(self.replica)
            self.stopping.wait(0.2)
        elif s.end.startswith("http-"):
            self.stopping.wait(0.5)
        if self.rng.random() < 0.2:
            # A client that comes back late (a backoff, a slow reconnect): it
            # resumes from an older resourceVersion, which may have left the
            # watch cache (410, relist).
            self.stopping.wait(self.rng.uniform(0.5, 3))
        self.resumes += 1

    def read(self, s, r):
        while True:
            line = r.readline()
            if not line:
                return "closed"
            line = line.strip()
            if not line:
                continue
            ev = json.loads(line)
            t = time.monotonic()
            obj = ev.get("object") or {}
            if ev["type"] == "ERROR":
                return "expired" if obj.get("code") == 410 else f"error-{obj.get('code')}"
            rv = int(obj["metadata"]["resourceVersion"])
            if ev["type"] == "BOOKMARK":
                s.events.append(["BOOKMARK", rv, None, None, t])
            else:
                s.events.append([ev["type"], rv, obj["metadata"]["name"], summary(obj)["write"], t])
            self.rv = max(self.rv, rv)

    def stop(self):
        self.stopping.set()
        s = self.current
        if s is not None and s.conn is not None and s.conn.sock is not None:
            try:
                s.conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class TruthRecorder(threading.Thread):
    """etcd's history from `start` on (see the module doc): events under
    `prefix` summarised, revisions outside it listed in other_revs."""

    def __init__(self, cluster, prefix):
        super().__init__(daemon=True, name="truth")
        self.cluster, self.prefix = cluster, prefix.rstrip("/") + "/"
        self.first = cluster.revision()
        self.last = self.first
        self.events, self.other_revs = [], []
        self.stopping = threading.Event()
        self.moved = threading.Condition()
        self.member = 0
        self.reconnects = 0

    def run(self):
        while not self.stopping.is_set():
            m = self.cluster.members[self.member]
            body = json.dumps({"create_request": {"key": base64.b64encode(b"\0").decode(),
                                                  "range_end": base64.b64encode(b"\0").decode(),
                                                  "start_revision": str(self.last + 1)}}).encode()
            req = urllib.request.Request(m.client_url + "/v3/watch", data=body, method="POST",
                                         headers={"Grpc-Metadata-hasleader": "true"})
            try:
                with urllib.request.urlopen(req, timeout=3600) as r:
                    for line in r:
                        if self.stopping.is_set():
                            return
                        self.take(json.loads(line))
            except (OSError, ValueError, http.client.HTTPException):
                pass
            if self.stopping.is_set():
                return
            self.reconnects += 1
            self.member = (self.member + 1) % len(self.cluster.members)
            self.stopping.wait(0.1)

    def take(self, msg):
        if "error" in msg:
            raise ValueError(msg["error"])
        res = msg.get("result") or {}
        if res.get("canceled"):
            raise RuntimeError(f"the truth recorder's watch was cancelled: {res}")
        for ev in res.get("events") or []:
            kv = ev["kv"]
            key = base64.b64decode(kv["key"]).decode()
            rev = int(kv["mod_revision"])
            if rev <= self.last:
                continue
            if key.startswith(self.prefix) and key.count("/", len(self.prefix)) == 1:
                kind, name = key[len(self.prefix):].split("/")
                delete = ev.get("type") == "DELETE"
                obj = None if delete else summary(json.loads(base64.b64decode(kv["value"])))
                self.events.append({"rev": rev, "kind": kind, "name": name,
                                    "type": "DELETE" if delete else "PUT",
                                    "create": int(kv.get("create_revision", 0)), "obj": obj})
            else:
                self.other_revs.append(rev)
            with self.moved:
                self.last = rev
                self.moved.notify_all()

    def wait_for(self, rev, timeout):
        deadline = time.monotonic() + timeout
        with self.moved:
            while self.last < rev:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.moved.wait(left)
        return True

    def stop(self):
        """The thread ends with its stream (a daemon: at the latest when etcd stops)."""
        self.stopping.set()
