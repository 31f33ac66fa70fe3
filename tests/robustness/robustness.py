"""One robustness run: three etcd members, three poolcoord replicas, the
workload, one fault under load, then the recorded history checked
(tests/robustness/README.md).

    python3 tests/robustness/robustness.py --binary build/poolcoord-apiserver \\
        --fault kill-etcd-leader [--hold 10] [--history out.json] [--seed N]

Faults: kill-etcd-member, kill-etcd-leader, partition-etcd-member,
partition-replica, kill-replica, compaction (`--fault all` runs each in turn on
fresh clusters). Prints what the run did and every violation; exit 0 when the
history holds, 1 when it does not, 77 (skipped) when the fault needs network
namespaces and this is not root.
"""
import argparse
import json
import os
import random
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, HERE)
from checker import check  # noqa: E402
from etcd_fixture import EtcdCluster, find_binary  # noqa: E402
from harness import Server  # noqa: E402
from netns import Net, NetUnavailable, unavailable_reason  # noqa: E402
from workload import (BASE, DELEGATE_ANNOTATION, GV, WRITE_ANNOTATION, Api, Candidate,  # noqa: E402
                      History, Prober, Replicas, TruthRecorder, WatchChain, now_micro)

KINDS = ("poolleases", "delegatedleases")
NEEDS_NETNS = {"partition-etcd-member", "partition-replica"}
FAULTS = ["kill-etcd-member", "kill-etcd-leader", "partition-etcd-member", "partition-replica",
          "kill-replica", "compaction"]
# How long each fault lasts by default: a partition longer than the checker's
# bounds (15 s) so that a replica stuck behind it shows; a replica cut off
# longer than its requests take to fail (etcd calls time out after 10 s, new
# connections after 5 s per member), so that answers come while it is cut off.
HOLD = {"kill-etcd-member": 8, "kill-etcd-leader": 8, "partition-etcd-member": 25,
        "partition-replica": 30, "kill-replica": 8, "compaction": 12}


class Env:
    """What a run stands on: the namespaces (when root), etcd, the replicas."""

    def __init__(self, binary, fault, pools, candidates, cutoff, seed):
        self.net = None
        if unavailable_reason() is None:
            self.net = Net("rb")
        self.cluster = self.replicas = None
        try:
            self.cluster = EtcdCluster(3, net=self.net)
            self.prefix = f"/robustness/{uuid.uuid4().hex[:8]}"
            self.membership = {"pools": {}}
            self.plan = {}   # pool -> (candidates, cut-off members)
            # Written once by the admin after the load: the last event of each kind.
            self.membership["pools"]["sentinel"] = ["sentinel"]
            for p in range(pools):
                nodes = [f"p{p}-n{i}" for i in range(candidates + cutoff)]
                self.membership["pools"][f"pool-{p}"] = nodes
                self.plan[f"pool-{p}"] = (nodes[:candidates], nodes[candidates:])
            self.flags = ["--storage-backend=etcd3", f"--etcd-servers={','.join(self.cluster.endpoints)}",
                          f"--etcd-prefix={self.prefix}"]
            if fault == "compaction":
                # A small watch cache: watches resumed from before it get 410 and relist.
                self.flags.append("--watch-history-size=50")
            self.replicas = {}
            for i in range(3):
                name = f"r{i}"
                if self.net:
                    ip = self.net.add(name)
                    self.replicas[name] = Server(binary, extra_args=self.flags, membership=self.membership,
                                                 host=ip, exec_prefix=self.net.exec_prefix(name))
                else:
                    self.replicas[name] = Server(binary, extra_args=self.flags, membership=self.membership)
        except BaseException:
            self.close()
            raise

    def member_ips(self):
        return [m.ip for m in self.cluster.members]

    def close(self, keep_logs_to=None):
        for name, s in (self.replicas or {}).items():
            s.stop()
            if keep_logs_to:
                with open(os.path.join(keep_logs_to, f"{name}.log"), "w") as f:
                    f.write(s.read_log())
            s.cleanup()
        if self.cluster:
            self.cluster.stop()
        if self.net:
            self.net.cleanup()


def same_ca(env):
    """Every replica generated its own CA; the workload's one TLS context trusts
    them all."""
    bundle = os.path.join(next(iter(env.replicas.values())).workdir, "all-cas.pem")
    with open(bundle, "w") as out:
        for s in env.replicas.values():
            with open(s.ca) as f:
                out.write(f.read())
    return bundle


class Run:
    def __init__(self, env, fault, hold, seed, log):
        self.env, self.fault, self.hold, self.log = env, fault, hold, log
        self.rng = random.Random(seed)
        self.h = History({"fault": fault, "hold": hold, "seed": seed, "prefix": env.prefix,
                          "max_watch_delay": 15, "max_unavailable": 15,
                          "membership": env.membership})
        self.replicas = Replicas({n: (s.host, s.port) for n, s in env.replicas.items()}, same_ca(env))
        self.stop_writers = threading.Event()

    def note(self, msg):
        self.log(f"  {time.monotonic() - self.t_start:6.1f}s {msg}")

    # --- faults, each called from the main thread (it restarts what it kills:
    # a child dies with the thread that started it)

    def fault_window(self, name, detail, t0):
        self.h.faults.append({"name": name, "detail": detail, "t0": t0, "t1": time.monotonic()})

    def kill_etcd(self, leader):
        cluster = self.env.cluster
        lead = None
        for _ in range(50):
            lead = cluster.leader()
            if lead is not None:
                break
            time.sleep(0.1)
        if leader:
            victim = lead
        else:
            # The replicas' first endpoint when it follows: their calls start there.
            victim = 0 if lead != 0 else 1
        t0 = time.monotonic()
        cluster.kill(victim)
        self.note(f"kill -9 etcd member m{victim} ({'leader' if victim == lead else 'follower'})")
        time.sleep(self.hold)
        cluster.start(victim)
        self.note(f"m{victim} restarted and ready; leader now m{cluster.leader()}")
        self.fault_window("kill-etcd-leader" if leader else "kill-etcd-member", f"m{victim}", t0)

    def partition_member(self):
        net, cluster = self.env.net, self.env.cluster
        # m0 is every replica's first endpoint: their calls start there.
        others = [m.ip for m in cluster.members[1:]]
        role = "leader" if cluster.leader() == 0 else "follower"
        t0 = time.monotonic()
        net.block("e0", others)
        self.note(f"m0 ({role}) cut from its peers; clients still reach it")
        time.sleep(self.hold)
        net.unblock("e0")
        self.note(f"m0 healed; leader m{cluster.leader()}")
        self.fault_window("partition-etcd-member", f"m0 ({role})", t0)

    def partition_replica(self):
        net = self.env.net
        stop = threading.Event()
        probers = [Prober("r1", f"probe-{i}", verb, self.replicas, self.h, stop)
                   for i in range(2) for verb in ("update", "get", "list")]
        for p in probers:
            p.start()
        time.sleep(1)
        t0 = time.monotonic()
        net.block("r1", self.env.member_ips())
        cut = time.monotonic()
        self.note("r1 cut from every etcd member")
        time.sleep(self.hold)
        healed = time.monotonic()
        net.unblock("r1")
        self.note("r1 healed")
        stop.set()
        self.h.cutoffs.append({"replica": "r1", "t0": cut, "t1": healed})
        self.h.excused.append({"replica": "r1", "t0": t0, "t1": healed})
        self.fault_window("partition-replica", "r1", t0)

    def kill_replica(self):
        s = self.env.replicas["r1"]
        t0 = time.monotonic()
        s.stop(sig=9)
        self.note("kill -9 replica r1")
        time.sleep(self.hold)
        s.start()
        self.note("r1 restarted and ready")
        self.h.excused.append({"replica": "r1", "t0": t0, "t1": time.monotonic()})
        self.fault_window("kill-replica", "r1", t0)

    def compaction(self):
        t0 = time.monotonic()
        n, last = 0, 0
        end = time.monotonic() + self.hold
        restart_at, restarted = t0 + self.hold / 3, False
        while time.monotonic() < end:
            if not restarted and time.monotonic() >= restart_at:
                # The replicas' etcd watches (the watch caches' upstreams) are
                # on m0: they break and resume from a revision compaction may
                # have removed, which makes the caches list again.
                self.env.cluster.kill(0)
                time.sleep(1)
                self.env.cluster.start(0)
                self.note("m0 killed and restarted: the replicas' etcd watches resumed")
                restarted = True
            # Never past the recorder: its watch must resume where it is.
            target = min(self.truth.last, self.env.cluster.revision()) - 1
            if target > last:
                self.env.cluster.compact(target)
                n, last = n + 1, target
            time.sleep(0.5)
        self.note(f"compacted {n} times while the watches ran, last to rv {last}")
        self.fault_window("compaction", f"{n} compactions", t0)

    def inject(self):
        {"kill-etcd-member": lambda: self.kill_etcd(False),
         "kill-etcd-leader": lambda: self.kill_etcd(True),
         "partition-etcd-member": self.partition_member,
         "partition-replica": self.partition_replica,
         "kill-replica": self.kill_replica,
         "compaction": self.compaction}[self.fault]()

    # --- the run

    def start_workload(self):
        self.candidates = []
        seed = self.rng.randrange(1 << 30)
        for pool, (cands, cut) in self.env.plan.items():
            for node in cands:
                seed += 1
                c = Candidate(node, pool, self.env.membership["pools"][pool], self.replicas, self.h,
                              self.stop_writers, seed, delegated=cut)
                self.candidates.append(c)
        self.chains = [WatchChain(r, k, self.replicas, "admin-token", self.h, seed + i)
                       for i, (r, k) in enumerate((r, k) for r in self.replicas.names for k in KINDS)]
        for t in self.chains + self.candidates:
            t.start()

    def sentinels(self):
        """One write per kind after the load, through r0, that every watch must deliver."""
        admin = Api(self.replicas, "admin-token", "admin", self.h)
        now = now_micro()
        bodies = {
            "poolleases": {"apiVersion": GV, "kind": "PoolLease",
                           "metadata": {"name": "sentinel", "annotations": {WRITE_ANNOTATION: "sentinel#pl"}},
                           "spec": {"leaseDurationSeconds": 5}},
            "delegatedleases": {"apiVersion": GV, "kind": "DelegatedLease",
                                "metadata": {"name": "sentinel",
                                             "annotations": {DELEGATE_ANNOTATION: "true",
                                                             WRITE_ANNOTATION: "sentinel#dl"}},
                                "spec": {"holderIdentity": "sentinel", "leaseDurationSeconds": 10,
                                         "renewTime": now, "poolName": "sentinel",
                                         "delegate": "sentinel"}}}
        for kind, body in bodies.items():
            for attempt in range(30):
                replica = self.replicas.names[attempt % 3]
                status, doc = admin.op(replica, "create", kind, "sentinel", "POST", f"{BASE}/{kind}",
                                       body, write=body["metadata"]["annotations"][WRITE_ANNOTATION])
                if status == 201:
                    self.h.sentinels[kind] = int(doc["metadata"]["resourceVersion"])
                    break
                if status is not None and status < 500:
                    raise RuntimeError(f"the {kind} sentinel was refused: {status} {doc}")
                time.sleep(0.5)
            else:
                raise RuntimeError(f"the {kind} sentinel could not be written")

    def finish(self):
        self.stop_writers.set()
        for c in self.candidates:
            c.join(60)
        self.note("writers stopped")
        for name, s in self.env.replicas.items():
            if s.proc.poll() is not None:
                self.note(f"replica {name} had exited ({s.proc.returncode}): restarted")
                s.start()
        self.sentinels()
        deadline = time.monotonic() + 60
        for ch in self.chains:
            while time.monotonic() < deadline:
                cur = ch.current
                if cur is not None and cur.end is None and cur.vouched() >= self.h.sentinels.get(ch.kind, 0):
                    break
                time.sleep(0.1)
        for ch in self.chains:
            ch.stop()
        for ch in self.chains:
            ch.join(30)
        admin = Api(self.replicas, "admin-token", "admin", self.h)
        for name in self.replicas.names:
            self.h.final[name] = {}
            for kind in KINDS:
                status, doc = admin.op(name, "list", kind, None, "GET", f"{BASE}/{kind}")
                self.h.final[name][kind] = None
                if status == 200:
                    self.h.final[name][kind] = {
                        "rv": int(doc["metadata"]["resourceVersion"]),
                        "items": {i["metadata"]["name"]: int(i["metadata"]["resourceVersion"])
                                  for i in doc["items"]}}
        end = self.env.cluster.revision()
        if not self.truth.wait_for(end, 30):
            raise RuntimeError(f"the truth recorder did not reach rv {end} (at {self.truth.last})")
        self.truth.stop()

    def run(self, warmup, settle):
        self.t_start = time.monotonic()
        self.truth = TruthRecorder(self.env.cluster, self.env.prefix)
        self.truth.start()
        self.start_workload()
        time.sleep(warmup)
        self.note(f"warm: {len(self.h.ops)} requests")
        self.inject()
        time.sleep(settle)
        self.finish()
        return self.h.to_json(self.truth)


def stats(h):
    """What a run did, as figures (the bench's table) and one line."""
    ops = h["ops"]
    writes = {"ok": 0, "refused": 0, "unknown": 0}
    lat = []
    for op in ops:
        if op["verb"] in ("create", "update", "delete"):
            st = op["status"]
            writes["ok" if st and st < 300 else "refused" if st and st < 500 else "unknown"] += 1
            lat.append(op["t1"] - op["t0"])
    acked = {op["write"]: op["t1"] for op in ops if op.get("write") and op["status"] and op["status"] < 300}
    events, delays = 0, []
    for w in h["watches"]:
        for e in w["events"]:
            if e[0] == "BOOKMARK":
                continue
            events += 1
            if e[3] in acked and e[0] != "DELETED":
                # As the checker counts it: from the answer, or from the stream's start.
                delays.append(e[4] - max(acked[e[3]], w["t_open"]))
    takeovers, prev = 0, {}
    for e in h["truth"]:
        if e["kind"] == "poolleases":
            hold = e["obj"]["holder"] if e["type"] == "PUT" else None
            if hold and hold != prev.get(e["name"]):
                takeovers += 1
            prev[e["name"]] = hold
    out = {"requests": len(ops), "writes_acknowledged": writes["ok"], "writes_refused": writes["refused"],
           "writes_unknown": writes["unknown"], "revisions": len(h["truth"]), "acquisitions": takeovers,
           "watch_streams": len(h["watches"]), "watch_events": events,
           "expired": sum(1 for w in h["watches"] if w["end"] == "expired"),
           "max_write_s": round(max(lat, default=0), 2), "max_watch_delay_s": round(max(delays, default=0), 2)}
    line = (f"{out['requests']} requests, writes {writes['ok']} acknowledged / {writes['refused']} "
            f"refused / {writes['unknown']} without a definite answer; {out['revisions']} revisions in "
            f"etcd; {takeovers} PoolLease acquisitions; {out['watch_streams']} watch streams delivered "
            f"{events} events ({out['expired']} ended 410); slowest write {out['max_write_s']}s, "
            f"latest watch event {out['max_watch_delay_s']}s after its write's answer")
    return out, line


def run_one(args, fault, log):
    if fault in NEEDS_NETNS and unavailable_reason():
        print(f"SKIP {fault}: {unavailable_reason()}")
        return 77
    t0 = time.monotonic()
    hold = args.hold if args.hold is not None else HOLD[fault] * args.hold_scale
    env = Env(args.binary, fault, args.pools, args.candidates, args.cutoff, args.seed)
    log(f"{fault}: 3 etcd members{' in network namespaces' if env.net else ''} and 3 replicas "
        f"up in {time.monotonic() - t0:.1f}s")
    try:
        h = Run(env, fault, hold, args.seed, log).run(args.warmup, args.settle)
    finally:
        if args.logs:
            os.makedirs(args.logs, exist_ok=True)
        env.close(keep_logs_to=args.logs)
    if args.history:
        path = args.history if args.fault != "all" else f"{args.history}.{fault}.json"
        with open(path, "w") as f:
            json.dump(h, f)
    violations = check(h)
    figures, line = stats(h)
    log(f"{fault}: {line}; {time.monotonic() - t0:.0f}s in all")
    if args.results:
        kinds = {}
        for v in violations:
            kinds[v.kind] = kinds.get(v.kind, 0) + 1
        with open(args.results, "a") as f:
            f.write(json.dumps({"fault": fault, "seed": args.seed, "hold": hold,
                                "seconds": round(time.monotonic() - t0, 1), **figures,
                                "violations": kinds, "load": os.getloadavg()[0]}) + "\n")
    by_kind = {}
    for v in violations:
        by_kind.setdefault(v.kind, []).append(v)
    for kind, vs in by_kind.items():
        for v in vs[:3]:
            log(f"  VIOLATION {v}")
        if len(vs) > 3:
            log(f"  ... {len(vs) - 3} more {kind}")
    log(f"{fault}: {'PASS' if not violations else 'FAIL'} ({len(violations)} violations)")
    return 0 if not violations else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--fault", required=True, choices=FAULTS + ["all"])
    ap.add_argument("--hold", type=float, help="seconds the fault lasts (default: HOLD)")
    ap.add_argument("--hold-scale", type=float, default=1.0, help="HOLD times this")
    ap.add_argument("--warmup", type=float, default=4)
    ap.add_argument("--settle", type=float, default=6, help="seconds of load after the fault")
    ap.add_argument("--pools", type=int, default=3)
    ap.add_argument("--candidates", type=int, default=5)
    ap.add_argument("--cutoff", type=int, default=3, help="cut-off members per pool (DelegatedLeases)")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--history", help="write the history JSON here")
    ap.add_argument("--results", help="append one JSON line of figures per run to this file")
    ap.add_argument("--logs", help="keep the replicas' logs in this directory")
    args = ap.parse_args()
    args.binary = os.path.abspath(args.binary)
    if not find_binary():
        print("FAIL: etcd not found (scripts/install-deps.sh --test installs etcd-server)")
        return 1
    print(f"seed {args.seed}", flush=True)

    def log(msg):
        print(msg, flush=True)
    codes = [run_one(args, f, log) for f in (FAULTS if args.fault == "all" else [args.fault])]
    if any(c == 1 for c in codes):
        return 1
    return 77 if all(c == 77 for c in codes) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except NetUnavailable as e:
        print(f"SKIP: {e}")
        sys.exit(77)
