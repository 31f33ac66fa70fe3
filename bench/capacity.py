#!/usr/bin/env python3
"""CPU per operation of each component on three etcd members and three poolcoord
replicas (BENCHMARKS.md, "Capacity on paper"): what a renewal, a PoolLease read,
a PoolLease renewal, a webhook review and a watch event cost poolcoord and etcd,
measured at fixed rates with poolcoord-loadgen, each phase on the same cluster.

    bench/capacity.py --binary build/poolcoord-apiserver --loadgen build/poolcoord-loadgen \\
        [--seconds 20] [--rate 200] [--watchers 50] [--out results.json]

Each phase runs one open-loop loadgen per replica at rate/3 (the clients spread
over the replicas, as behind a Service), after 3 s of warm-up; CPU is
utime + stime of each process (/proc/PID/stat) over the measured window,
divided by the requests answered in it:
- renew: DelegatedLease merge-PATCHes of renewTime by the pool's leader (bench/
  fixtures.py: 100 pools x 10 nodes), the full rules, through etcd;
- pl_get: GET of a PoolLease without resourceVersion (a follower's poll in
  client-go's LeaseLock: a consistent read from etcd);
- pl_renew: PoolLease merge-PATCHes of renewTime by its holder;
- webhook: AdmissionReviews of the forwarder's node-Lease writes (6 KB), the
  rule checked against the stores;
- watch: the renew phase's rate again, with `watchers` watches of
  delegatedleases on every replica (loadgen fanout, one per replica, writing
  rate/3 each): the CPU above the renew phase's, per event delivered to a watcher.
Everything runs on this machine: a shared 2-core machine's figures carry its
load (printed beside them).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
from etcd_fixture import EtcdCluster  # noqa: E402
from harness import Server  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
BASE = "/apis/coordination.pool/v1alpha1"


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def tokens_of(path):
    out = {}
    with open(path) as f:
        for line in f:
            tok, user, _, groups = line.strip().split(",", 3)
            out[tok] = (user, [g for g in groups.strip('"').split(",") if g])
    return out


class Bench:
    def __init__(self, a):
        self.a = a
        self.work = tempfile.mkdtemp(prefix="poolcoord-capacity-")
        subprocess.run([sys.executable, os.path.join(HERE, "fixtures.py"), self.work, "--renew-pools",
                        str(a.pools), "--mem-pools", "1", "--nodes", "10"], check=True,
                       capture_output=True)
        self.fx = os.path.join(self.work, "renew")
        with open(os.path.join(self.fx, "membership.yaml")) as f:
            membership = json.load(f)
        self.etcd = EtcdCluster(3)
        flags = ["--storage-backend=etcd3", f"--etcd-servers={','.join(self.etcd.endpoints)}",
                 "--etcd-prefix=/capacity"]
        tokens = tokens_of(os.path.join(self.fx, "tokens.csv"))
        self.replicas = [Server(a.binary, extra_args=flags, membership=membership, tokens=tokens)
                         for _ in range(3)]
        self.admin_token = "bench-admin-token"
        with open(os.path.join(self.fx, "pl_get.tmpl"), "w") as f:
            f.write(f"GET {BASE}/poolleases/{{{{f1}}}}\nAuthorization: Bearer {{{{f0}}}}\n"
                    "Accept: application/json\n\n")

    def loadgen(self, mode, port, *args):
        return subprocess.Popen([self.a.loadgen, mode, f"--port={port}", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def populate(self):
        tmpls = [f"--template={self.fx}/pl_create.tmpl"] + [
            f"--template={self.fx}/dl_create_{n}.tmpl" for n in range(10)]
        p = self.loadgen("closed", self.replicas[0].port, "--connections=16", "--threads=2",
                         f"--keys={self.fx}/pools.tsv", *tmpls)
        out, err = p.communicate(timeout=300)
        if p.returncode != 0:
            raise RuntimeError(f"populate failed: {out} {err}")

    def pids(self):
        out = {f"poolcoord-r{i}": s.proc.pid for i, s in enumerate(self.replicas)}
        for i, m in enumerate(self.etcd.members):
            out[f"etcd-m{i}"] = m.proc.pid
        return out

    def sample(self, pids):
        return {name: cpu_s(pid) for name, pid in pids.items()}

    def idle(self, seconds=10):
        """CPU per second of each process with no load: raft heartbeats, the
        DelegatedLease GC's sweeps, challenge rotation. The phases count what is
        above it."""
        pids = self.pids()
        c0, t0 = self.sample(pids), time.monotonic()
        time.sleep(seconds)
        c1, t1 = self.sample(pids), time.monotonic()
        self.idle_rate = {k: (c1[k] - c0[k]) / (t1 - t0) for k in pids}
        row = {"phase": "idle", "cpu_ms_per_s": {k: round(v * 1e3, 2) for k, v in self.idle_rate.items()},
               "load": round(os.getloadavg()[0], 2)}
        print(json.dumps(row), flush=True)
        return row

    def split(self, keys):
        """keys split in three, one file per replica's loadgen: a key renewed by
        two generators at once would get renewTimes out of order (409)."""
        with open(keys) as f:
            lines = f.read().splitlines()
        out = []
        for i in range(3):
            path = f"{keys}.{i}"
            with open(path, "w") as f:
                f.write("\n".join(lines[i::3]) + "\n")
            out.append(path)
        return out

    def phase(self, name, tmpl, keys, rate, warmup=3):
        """One open-loop loadgen per replica at rate/3; CPU per answered request
        above the idle rate."""
        pids = self.pids()
        procs = [self.loadgen("open", s.port, f"--rate={rate / 3}", f"--duration={self.a.seconds}",
                              f"--warmup={warmup}", "--connections=8", f"--template={tmpl}",
                              f"--keys={k}") for s, k in zip(self.replicas, self.split(keys))]
        time.sleep(0.2 + warmup)
        c0, load0, t0 = self.sample(pids), os.getloadavg()[0], time.monotonic()
        gens0 = sum(cpu_s(p.pid) for p in procs)
        time.sleep(self.a.seconds)
        c1, t1 = self.sample(pids), time.monotonic()
        gens1 = sum(cpu_s(p.pid) for p in procs)
        results = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
        done = sum(r["completed"] for r in results)
        statuses = {}
        for r in results:
            for k, v in r["status"].items():
                statuses[k] = statuses.get(k, 0) + v
        per = {k: round((c1[k] - c0[k] - self.idle_rate[k] * (t1 - t0)) * 1e6 / max(done, 1), 1)
               for k in pids}
        row = {"phase": name, "rate": round(done / (t1 - t0), 1), "requests": done,
               "etcd_leader": f"etcd-m{self.etcd.leader()}",
               "statuses": statuses, "us_per_request": per,
               "poolcoord_us": round(sum(v for k, v in per.items() if k.startswith("poolcoord")), 1),
               "etcd_us": round(sum(v for k, v in per.items() if k.startswith("etcd")), 1),
               "loadgen_us": round((gens1 - gens0) * 1e6 / max(done, 1), 1),
               "p99_ms": round(max(r["p99_us"] for r in results) / 1000, 1),
               "load": [round(load0, 2), round(os.getloadavg()[0], 2)]}
        print(json.dumps(row), flush=True)
        return row

    def current_rv(self, replica):
        req = urllib.request.Request(
            f"https://127.0.0.1:{replica.port}{BASE}/delegatedleases?limit=1",
            headers={"Authorization": f"Bearer {self.admin_token}"})
        import ssl
        ctx = ssl.create_default_context(cafile=replica.ca)
        with urllib.request.urlopen(req, context=ctx) as r:
            return json.loads(r.read())["metadata"]["resourceVersion"]

    def watch_phase(self, rate, watchers):
        """loadgen fanout on each replica: `watchers` watches, rate/3 writes."""
        pids = self.pids()
        procs = []
        with open(os.path.join(self.fx, "keys.tsv")) as f:
            keys = f.read().splitlines()
        for i, s in enumerate(self.replicas):
            key = os.path.join(self.work, f"fanout-key-{i}.tsv")
            with open(key, "w") as f:
                f.write(keys[i * 7] + "\n")
            tmpl = os.path.join(self.work, f"watch-{i}.tmpl")
            with open(tmpl, "w") as f:
                f.write(f"GET {BASE}/delegatedleases?watch=1&resourceVersion={self.current_rv(s)}"
                        f"&timeoutSeconds=600\nAuthorization: Bearer {self.admin_token}\n"
                        "Accept: application/json\n")
            procs.append(self.loadgen("fanout", s.port, f"--watchers={watchers}", f"--rate={rate / 3}",
                                      f"--duration={self.a.seconds}", f"--watch-template={tmpl}",
                                      f"--keys={key}", f"--template={self.fx}/dl_renew.tmpl"))
        # Every watch is open once each generator says so, before its first write.
        deadline = time.monotonic() + 120
        ready = [False] * len(procs)
        os.set_blocking(procs[0].stderr.fileno(), True)
        for i, p in enumerate(procs):
            while not ready[i] and time.monotonic() < deadline:
                line = p.stderr.readline()
                if not line:
                    break
                ready[i] = "watchers ready" in line
        time.sleep(1)
        c0, load0, t0 = self.sample(pids), os.getloadavg()[0], time.monotonic()
        results = [json.loads(p.communicate(timeout=self.a.seconds + 120)[0]) for p in procs]
        c1, t1 = self.sample(pids), time.monotonic()
        deliveries = sum(r["deliveries"] for r in results)
        writes = sum(r["writes"] for r in results)
        row = {"phase": "watch", "watchers_per_replica": watchers, "writes": writes,
               "etcd_leader": f"etcd-m{self.etcd.leader()}",
               "deliveries": deliveries, "seconds": round(t1 - t0, 1),
               "cpu_s": {k: round(c1[k] - c0[k] - self.idle_rate[k] * (t1 - t0), 3)
                         for k in pids},
               "p99_ms": [round(r["p99_us"] / 1000, 1) for r in results],
               "load": [round(load0, 2), round(os.getloadavg()[0], 2)]}
        print(json.dumps(row), flush=True)
        return row

    def close(self):
        for s in self.replicas:
            s.stop()
            s.cleanup()
        self.etcd.stop()
        shutil.rmtree(self.work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--loadgen", required=True)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--rate", type=float, default=200, help="renewals/s in all")
    ap.add_argument("--get-rate", type=float, default=300)
    ap.add_argument("--webhook-rate", type=float, default=300)
    ap.add_argument("--watchers", type=int, default=50, help="per replica")
    ap.add_argument("--watch-rate", type=float, default=60)
    ap.add_argument("--pools", type=int, default=100)
    ap.add_argument("--phases", default="renew,pl_get,pl_renew,webhook,watch",
                    help="which phases, in this order")
    ap.add_argument("--out")
    a = ap.parse_args()
    b = Bench(a)
    rows = []
    phases = a.phases.split(",")
    try:
        b.populate()
        rows.append(b.idle())
        fx = b.fx
        if "renew" in phases:
            rows.append(b.phase("renew", f"{fx}/dl_renew.tmpl", f"{fx}/keys.tsv", a.rate))
        if "pl_get" in phases:
            rows.append(b.phase("pl_get", f"{fx}/pl_get.tmpl", f"{fx}/pools.tsv", a.get_rate))
        if "pl_renew" in phases:
            rows.append(b.phase("pl_renew", f"{fx}/pl_renew.tmpl", f"{fx}/pools.tsv", a.rate / 2))
        if "webhook" in phases:
            rows.append(b.phase("webhook", f"{fx}/webhook_forwarder_6k.tmpl", f"{fx}/keys.tsv",
                                a.webhook_rate))
        if "watch" not in phases:
            return 0
        base = b.phase("renew_at_watch_rate", f"{fx}/dl_renew.tmpl", f"{fx}/keys.tsv", a.watch_rate)
        rows.append(base)
        w = b.watch_phase(a.watch_rate, a.watchers)
        rows.append(w)
        # The watchers' cost: CPU above the same write rate without them, per
        # event delivered. Every replica's watchers get every write's event (the
        # generators count only their own writes' deliveries).
        delivered = a.watchers * w["writes"]
        extra = {k: round((v - base["us_per_request"][k] * 1e-6 * w["writes"]) * 1e6 / max(delivered, 1), 2)
                 for k, v in w["cpu_s"].items()}
        rows.append({"phase": "per_watch_event", "deliveries_per_replica": delivered,
                     "us_per_delivery": extra})
        print(json.dumps(rows[-1]))
    finally:
        b.close()
        if a.out:
            with open(a.out, "w") as f:
                json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
