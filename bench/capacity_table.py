#!/usr/bin/env python3
"""Cores needed at 10k, 100k and 1M nodes (BENCHMARKS.md, "Capacity on paper"),
from the CPU per operation that bench/capacity.py (poolcoord and its etcd, three
members, three replicas) and bench/capacity_kube.py (kube-apiserver and its
etcd) measured:

    bench/capacity_table.py capacity.json capacity_kube.json [--pool-size 20]
        [--heartbeat 10] [--retry 2] [--forward-us N]

Per second, for N nodes of which a fraction f is cut off from the cloud (C = (1-f)N
connected, K = fN cut off, N/p pools):
- PoolLease GETs, the followers' polls: C (1 - 1/p) / (1.6 retry), client-go's
  JitterUntil(retryPeriod, 1.2) waits [retry, 2.2 retry) between them;
- PoolLease renewals: N/p / retry (a leader renews every retryPeriod, client-go's
  fast path: one PUT);
- DelegatedLease renewals: K / heartbeat, each through kube-apiserver's aggregator;
- forwarded renewals: K / heartbeat (the cloud Lease every kubelet renew interval),
  each a GET and a PUT on kube-apiserver and an admission review on poolcoord;
- the agents' probes of their own cloud Lease: C / heartbeat GETs on kube-apiserver;
- and, there without poolcoord too: the kubelets' renewals, C / 10 s PUTs.
Every request to poolcoord comes through the aggregator (kube-apiserver proxies
it). The forwarder's own CPU per forwarded renewal is `--forward-us` (the
forwarder's figure); without it that column says so.
"""
import argparse
import json
import sys


def per_op(rows, phase, key):
    for r in rows:
        if r["phase"] == phase:
            return r[key]
    raise KeyError(phase)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("capacity")
    ap.add_argument("kube")
    ap.add_argument("--pool-size", type=int, default=20)
    ap.add_argument("--heartbeat", type=float, default=10)
    ap.add_argument("--retry", type=float, default=2)
    ap.add_argument("--forward-us", type=float)
    a = ap.parse_args()
    cap = json.load(open(a.capacity))
    kube = json.load(open(a.kube))
    pc = {ph: per_op(cap, ph, "poolcoord_us") for ph in ("renew", "pl_get", "pl_renew", "webhook")}
    et = {ph: per_op(cap, ph, "etcd_us") for ph in ("renew", "pl_get", "pl_renew", "webhook")}
    leader_share = {}
    for ph in ("renew", "pl_get", "pl_renew", "webhook"):
        row = next(r for r in cap if r["phase"] == ph)
        leader_share[ph] = row["us_per_request"][row["etcd_leader"]]
    ka = {ph: per_op(kube, ph, "us_per_op")["kube-apiserver"] for ph in
          ("lease_get", "lease_renew", "pl_get_aggregated", "lease_forward")}
    ke = {ph: per_op(kube, ph, "us_per_op")["etcd (kube-apiserver's)"] for ph in
          ("lease_get", "lease_renew", "lease_forward")}

    print("| nodes | cut off | PoolLease GETs/s | PoolLease renewals/s | DelegatedLease renewals/s | "
          "poolcoord (3 replicas) | poolcoord's etcd (3 members; leader) | kube-apiserver, poolcoord's "
          "share (+ kubelets') | kube-apiserver's etcd, poolcoord's share (+ kubelets') | forwarder | "
          "writes/s to poolcoord's etcd |")
    print("|" + "---|" * 11)
    p, h, r = a.pool_size, a.heartbeat, a.retry
    for n in (10_000, 100_000, 1_000_000):
        for f in (0.01, 0.10):
            c, k = (1 - f) * n, f * n
            gets = c * (1 - 1 / p) / (1.6 * r)
            renews = n / p / r
            dls = k / h
            fwd = k / h
            probes = c / h
            kubelets = c / 10
            cores_pc = (gets * pc["pl_get"] + renews * pc["pl_renew"] + dls * pc["renew"]
                        + fwd * pc["webhook"]) / 1e6
            cores_et = (gets * et["pl_get"] + renews * et["pl_renew"] + dls * et["renew"]
                        + fwd * et["webhook"]) / 1e6
            cores_lead = (gets * leader_share["pl_get"] + renews * leader_share["pl_renew"]
                          + dls * leader_share["renew"] + fwd * leader_share["webhook"]) / 1e6
            cores_ka = ((gets + renews + dls) * ka["pl_get_aggregated"] + fwd * ka["lease_forward"]
                        + probes * ka["lease_get"]) / 1e6
            cores_ka_kubelet = kubelets * ka["lease_renew"] / 1e6
            cores_ke = (fwd * ke["lease_forward"] + probes * ke["lease_get"]) / 1e6
            cores_ke_kubelet = kubelets * ke["lease_renew"] / 1e6
            fwd_cell = f"{fwd * a.forward_us / 1e6:.2f}" if a.forward_us else f"{fwd:,.0f}/s × its CPU each"
            print(f"| {n:,} | {f:.0%} | {gets:,.0f} | {renews:,.0f} | {dls:,.0f} | {cores_pc:,.1f} | "
                  f"{cores_et:,.1f}; {cores_lead:,.1f} | {cores_ka:,.1f} (+{cores_ka_kubelet:,.1f}) | "
                  f"{cores_ke:,.1f} (+{cores_ke_kubelet:,.1f}) | {fwd_cell} | {renews + dls:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
