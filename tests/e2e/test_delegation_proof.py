"""Verifiable delegation over HTTP (issue 15): what a pool leader's client sees.

The cluster CA and the nodes' client certificates are made with the `openssl`
CLI (ECDSA P-256 node keys, as a kubelet's), and each member's heartbeat datagram
(election/heartbeat.h's wire format) is built here and signed with
`openssl dgst -sha256 -sign`, as the agent signs it with the node's key: nothing
in this test shares code with the server's check.

- --delegation-proof=required: the challenge in the leader's PoolLease answer;
  a write without a proof, with a foreign CA's certificate, a "reachable"
  heartbeat, a replayed sequence: 403 with the rule in the one cause on
  spec.proof and nothing written; a proof that is not base64: 422; an honest
  proof: 201/200 with status.proof and never spec.proof in any answer; the
  metric by result; every signature of a create, merge patch and PUT checked
  before the store's atomic step, none inside it; kubectl apply -f of a
  proven write.
- --delegation-proof=optional: a write without a proof passes and is counted;
  one with a bad proof is still refused.
- Two replicas on one etcd: a proof accepted through one replica is a replay on
  the other, and a challenge issued through one is honoured by the other.
Prints one line per case and ends with "N passed, N failed".
"""
import base64
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (BASE, GV, Server, e2e_args, expect, expect_status, kubectl_binary, microtime,  # noqa: E402
                     pool_lease, run_one)

ANNOTATION = "openyurt.io/delegate-heartbeat"


def openssl(*args, stdin=None):
    p = subprocess.run(["openssl", *args], input=stdin, capture_output=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {p.stderr.decode()[-500:]}")
    return p.stdout


class Pki:
    """A CA and node certificates in `d`."""

    def __init__(self, d, name):
        self.d = os.path.join(d, name)
        os.makedirs(self.d)
        self.ca_key, self.ca = os.path.join(self.d, "ca.key"), os.path.join(self.d, "ca.crt")
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", self.ca_key,
                "-out", self.ca, "-subj", f"/CN={name}", "-days", "2",
                "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        self.nodes = {}

    def node(self, node):
        """(certificate DER, key path) of system:node:<node>."""
        if node not in self.nodes:
            key, csr, crt = (os.path.join(self.d, f"{node}.{x}") for x in ("key", "csr", "crt"))
            ext = os.path.join(self.d, f"{node}.ext")
            with open(ext, "w") as f:
                f.write("keyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n"
                        "basicConstraints=CA:FALSE\n")
            openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", csr, "-subj", f"/O=system:nodes/CN=system:node:{node}")
            openssl("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", self.ca_key,
                    "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", ext)
            der = openssl("x509", "-in", crt, "-outform", "DER")
            self.nodes[node] = (der, key)
        return self.nodes[node]


def heartbeat(pki, node, pool, challenge, sequence, reachable=False, boot=b"\x42" * 16,
              signer=None):
    """spec.proof for `node`: its heartbeat datagram, signed, and its certificate."""
    der, key = pki.node(node)
    node_b, pool_b, ch_b = node.encode(), pool.encode(), challenge.encode()
    body = b"PCHB\x01\x01" + struct.pack(">BBBBQq", 0x01 if reachable else 0, len(node_b),
                                          len(pool_b), len(ch_b), sequence,
                                          int(time.time() * 1e6))
    body += boot + hashlib.sha256(der).digest() + node_b + pool_b + ch_b
    sig = openssl("dgst", "-sha256", "-sign", (signer or pki.node(node))[1], stdin=body)
    datagram = body + struct.pack(">H", len(sig)) + sig
    return {"heartbeat": base64.b64encode(datagram).decode(),
            "certificate": base64.b64encode(der).decode()}


def delegated(node, pool, leader, proof=None, duration=7):
    spec = {"holderIdentity": node, "leaseDurationSeconds": duration, "renewTime": microtime(),
            "poolName": pool, "delegate": leader}
    if proof:
        spec["proof"] = proof
    return {"apiVersion": GV, "kind": "DelegatedLease",
            "metadata": {"name": node, "annotations": {ANNOTATION: "true"}}, "spec": spec}


def take(server, pool="hangzhou", leader="hz-1"):
    """The leader takes (or renews) the pool's lease; its current challenge."""
    c = server.token(f"{leader}-token")
    r = c.request("GET", f"{BASE}/poolleases/{pool}")
    if r.status == 404:
        r = expect_status(c.request("POST", f"{BASE}/poolleases", pool_lease(pool, leader, 15)), 201)
    else:
        o = r.json()
        o["spec"]["renewTime"] = microtime()
        r = expect_status(c.request("PUT", f"{BASE}/poolleases/{pool}", o), 200)
    got = r.json()
    challenges = got.get("status", {}).get("challenges", [])
    expect(challenges and challenges[0]["value"] and challenges[0]["issueTime"],
           f"no challenge in the leader's answer: {got.get('status')}")
    return challenges[0]["value"]


def refused(r, code, rule):
    """A refusal by the proof check: its code, the rule in the one cause."""
    body = expect_status(r, code).json()
    causes = body.get("details", {}).get("causes", [])
    if code == 403:
        expect(len(causes) == 1 and causes[0].get("field") == "spec.proof"
               and causes[0].get("message", "").startswith(rule + ": "),
               f"want one cause on spec.proof starting {rule!r}: {body}")
        expect(f"({rule})" in body.get("message", ""), body.get("message"))
    else:
        expect(any(c.get("field", "").startswith(rule) for c in causes), f"want a cause {rule}: {body}")
    return body


def metric(server, name, labels=""):
    text = expect_status(server.token("admin-token").request("GET", "/metrics", accept=None), 200).body
    want = f"{name}{{{labels}}}" if labels else name
    for line in text.splitlines():
        if line.startswith(want + " "):
            return float(line.split()[-1])
    return 0.0


class Env:
    pki = None
    foreign = None


# --------------------------------------------------------------- required --

def required_refusals_write_nothing(s):
    challenge = take(s)
    leader = s.token("hz-1-token")
    refused(leader.request("POST", f"{BASE}/delegatedleases", delegated("hz-2", "hangzhou", "hz-1")),
            403, "missing")
    refused(leader.request("POST", f"{BASE}/delegatedleases",
                           delegated("hz-2", "hangzhou", "hz-1",
                                     heartbeat(Env.foreign, "hz-2", "hangzhou", challenge, 1))),
            403, "unknown_authority")
    refused(leader.request("POST", f"{BASE}/delegatedleases",
                           delegated("hz-2", "hangzhou", "hz-1",
                                     heartbeat(Env.pki, "hz-2", "hangzhou", challenge, 1,
                                               reachable=True))),
            403, "reachable")
    # hz-3's key signing a heartbeat that carries hz-2's certificate.
    refused(leader.request("POST", f"{BASE}/delegatedleases",
                           delegated("hz-2", "hangzhou", "hz-1",
                                     heartbeat(Env.pki, "hz-2", "hangzhou", challenge, 1,
                                               signer=Env.pki.node("hz-3")))),
            403, "bad_signature")
    refused(leader.request("POST", f"{BASE}/delegatedleases",
                           delegated("hz-2", "hangzhou", "hz-1",
                                     heartbeat(Env.pki, "hz-2", "hangzhou", "bm9wZQ==", 1))),
            403, "unknown_challenge")
    bad = delegated("hz-2", "hangzhou", "hz-1", {"heartbeat": "!!not base64!!", "certificate": "x"})
    refused(leader.request("POST", f"{BASE}/delegatedleases", bad), 422, "spec.proof")
    expect_status(s.token("admin-token").request("GET", f"{BASE}/delegatedleases/hz-2"), 404)


def honest_proof_recorded_never_returned(s):
    challenge = take(s)
    leader = s.token("hz-1-token")
    before = metric(s, "poolcoord_delegation_proofs_total", 'result="accepted"')
    checks = "poolcoord_delegation_signature_checks_total"
    in_step_before = metric(s, checks, 'phase="in_step"')
    before_step_before = metric(s, checks, 'phase="before_step"')
    r = expect_status(leader.request("POST", f"{BASE}/delegatedleases",
                                     delegated("hz-3", "hangzhou", "hz-1",
                                               heartbeat(Env.pki, "hz-3", "hangzhou", challenge, 7))),
                      201).json()
    expect("proof" not in r["spec"], f"spec.proof returned: {r['spec']}")
    proof = r.get("status", {}).get("proof", {})
    expect(proof == {"bootID": "42" * 16, "sequence": 7, "challenge": challenge}, f"status.proof {proof}")
    got = expect_status(s.token("admin-token").request("GET", f"{BASE}/delegatedleases/hz-3"), 200).json()
    expect("proof" not in got["spec"] and got["status"]["proof"]["sequence"] == 7, got)
    # The same heartbeat again is a replay; the next one renews (merge patch).
    again = heartbeat(Env.pki, "hz-3", "hangzhou", challenge, 7)
    refused(leader.request("PATCH", f"{BASE}/delegatedleases/hz-3",
                           {"spec": {"renewTime": microtime(), "proof": again}},
                           ctype="application/merge-patch+json"), 403, "replay")
    nxt = heartbeat(Env.pki, "hz-3", "hangzhou", challenge, 8)
    r = expect_status(leader.request("PATCH", f"{BASE}/delegatedleases/hz-3",
                                     {"spec": {"renewTime": microtime(), "proof": nxt}},
                                     ctype="application/merge-patch+json"), 200).json()
    expect(r["status"]["proof"]["sequence"] == 8 and "proof" not in r["spec"], r)
    # A renewal without a proof: refused, and the stored one is unchanged.
    refused(leader.request("PATCH", f"{BASE}/delegatedleases/hz-3",
                           {"spec": {"renewTime": microtime()}},
                           ctype="application/merge-patch+json"), 403, "missing")
    got = expect_status(s.token("admin-token").request("GET", f"{BASE}/delegatedleases/hz-3"), 200).json()
    expect(got["status"]["proof"]["sequence"] == 8, got["status"])
    after = metric(s, "poolcoord_delegation_proofs_total", 'result="accepted"')
    expect(after - before == 2, f"accepted went {before} -> {after}")  # 7 and 8
    expect(metric(s, "poolcoord_delegation_proofs_total", 'result="replay"') >= 1, "replay not counted")
    # A client's status.proof is ignored on the main resource: the server's stands.
    got["status"]["proof"]["sequence"] = 1
    got["spec"]["renewTime"] = microtime()
    got["spec"]["proof"] = heartbeat(Env.pki, "hz-3", "hangzhou", challenge, 9)
    r = expect_status(leader.request("PUT", f"{BASE}/delegatedleases/hz-3", got), 200).json()
    expect(r["status"]["proof"]["sequence"] == 9, r["status"])
    # Create, merge patch and PUT had their signatures checked before the
    # store's atomic step (off its lock), none inside it: 7, its replay (signed
    # again: ECDSA signatures differ), 8 and 9; the proof-less PATCH has none.
    in_step = metric(s, checks, 'phase="in_step"') - in_step_before
    before_step = metric(s, checks, 'phase="before_step"') - before_step_before
    expect(in_step == 0, f"{in_step} signatures checked inside the store's step")
    expect(before_step == 4, f"{before_step} signatures checked before the step, want 4")


def kubectl_apply_with_proof(s):
    challenge = take(s)
    body = delegated("hz-4", "hangzhou", "hz-1", heartbeat(Env.pki, "hz-4", "hangzhou", challenge, 1))
    # kubectl as the leader: the admin kubeconfig with hz-1's token as its user.
    cfg = json.loads(s.kubectl("config", "view", "--raw", "-o", "json").stdout)
    cfg["users"] = [{"name": "hz-1", "user": {"token": "hz-1-token"}}]
    for ctx in cfg["contexts"]:
        ctx["context"]["user"] = "hz-1"
    kc = os.path.join(s.workdir, "hz-1.kubeconfig")
    with open(kc, "w") as f:
        json.dump(cfg, f)
    p = subprocess.run([kubectl_binary(), "--kubeconfig", kc, "create", "-f", "-", "-o", "json"],
                       input=json.dumps(body), capture_output=True, text=True, timeout=60)
    expect(p.returncode == 0, f"kubectl create: {p.stderr}")
    out = json.loads(p.stdout)
    expect(out["status"]["proof"]["sequence"] == 1 and "proof" not in out["spec"], out)


# --------------------------------------------------------------- optional --

def optional_counts_unproven(s):
    challenge = take(s)
    leader = s.token("hz-1-token")
    before = metric(s, "poolcoord_delegation_unproven_writes_total")
    created = expect_status(leader.request("POST", f"{BASE}/delegatedleases",
                                           delegated("hz-2", "hangzhou", "hz-1")), 201).json()
    expect(metric(s, "poolcoord_delegation_unproven_writes_total") == before + 1,
           "unproven write not counted")
    update = delegated("hz-2", "hangzhou", "hz-1",
                       heartbeat(Env.pki, "hz-2", "hangzhou", challenge, 1, reachable=True))
    update["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    refused(leader.request("PUT", f"{BASE}/delegatedleases/hz-2", update), 403, "reachable")


# --------------------------------------------------------------- replicas --

def replicas_verify_alike(a, b):
    challenge = take(a)  # issued through A
    proof = heartbeat(Env.pki, "hz-2", "hangzhou", challenge, 1)
    r = expect_status(b.token("hz-1-token").request(
        "POST", f"{BASE}/delegatedleases", delegated("hz-2", "hangzhou", "hz-1", proof)), 201).json()
    expect(r["status"]["proof"]["sequence"] == 1, r)
    refused(a.token("hz-1-token").request(
        "PATCH", f"{BASE}/delegatedleases/hz-2", {"spec": {"renewTime": microtime(), "proof": proof}},
        ctype="application/merge-patch+json"), 403, "replay")
    nxt = heartbeat(Env.pki, "hz-2", "hangzhou", challenge, 2)
    expect_status(a.token("hz-1-token").request(
        "PATCH", f"{BASE}/delegatedleases/hz-2", {"spec": {"renewTime": microtime(), "proof": nxt}},
        ctype="application/merge-patch+json"), 200)
    # Both replicas see the same challenges.
    ca = expect_status(a.token("admin-token").request("GET", f"{BASE}/poolleases/hangzhou"), 200).json()
    cb = expect_status(b.token("admin-token").request("GET", f"{BASE}/poolleases/hangzhou"), 200).json()
    expect(ca["status"]["challenges"] == cb["status"]["challenges"], (ca["status"], cb["status"]))


def main():
    args = e2e_args()
    binary = args.binary
    if shutil.which("openssl") is None:
        print("FAIL: openssl CLI not found (scripts/install-deps.sh --test)")
        return 1
    tmp = tempfile.mkdtemp(prefix="poolcoord-proof-")
    Env.pki, Env.foreign = Pki(tmp, "cluster-ca"), Pki(tmp, "foreign-ca")
    passed = failed = 0

    def run(case, *servers):
        nonlocal passed, failed
        if run_one(case, *servers):
            passed += 1
        else:
            failed += 1

    # The nodes' CA is the server's client CA (as a cluster's is); it replaces the
    # CA the server generates, so the admin uses its token, not its certificate.
    flags = [f"--client-ca-file={Env.pki.ca}"]
    servers = []
    etcd = None
    try:
        s = Server(binary, extra_args=flags + ["--delegation-proof=required"])
        servers.append(s)
        for case in (required_refusals_write_nothing, honest_proof_recorded_never_returned,
                     kubectl_apply_with_proof):
            run(case, s)
        s = Server(binary, extra_args=flags + ["--delegation-proof=optional"])
        servers.append(s)
        run(optional_counts_unproven, s)
        if shutil.which(os.environ.get("POOLCOORD_ETCD", "etcd")) or os.path.exists("/usr/bin/etcd"):
            from etcd_fixture import EtcdFixture
            etcd = EtcdFixture()
            store = ["--storage-backend=etcd3", f"--etcd-servers={etcd.endpoint}",
                     f"--etcd-prefix=/proof/{uuid.uuid4().hex[:8]}"]
            a = Server(binary, extra_args=flags + store + ["--delegation-proof=required"])
            servers.append(a)
            b = Server(binary, extra_args=flags + store + ["--delegation-proof=required"])
            servers.append(b)
            run(replicas_verify_alike, a, b)
        else:
            failed += 1
            print("FAIL replicas_verify_alike: no etcd binary (scripts/install-deps.sh --test)")
    finally:
        for s in servers:
            s.stop()
            if failed or args.keep:
                print(f"server log tail:\n{s.read_log()}")
            s.cleanup()
        if etcd:
            etcd.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
