#!/usr/bin/env python3
"""The forwarder's capacity on the real control plane: the largest number of nodes,
cut off at once, that all stay Ready (kube-controller-manager 1.32,
--node-monitor-grace-period=40s) for --duration seconds, and what each component
spends per forwarded renewal.

For each N of --nodes, on a fresh cluster (tests/e2e/kube_cluster.py; poolcoord as
the chart runs it: one replica on the memory store, or --replicas=2 on etcd3 with
the chart's shards):
  1. N Nodes (Ready, one pool) and their Leases are created in bulk
     (poolcoord-loadgen closed loop, as system:masters); nobody renews those Leases:
     the nodes are cut off. The pool's leader (a member kept renewing) takes the
     PoolLease.
  2. kube-controller-manager starts: its node lifecycle controller sees every node
     at once, so every node's grace period starts together: the storm.
  3. The leader writes the N DelegatedLeases at once (loadgen closed loop, its
     node certificate, straight to poolcoord), then renews each every --dl-period
     (loadgen open loop, a JSON merge patch of spec.renewTime).
  4. For --duration seconds: every Node's Ready condition (a watch), poolcoord's
     metrics every 5 s (forwards, errors, conflicts, queue lag), and the CPU time
     of every process (/proc/PID/stat) over the steady part (after --warmup).
  5. With --webhook-ab (default on): --ab-seconds more with the webhook
     registration deleted, the same measures: the webhook's share of kube-apiserver's
     and poolcoord's CPU per forwarded renewal.
A run passes when no node left Ready. Results: one JSON per N in --out, and a
table on stdout.

  bench/forwarder_scale.py --binary build/poolcoord-apiserver --nodes 2000,5000,10000
  bench/forwarder_scale.py --replicas 2 --nodes 10000 --duration 300

Needs root only for nothing; needs the Kubernetes binaries as the cluster tests do
($POOLCOORD_K8S_BIN or ../shared/k8s/v1.32.6/bin) and build/poolcoord-loadgen.
Standard library only."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
from etcd_fixture import EtcdFixture  # noqa: E402
from harness import BASE, GV  # noqa: E402
from kube_cluster import DELEGATE, POOL_LABEL, ChartInstall, KubeCluster, Skip  # noqa: E402
from storm import Leader, LeaseWatch, ReadyWatch, StormNodes, cpu_seconds, metric, thread_cpu_seconds  # noqa: E402

NODE_LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def template(path, method, target, body, headers=()):
    with open(path, "w") as f:
        f.write(f"{method} {target}\n")
        for h in ("Content-Type: " + ("application/merge-patch+json" if method == "PATCH" else "application/json"),
                  "Accept: application/json", *headers):
            f.write(h + "\n")
        f.write("\n" + body + "\n")
    return path


def loadgen(binary, mode, port, cert, templates, keys, extra=()):
    args = [binary, mode, f"--port={port}", f"--client-cert={cert[0]}", f"--client-key={cert[1]}",
            f"--keys={keys}", *[f"--template={t}" for t in templates], *extra]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p, what):
    out, err = p.communicate()
    if p.returncode != 0:
        raise RuntimeError(f"{what}: poolcoord-loadgen exited {p.returncode}: {err[-500:]}")
    return json.loads(out)


class Cpu:
    """CPU seconds of named processes (and of the forwarder's own threads, fwd-*,
    in each poolcoord process) between two marks."""

    def __init__(self, pids):
        self.pids = pids

    def sample(self):
        out = {}
        for name, pid in self.pids.items():
            try:
                out[name] = cpu_seconds(pid)
                if name.startswith("poolcoord-"):
                    out[name + " forwarder"] = thread_cpu_seconds(pid, "fwd-")
            except OSError:
                out[name] = None
        return out


def take_profile(cluster, seconds, path):
    """kube-apiserver's CPU profile over the next `seconds` (its /debug/pprof,
    --profiling is on by default), written to `path` for bench/pprof_top.py."""
    conn = cluster.admin().connect(timeout=seconds + 30)
    try:
        conn.request("GET", f"/debug/pprof/profile?seconds={seconds}")
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"/debug/pprof/profile: {r.status} {data[:200]!r}")
        with open(path, "wb") as f:
            f.write(data)
    finally:
        conn.close()


def run_one(a, n, out_dir):
    work = tempfile.mkdtemp(prefix=f"storm-{n}-", dir=out_dir)
    # --profiling=true after the harness's false: the later flag wins.
    cluster = KubeCluster(kcm=False, apiserver_args=["--profiling=true"] if a.profile_at else [])
    etcd = None
    result = {"nodes": n, "replicas": a.replicas, "duration_s": a.duration, "dl_period_s": a.dl_period,
              "grace": "40s"}
    watch = None
    renewer = None
    leader = None
    try:
        values = [f"forwarder.kubeApiQps={a.qps}", f"forwarder.concurrentNodeLeaseSyncs={a.workers}"]
        if a.replicas > 1:
            etcd = EtcdFixture(name="poolcoord")
            values += ["storage.backend=etcd3", f"replicas={a.replicas}",
                       f"storage.etcd.servers={{{etcd.endpoint}}}"]
        pc = ChartInstall(cluster, a.binary, values=values)
        storm = StormNodes(cluster, n)
        keys = os.path.join(work, "nodes.tsv")
        with open(keys, "w") as f:
            f.write("\n".join(storm.names) + "\n")
        # 1. Nodes and Leases, in bulk (the leader first, by storm.py, with its Lease).
        t0 = time.monotonic()
        StormNodes(cluster, 0, leader=storm.leader).create()
        now = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        node_t = template(os.path.join(work, "node.tmpl"), "POST", "/api/v1/nodes", json.dumps(
            {"apiVersion": "v1", "kind": "Node",
             "metadata": {"name": "{{f0}}", "labels": {"kubernetes.io/hostname": "{{f0}}", POOL_LABEL: storm.pool}},
             "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                        "message": "kubelet is posting ready status",
                                        "lastHeartbeatTime": now + "Z", "lastTransitionTime": now + "Z"}]}}))
        lease_t = template(os.path.join(work, "lease.tmpl"), "POST", NODE_LEASES, json.dumps(
            {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "{{f0}}", "namespace": "kube-node-lease"},
             "spec": {"holderIdentity": "{{f0}}", "leaseDurationSeconds": 40, "renewTime": "{{now}}"}}))
        made = finish(loadgen(a.loadgen, "closed", cluster.port, cluster.pki.admin, [node_t, lease_t], keys,
                              ["--connections=16"]), "creating Nodes and Leases")
        result["create_s"] = round(time.monotonic() - t0, 1)
        result["create"] = {k: made.get(k) for k in ("status", "rate")}
        if set(made.get("status", {})) - {"201"}:
            raise RuntimeError(f"creating Nodes and Leases: answers {made.get('status')}")
        leader_cert = cluster.pki.node(storm.leader)
        leader = Leader(storm, lambda i: pc.direct(cert=leader_cert, replica=0), threads=1,
                        period=a.dl_period, duration=a.dl_duration)
        leader.take_pool()
        # 2. The storm: the node lifecycle controller sees everyone at once.
        cluster.start_controller_manager(grace="40s")
        watch = ReadyWatch(cluster, storm.pool).start()
        # What kube-apiserver holds: every delegated Lease's renewals, to tell a
        # renewal that came late from a node lifecycle controller that saw it late.
        leases = LeaseWatch(cluster).start() if a.watch_leases else None
        t_storm = time.monotonic()
        dl_t = template(os.path.join(work, "dl.tmpl"), "POST", BASE + "/delegatedleases", json.dumps(
            {"apiVersion": GV, "kind": "DelegatedLease",
             "metadata": {"name": "{{f0}}", "annotations": {DELEGATE: "true"}},
             "spec": {"holderIdentity": "{{f0}}", "leaseDurationSeconds": a.dl_duration, "renewTime": "{{now}}",
                      "poolName": storm.pool, "delegate": storm.leader}}))
        # A DelegatedLease for a node poolcoord's pool membership has not seen yet
        # (its Node watch still catching up with the bulk create) is refused; the
        # leader's agent writes it again, and so does this step (201 or 409 then).
        passes = []
        while True:
            wrote = finish(loadgen(a.loadgen, "closed", pc.ports[0], leader_cert, [dl_t], keys,
                                   ["--connections=8"]), "writing the DelegatedLeases")
            passes.append(wrote.get("status"))
            if not set(wrote.get("status", {})) - {"201", "409"}:
                break
            if time.monotonic() - t_storm > 30:
                raise RuntimeError(f"writing the DelegatedLeases: answers {passes}")
            time.sleep(1)
        result["delegate_s"] = round(time.monotonic() - t_storm, 1)
        result["delegate"] = {"status": passes, "rate": wrote.get("rate")}
        # 3. The leader renews: its own PoolLease and Lease (storm.py's thread, with
        # no DelegatedLease of its own: names=[]), and every DelegatedLease (loadgen).
        leader.start(delegations=False)
        renew_t = template(os.path.join(work, "renew.tmpl"), "PATCH", BASE + "/delegatedleases/{{f0}}",
                           json.dumps({"spec": {"renewTime": "{{now}}"}}))
        total = a.duration + (a.ab_seconds if a.webhook_ab else 0)
        renewer = loadgen(a.loadgen, "open", pc.ports[0], leader_cert, [renew_t], keys,
                          [f"--rate={n / a.dl_period:.1f}", f"--duration={total + 5}", "--warmup=0",
                           "--connections=8"])
        pids = {"kube-apiserver": cluster.apiserver.proc.pid, "kube-controller-manager": cluster.kcm.proc.pid,
                "etcd (kube)": cluster.etcd.proc.pid, "loadgen": renewer.pid}
        for i, p in enumerate(pc.procs):
            pids[f"poolcoord-{i}"] = p.proc.pid
        if etcd:
            pids["etcd (poolcoord)"] = etcd.proc.pid
        cpu = Cpu(pids)
        samples = []

        def scrape():
            s = {"t": round(time.monotonic() - t_storm, 1), "cpu": cpu.sample(), "not_ready": len(watch.not_ready)}
            for i in range(len(pc.procs)):
                try:
                    text = pc.metrics(i)
                except OSError:
                    continue
                for m in ("poolcoord_forwards_total", "poolcoord_forward_errors_total",
                          "poolcoord_forward_conflicts_total", "poolcoord_forwarder_queue_lag_seconds",
                          "poolcoord_forwarder_queue_depth", "poolcoord_delegated_nodes",
                          "poolcoord_events_dropped_total", "poolcoord_forwards_withdrawn_total"):
                    s[f"{m}/{i}"] = metric(text, m)
            text = cluster.admin().request("GET", "/metrics", accept=None).body
            s["apiserver_webhook_s"] = metric(text, "apiserver_admission_webhook_admission_duration_seconds_sum")
            s["apiserver_webhook_n"] = metric(text, "apiserver_admission_webhook_admission_duration_seconds_count")
            # API Priority and Fairness: time requests waited in its queues.
            s["apf_wait_s"] = metric(text, "apiserver_flowcontrol_request_wait_duration_seconds_sum")
            s["apf_wait_n"] = metric(text, "apiserver_flowcontrol_request_wait_duration_seconds_count")
            s["apiserver_429"] = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                                     if line.startswith("apiserver_request_total{") and 'code="429"' in line)
            samples.append(s)
            return s
        # 4. The storm's minutes.
        webhook_deleted_at = None
        profile_at = sorted(float(x) for x in a.profile_at.split(",") if x)
        profiles = []
        while time.monotonic() - t_storm < total:
            s = scrape()
            if profile_at and s["t"] >= profile_at[0]:
                at = profile_at.pop(0)
                path = os.path.join(out_dir, f"kube-apiserver-{a.replicas}r-{n}-at-{at:.0f}s.pb.gz")
                th = threading.Thread(target=take_profile, args=(cluster, a.profile_seconds, path), daemon=True)
                th.start()
                profiles.append((th, path))
            lag = max((v for k, v in s.items() if k.startswith("poolcoord_forwarder_queue_lag_seconds/")), default=0)
            fw = sum(v for k, v in s.items() if k.startswith("poolcoord_forwards_total/"))
            print(f"  N={n} t={s['t']:6.1f}s forwards={fw:9.0f} lag={lag:5.1f}s not-ready={s['not_ready']}",
                  flush=True)
            if a.webhook_ab and webhook_deleted_at is None and s["t"] >= a.duration:
                name = pc.one("ValidatingWebhookConfiguration")["metadata"]["name"]
                cluster.kubectl("delete", "validatingwebhookconfiguration", name, check=True)
                webhook_deleted_at = s["t"]
            time.sleep(5)
        scrape()
        for th, path in profiles:
            th.join(a.profile_seconds + 30)
        result["profiles"] = [path for _, path in profiles if os.path.exists(path)]
        if leases:
            # worst() takes the watch's lock itself (threading.Lock is not reentrant).
            result["lease_gap_max_s"] = round(leases.worst(), 1)
            with leases.lock:
                gaps = sorted(leases.longest.values())
                result["lease_gap_p99_s"] = round(gaps[int(0.99 * (len(gaps) - 1))], 1) if gaps else None
                result["leases_first_forwarded"] = len(leases.first)
                result["all_first_forwarded_s"] = (round(max(leases.first.values()) - t_storm, 1)
                                                   if len(leases.first) == n else None)
            leases.stop()
        result["not_ready"] = len(watch.not_ready)
        result["first_not_ready_s"] = (round(min(t for t, _ in watch.not_ready.values()) - t_storm, 1)
                                       if watch.not_ready else None)
        result["samples"] = samples
        result["webhook_deleted_at_s"] = webhook_deleted_at
        renew_result = finish(renewer, "renewing the DelegatedLeases")
        renewer = None
        result["renewals"] = {k: renew_result.get(k) for k in ("status", "achieved_rate", "p99_us")}

        def window(t_from, t_to):
            """Per forwarded renewal between the two times: CPU ms of each process."""
            s0 = min(samples, key=lambda s: abs(s["t"] - t_from))
            s1 = min(samples, key=lambda s: abs(s["t"] - t_to))
            fw = lambda s: sum(v for k, v in s.items() if k.startswith("poolcoord_forwards_total/"))  # noqa: E731
            forwards = fw(s1) - fw(s0)
            secs = s1["t"] - s0["t"]
            out = {"seconds": round(secs, 1), "forwards": forwards,
                   "forwards_per_s": round(forwards / secs, 1) if secs else None,
                   "webhook_reviews": s1["apiserver_webhook_n"] - s0["apiserver_webhook_n"],
                   "webhook_ms_mean": round(1000 * (s1["apiserver_webhook_s"] - s0["apiserver_webhook_s"]) /
                                            max(1, s1["apiserver_webhook_n"] - s0["apiserver_webhook_n"]), 2),
                   "apf_wait_ms_mean": round(1000 * (s1["apf_wait_s"] - s0["apf_wait_s"]) /
                                             max(1, s1["apf_wait_n"] - s0["apf_wait_n"]), 2),
                   "apiserver_429": s1["apiserver_429"] - s0["apiserver_429"], "cpu_ms_per_forward": {},
                   "cores": {}}
            for name in s1["cpu"]:
                c0, c1 = s0["cpu"].get(name), s1["cpu"].get(name)
                if c0 is None or c1 is None:
                    continue
                out["cores"][name] = round((c1 - c0) / secs, 3) if secs else None
                out["cpu_ms_per_forward"][name] = round(1000 * (c1 - c0) / forwards, 3) if forwards else None
            return out
        result["steady"] = window(a.warmup, a.duration)
        if a.webhook_ab and webhook_deleted_at is not None:
            result["without_webhook"] = window(webhook_deleted_at + 10, total)
        result["passed"] = result["not_ready"] == 0
        return result
    finally:
        if renewer is not None:
            renewer.kill()
        if leader is not None:
            leader.stop()  # before the servers it renews through go
        if watch:
            watch.stop()
        cluster.stop()
        if etcd:
            etcd.stop()
        with open(os.path.join(out_dir, f"storm-{a.replicas}r-{n}.json"), "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "poolcoord-apiserver"))
    ap.add_argument("--loadgen", default=os.path.join(ROOT, "build", "poolcoord-loadgen"))
    ap.add_argument("--nodes", default="2000,5000,10000,20000", help="comma-separated Ns, run in turn")
    ap.add_argument("--replicas", type=int, default=1, help="1 (memory store) or more (etcd3, shards)")
    ap.add_argument("--duration", type=int, default=300, help="seconds of storm judged")
    ap.add_argument("--warmup", type=int, default=60, help="seconds before the steady CPU window")
    ap.add_argument("--dl-period", type=float, default=20.0, help="the leader's renewal period")
    ap.add_argument("--dl-duration", type=int, default=60, help="leaseDurationSeconds of the DelegatedLeases")
    ap.add_argument("--qps", type=float, default=2500, help="forwarder.kubeApiQps")
    ap.add_argument("--workers", type=int, default=64, help="forwarder.concurrentNodeLeaseSyncs")
    ap.add_argument("--webhook-ab", type=int, default=1, help="then --ab-seconds with the webhook removed")
    ap.add_argument("--ab-seconds", type=int, default=90)
    ap.add_argument("--out", default=os.environ.get("BENCH_OUT") or tempfile.mkdtemp(prefix="forwarder-scale-"))
    ap.add_argument("--stop-at-failure", type=int, default=1, help="skip larger Ns after a failed one")
    ap.add_argument("--profile-at", default="",
                    help="comma-separated seconds into the storm at which to take kube-apiserver's CPU "
                         "profile (read them with bench/pprof_top.py)")
    ap.add_argument("--profile-seconds", type=int, default=20)
    ap.add_argument("--watch-leases", type=int, default=1,
                    help="watch the delegated Leases: the longest any went unrenewed (costs this process "
                         "a JSON decode per renewal)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    print(f"results in {a.out}", flush=True)
    rows = []
    for n in [int(x) for x in a.nodes.split(",") if x]:
        try:
            r = run_one(a, n, a.out)
        except Skip as e:
            print(f"SKIP: {e}")
            return 77
        rows.append(r)
        st = r["steady"]
        print(f"N={n} replicas={a.replicas}: {'PASS' if r['passed'] else 'FAIL'} not-ready={r['not_ready']} "
              f"forwards/s={st['forwards_per_s']} cores={st['cores']} ms/forward={st['cpu_ms_per_forward']}",
              flush=True)
        if not r["passed"] and a.stop_at_failure:
            break
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(rows, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
