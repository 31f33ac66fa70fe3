#!/usr/bin/env python3
"""Writes the inputs of bench/run.sh into a directory: memberships, token files,
key lists and poolcoord-loadgen request templates (see bench/loadgen.cc for the
template format). Standard library only.

Usage: fixtures.py OUT_DIR [--renew-pools 100] [--mem-pools 10000] [--nodes 10]
"""
import argparse
import base64
import json
import os

GV = "coordination.pool/v1alpha1"
BASE = "/apis/" + GV
ANNOTATION = "openyurt.io/delegate-heartbeat"
FORWARDER = "system:serviceaccount:kube-system:poolcoord"
ADMIN_TOKEN = "bench-admin-token"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def cluster(out, pools, nodes, lease_seconds):
    """Membership, tokens (one per pool leader, plus an admin), keys and templates."""
    os.makedirs(out, exist_ok=True)
    membership = {"pools": {f"p{p}": [f"p{p}-n{n}" for n in range(nodes)] for p in range(pools)}}
    write(os.path.join(out, "membership.yaml"), json.dumps(membership))
    lines = [f'{ADMIN_TOKEN},bench-admin,uid-bench-admin,"system:masters"']
    pool_rows, key_rows = [], []
    for p in range(pools):
        leader = f"p{p}-n0"
        token = f"tok-{leader}"
        lines.append(f'{token},system:node:{leader},uid-{leader},"system:nodes"')
        pool_rows.append("\t".join([token, f"p{p}", leader] + [f"p{p}-n{n}" for n in range(nodes)]))
        for n in range(nodes):
            key_rows.append(f"{token}\tp{p}-n{n}\tp{p}")
    write(os.path.join(out, "tokens.csv"), "\n".join(lines) + "\n")
    write(os.path.join(out, "pools.tsv"), "\n".join(pool_rows) + "\n")
    write(os.path.join(out, "keys.tsv"), "\n".join(key_rows) + "\n")

    # pools.tsv fields: f0 token, f1 pool, f2 leader, f3.. the nodes.
    hdr = "Authorization: Bearer {{f0}}\nContent-Type: application/json\nAccept: application/json\n"
    pl = {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": "{{f1}}"},
          "spec": {"holderIdentity": "{{f2}}", "leaseDurationSeconds": lease_seconds,
                   "acquireTime": "{{now}}", "renewTime": "{{now}}", "leaseTransitions": 0}}
    write(os.path.join(out, "pl_create.tmpl"), f"POST {BASE}/poolleases\n{hdr}\n{json.dumps(pl)}\n")
    write(os.path.join(out, "pl_renew.tmpl"),
          f"PATCH {BASE}/poolleases/{{{{f1}}}}\n" + hdr.replace("application/json\nAccept",
                                                               "application/merge-patch+json\nAccept")
          + '\n{"spec":{"renewTime":"{{now}}"}}\n')
    for n in range(nodes):
        node = "{{f%d}}" % (3 + n)
        dl = {"apiVersion": GV, "kind": "DelegatedLease",
              "metadata": {"name": node, "annotations": {ANNOTATION: "true"}},
              "spec": {"holderIdentity": node, "leaseDurationSeconds": lease_seconds,
                       "renewTime": "{{now}}", "poolName": "{{f1}}", "delegate": "{{f2}}"}}
        write(os.path.join(out, f"dl_create_{n}.tmpl"),
              f"POST {BASE}/delegatedleases\n{hdr}\n{json.dumps(dl)}\n")
    # keys.tsv fields: f0 token, f1 node, f2 pool.
    write(os.path.join(out, "dl_renew.tmpl"),
          f"PATCH {BASE}/delegatedleases/{{{{f1}}}}\nAuthorization: Bearer {{{{f0}}}}\n"
          "Content-Type: application/merge-patch+json\nAccept: application/json\n\n"
          '{"spec":{"renewTime":"{{now}}"}}\n')


def node_lease(annotated, target_bytes, manager_extra):
    """A coordination.k8s.io/v1 Lease as kube-apiserver hands it to a webhook:
    with its owner reference, managedFields and whatever labels/annotations the
    cluster's tooling added (which is what makes real reviews 4-8 KB)."""
    md = {"name": "{{f1}}", "namespace": "kube-node-lease",
          "uid": "6f1c2a7e-1d4b-4c55-9a7e-2b8f0c3d4e5f", "resourceVersion": "48213377",
          "creationTimestamp": "2025-11-02T08:14:51Z",
          "labels": {"apps.openyurt.io/nodepool": "{{f2}}"},
          "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "{{f1}}",
                               "uid": "0b9d7e55-8f1e-4c8b-a1d2-94e3b7c6f012"}],
          "managedFields": [
              {"manager": "kubelet", "operation": "Update", "apiVersion": "coordination.k8s.io/v1",
               "time": "2025-11-02T08:14:51Z", "fieldsType": "FieldsV1",
               "fieldsV1": {"f:metadata": {"f:ownerReferences": {".": {}, "k:{\"uid\":\"0b9d7e55-8f1e-4c8b-a1d2-94e3b7c6f012\"}": {}}},
                            "f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}, "f:renewTime": {}}}}]}
    if annotated:
        md["annotations"] = {ANNOTATION: "true"}
        md["managedFields"].append(
            {"manager": "poolcoord-forwarder", "operation": "Update", "apiVersion": "coordination.k8s.io/v1",
             "time": "2025-11-03T10:02:17Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, f"f:{ANNOTATION}": {}}},
                          "f:spec": {"f:renewTime": {}}}})
    for i in range(manager_extra):
        md["managedFields"].append(
            {"manager": f"node-problem-detector-{i}", "operation": "Update",
             "apiVersion": "coordination.k8s.io/v1", "time": "2025-11-04T12:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:labels": {f"f:example.com/tier-{i}": {}, f"f:example.com/zone-{i}": {}}}}})
        md["labels"][f"example.com/tier-{i}"] = "edge"
        md["labels"][f"example.com/zone-{i}"] = f"zone-{i}"
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": md,
            "spec": {"holderIdentity": "{{f1}}", "leaseDurationSeconds": 40, "renewTime": "{{now}}"}}


def review(user, groups, annotated, extra):
    obj = node_lease(annotated, 0, extra)
    old = json.loads(json.dumps(obj))
    old["spec"]["renewTime"] = "{{old}}"
    req = {"uid": "{{uid}}",
           "kind": {"group": "coordination.k8s.io", "version": "v1", "kind": "Lease"},
           "resource": {"group": "coordination.k8s.io", "version": "v1", "resource": "leases"},
           "requestKind": {"group": "coordination.k8s.io", "version": "v1", "kind": "Lease"},
           "requestResource": {"group": "coordination.k8s.io", "version": "v1", "resource": "leases"},
           "name": "{{f1}}", "namespace": "kube-node-lease", "operation": "UPDATE",
           "userInfo": {"username": user, "uid": "a1b2c3d4-0000-4000-8000-000000000001",
                        "groups": groups + ["system:authenticated"],
                        "extra": {"authentication.kubernetes.io/credential-id": ["JTI=5c1d7e0a-3f2b-4d6e-9a8b-7c6d5e4f3a2b"]}},
           "object": obj, "oldObject": old, "dryRun": False,
           "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}}
    # Compact, as Go's encoding/json writes it.
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req},
                      separators=(",", ":"))
    return ("POST /validate-delegated-heartbeat?timeout=10s\nContent-Type: application/json\n"
            "Accept: application/json, */*\n\n" + body + "\n"), len(body)


def webhook(out):
    """Three reviews (keys.tsv: f1 node, f2 pool), every one answered allowed:
    the forwarder renewing a node with a live DelegatedLease (the full rule:
    membership, PoolLease term, DelegatedLease), and a kubelet's plain renewal."""
    sizes = {}
    sa_groups = ["system:serviceaccounts", "system:serviceaccounts:kube-system"]
    for name, user, groups, annotated, target in (
            ("webhook_forwarder_6k", FORWARDER, sa_groups, True, 6 * 1024),
            ("webhook_kubelet_4k", "system:node:{{f1}}", ["system:nodes"], False, 4 * 1024),
            ("webhook_forwarder_8k", FORWARDER, sa_groups, True, 8 * 1024 - 400)):
        extra = 0
        text, size = review(user, groups, annotated, extra)
        while size < target:  # grow the managedFields/labels to the size wanted
            extra += 1
            text, size = review(user, groups, annotated, extra)
        write(os.path.join(out, name + ".tmpl"), text)
        sizes[name] = size
    write(os.path.join(out, "webhook_sizes.json"), json.dumps(sizes))


def etcd_bodies(out, value_bytes, keys=1000):
    """v3 gateway put bodies: /registry/delegatedleases/<node> -> a value of the
    size the server's DelegatedLease JSON has."""
    value = base64.b64encode(b"x" * value_bytes).decode()
    rows = []
    for i in range(keys):
        k = base64.b64encode(f"/registry/delegatedleases/node-{i}".encode()).decode()
        rows.append(json.dumps({"key": k, "value": value}, separators=(",", ":")))
    write(os.path.join(out, "etcd_bodies.txt"), "\n".join(rows) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--renew-pools", type=int, default=100)
    ap.add_argument("--mem-pools", type=int, default=10000)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--lease-seconds", type=int, default=300)
    ap.add_argument("--etcd-value-bytes", type=int, default=0,
                    help="only write etcd_bodies.txt, values of this size")
    a = ap.parse_args()
    if a.etcd_value_bytes:
        etcd_bodies(a.out, a.etcd_value_bytes)
        return
    cluster(os.path.join(a.out, "renew"), a.renew_pools, a.nodes, a.lease_seconds)
    webhook(os.path.join(a.out, "renew"))
    cluster(os.path.join(a.out, "mem"), a.mem_pools, a.nodes, a.lease_seconds)


if __name__ == "__main__":
    main()
