"""TLS to etcd (issue 7: "--storage-backend=etcd3 --etcd-servers=<urls>, plus TLS
flags for etcd, as kube-apiserver names them"): the real server against a real
etcd that serves https and requires client certificates
(tests/e2e/etcd_fixture.py, EtcdFixture(tls=True): a throwaway CA, an etcd
serving certificate for IP:127.0.0.1 and a client certificate, made with the
openssl CLI).

- With --etcd-cafile/--etcd-certfile/--etcd-keyfile the PoolLease verbs work
  (create, get, list, update, a stale update refused, delete), every write is in
  etcd under the server's --etcd-prefix (read back through etcd's gateway with
  the client certificate, resourceVersion = the key's mod_revision), and a watch
  sees the writes.
- Misconfigured TLS stops start-up at once (exit 1, or 2 for a flag error) with
  one log line that names etcd, TLS and the flag to fix: no client certificate,
  a CA that did not sign etcd's certificate, a client certificate from another
  CA, --etcd-certfile without --etcd-keyfile, an http:// URL for a TLS etcd, and
  an etcd whose serving certificate lacks clientAuth (etcd 3.4's gateway then
  cannot reach etcd itself; kube-apiserver, on gRPC, would not notice).

Prints one line per case and ends with "N passed, N failed".
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_fixture import EtcdFixture, b64, issue_cert, make_ca, make_tls_files  # noqa: E402
from harness import (BASE, Failed, Server, e2e_args, expect, expect_status, free_port, microtime, run_one,  # noqa: E402
                     pool_lease, uniq)

# A misconfigured start-up must end well within this (the unary call timeout
# is 10 s; a TLS failure is immediate).
FAIL_WITHIN_S = 15


class Env:
    binary = None
    work = None       # temp dir for extra certificates and failed start-ups
    etcd = None       # EtcdFixture(tls=True)
    server = None     # poolcoord-apiserver on it, TLS flags given
    prefix = None
    other_ca = None   # (cert, key) of a CA unrelated to etcd's
    stranger = None   # (cert, key): a client certificate signed by other_ca


def tls_flags(ca=True, cert=True):
    t = Env.etcd.tls
    return ([f"--etcd-cafile={t.ca}"] if ca else []) + \
        ([f"--etcd-certfile={t.client_cert}", f"--etcd-keyfile={t.client_key}"] if cert else [])


def etcd_kv(name):
    """The PoolLease's key-value in etcd, read through the gateway with the
    client certificate: (decoded object, mod_revision), or None."""
    key = f"{Env.prefix}/poolleases/{name}"
    kvs = Env.etcd.call("/v3/kv/range", {"key": b64(key)}).get("kvs") or []
    if not kvs:
        return None
    return json.loads(base64.b64decode(kvs[0]["value"])), kvs[0]["mod_revision"]


def failed_start(args, want_rc=1):
    """Starts the server with the etcd3 store and `args`; it must exit with
    want_rc within FAIL_WITHIN_S. Returns (its output, seconds taken)."""
    work = tempfile.mkdtemp(prefix="start-", dir=Env.work)
    cmd = [Env.binary, f"--secure-port={free_port()}", "--bind-address=127.0.0.1",
           f"--cert-dir={work}/certs", f"--write-kubeconfig={work}/admin.kubeconfig",
           "--storage-backend=etcd3", f"--etcd-prefix={Env.prefix}", *args]
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=FAIL_WITHIN_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise Failed(f"the server neither failed nor stopped within {FAIL_WITHIN_S}s "
                     f"(hang or unexpected start):\n{out[-2000:]}")
    took = time.time() - t0
    expect(proc.returncode == want_rc, f"want exit {want_rc}, got {proc.returncode}:\n{out[-2000:]}")
    expect("listening on" not in out, f"the server started serving:\n{out[-2000:]}")
    return out, took


def error_line(out):
    lines = [l for l in out.splitlines() if "start-up failed" in l or l.startswith("Error:")]
    expect(lines, f"no start-up error line in:\n{out[-2000:]}")
    return lines[-1]


def expect_words(line, *words):
    for w in words:
        expect(w in line, f"want {w!r} in the error line: {line}")


# ---- working TLS ----

def crud_over_tls(s):
    c = s.admin()
    name = uniq("tls")
    created = expect_status(c.request("POST", BASE + "/poolleases", pool_lease(name, "hz-1")), 201).json()
    rv1 = created["metadata"]["resourceVersion"]
    stored = etcd_kv(name)
    expect(stored is not None, f"{Env.prefix}/poolleases/{name} not in etcd after create")
    obj, mod = stored
    expect(obj["metadata"]["name"] == name and obj["spec"]["holderIdentity"] == "hz-1", obj)
    expect(mod == rv1, f"resourceVersion {rv1} is not the key's mod_revision {mod}")

    got = expect_status(c.request("GET", f"{BASE}/poolleases/{name}"), 200).json()
    expect(got["spec"]["holderIdentity"] == "hz-1" and got["metadata"]["resourceVersion"] == rv1, got)
    listed = expect_status(c.request("GET", BASE + "/poolleases"), 200).json()
    expect(name in [i["metadata"]["name"] for i in listed["items"]], "created lease not listed")
    expect(int(listed["metadata"]["resourceVersion"]) >= int(rv1), listed["metadata"])

    # client-go LeaseLock renewal: PUT with the resourceVersion read
    got["spec"]["renewTime"] = microtime()
    got["metadata"].setdefault("labels", {})["tls"] = "renewed"
    updated = expect_status(c.request("PUT", f"{BASE}/poolleases/{name}", got), 200).json()
    rv2 = updated["metadata"]["resourceVersion"]
    expect(int(rv2) > int(rv1), f"resourceVersion did not move: {rv1} -> {rv2}")
    obj, mod = etcd_kv(name)
    expect(obj["metadata"].get("labels", {}).get("tls") == "renewed" and mod == rv2,
           f"update not in etcd (mod_revision {mod}, want {rv2}): {obj['metadata']}")
    # the stale resourceVersion loses: etcd's txn compare, over TLS
    expect_status(c.request("PUT", f"{BASE}/poolleases/{name}", got), 409, "Conflict")

    expect_status(c.request("DELETE", f"{BASE}/poolleases/{name}"), 200)
    expect_status(c.request("GET", f"{BASE}/poolleases/{name}"), 404, "NotFound")
    expect(etcd_kv(name) is None, "key still in etcd after delete")


def watch_over_tls(s):
    c = s.admin()
    rv = expect_status(c.request("GET", BASE + "/poolleases"), 200).json()["metadata"]["resourceVersion"]
    r, events, conn = s.admin().watch(f"{BASE}/poolleases?watch=true&resourceVersion={rv}", timeout=20)
    try:
        expect(r.status == 200, f"watch answered {r.status}")
        name = uniq("tls-watch")
        created = expect_status(c.request("POST", BASE + "/poolleases", pool_lease(name, "hz-2")), 201).json()
        created["metadata"].setdefault("labels", {})["seen"] = "yes"
        expect_status(c.request("PUT", f"{BASE}/poolleases/{name}", created), 200)
        expect_status(c.request("DELETE", f"{BASE}/poolleases/{name}"), 200)
        seen = []
        for ev in events:
            if ev["object"].get("metadata", {}).get("name") == name:
                seen.append(ev["type"])
                if ev["type"] == "DELETED":
                    break
        expect(seen == ["ADDED", "MODIFIED", "DELETED"], f"watch saw {seen}")
    finally:
        conn.close()


def key_under_prefix_only(s):
    # Everything the server wrote is under --etcd-prefix, nothing elsewhere.
    c = s.admin()
    name = uniq("tls-prefix")
    expect_status(c.request("POST", BASE + "/poolleases", pool_lease(name)), 201)
    every = Env.etcd.call("/v3/kv/range", {"key": b64("\0"), "range_end": b64("\0"), "keys_only": True})
    keys = [base64.b64decode(kv["key"]).decode() for kv in every.get("kvs") or []]
    expect(f"{Env.prefix}/poolleases/{name}" in keys, f"key not found among {keys}")
    outside = [k for k in keys if not k.startswith(Env.prefix + "/")]
    expect(not outside, f"keys outside --etcd-prefix={Env.prefix}: {outside}")


# ---- misconfigured TLS: a clear start-up error, at once ----

def no_client_certificate(s):
    out, took = failed_start([f"--etcd-servers={Env.etcd.endpoint}", *tls_flags(cert=False)])
    line = error_line(out)
    expect_words(line, "etcd", Env.etcd.endpoint, "TLS", "--client-cert-auth=true",
                 "no client certificate was given (--etcd-certfile, --etcd-keyfile)")
    print(f"  exit 1 after {took:.1f}s: {line}")


def wrong_ca(s):
    t = Env.etcd.tls
    out, took = failed_start([f"--etcd-servers={Env.etcd.endpoint}", f"--etcd-cafile={Env.other_ca[0]}",
                              f"--etcd-certfile={t.client_cert}", f"--etcd-keyfile={t.client_key}"])
    line = error_line(out)
    expect_words(line, "etcd", Env.etcd.endpoint, "TLS: etcd's serving certificate was not accepted",
                 f"--etcd-cafile={Env.other_ca[0]}", "unable to get local issuer certificate")
    print(f"  exit 1 after {took:.1f}s: {line}")


def client_certificate_from_another_ca(s):
    # etcd ends the connection after (TLS 1.3) or during the handshake; what
    # curl reports varies with timing (send error, receive error with the
    # alert), so three tries.
    for _ in range(3):
        out, took = failed_start([f"--etcd-servers={Env.etcd.endpoint}", f"--etcd-cafile={Env.etcd.tls.ca}",
                                  f"--etcd-certfile={Env.stranger[0]}", f"--etcd-keyfile={Env.stranger[1]}"])
        line = error_line(out)
        expect_words(line, "etcd", "TLS", "--client-cert-auth=true",
                     f"check that --etcd-certfile={Env.stranger[0]} is signed by etcd's --trusted-ca-file")
    print(f"  exit 1 after {took:.1f}s: {line}")


def certfile_without_keyfile(s):
    out, _ = failed_start([f"--etcd-servers={Env.etcd.endpoint}", f"--etcd-cafile={Env.etcd.tls.ca}",
                           f"--etcd-certfile={Env.etcd.tls.client_cert}"], want_rc=2)
    line = error_line(out)
    expect_words(line, "--etcd-certfile and --etcd-keyfile must be given together")
    print(f"  exit 2: {line}")


def http_url_for_tls_etcd(s):
    url = Env.etcd.endpoint.replace("https://", "http://")
    out, took = failed_start([f"--etcd-servers={url}", *tls_flags()])
    line = error_line(out)
    expect_words(line, "etcd", url, "use an https:// URL")
    print(f"  exit 1 after {took:.1f}s: {line}")


def etcd_serving_cert_without_client_auth(s):
    d = tempfile.mkdtemp(prefix="noclientauth-", dir=Env.work)
    with EtcdFixture(tls=make_tls_files(d, server_client_auth=False), wait_for_gateway=False) as broken:
        t = broken.tls
        out, took = failed_start([f"--etcd-servers={broken.endpoint}", f"--etcd-cafile={t.ca}",
                                  f"--etcd-certfile={t.client_cert}", f"--etcd-keyfile={t.client_key}"])
    line = error_line(out)
    expect_words(line, "etcd", broken.endpoint, "gateway", "TLS", "extendedKeyUsage clientAuth")
    print(f"  exit 1 after {took:.1f}s: {line}")


CASES = [crud_over_tls, watch_over_tls, key_under_prefix_only, no_client_certificate, wrong_ca,
         client_certificate_from_another_ca, certfile_without_keyfile, http_url_for_tls_etcd,
         etcd_serving_cert_without_client_auth]


def main():
    args = e2e_args()
    Env.binary = args.binary
    passed = failed = 0
    t_start = time.time()
    Env.work = tempfile.mkdtemp(prefix="poolcoord-etcdtls-")
    try:
        Env.other_ca = make_ca(Env.work, "unrelated-ca")
        Env.stranger = issue_cert(Env.work, "stranger", Env.other_ca, ["clientAuth"])
        Env.etcd = EtcdFixture(tls=True)
        Env.prefix = f"/tls-e2e/{uuid.uuid4().hex[:8]}"
        Env.server = Server(Env.binary, extra_args=["--storage-backend=etcd3",
                                                    f"--etcd-servers={Env.etcd.endpoint}",
                                                    f"--etcd-prefix={Env.prefix}", *tls_flags()])
    except Exception as e:  # no TLS set-up, no cases
        print(f"FAIL setup: {type(e).__name__}: {e}", flush=True)
        traceback.print_exc(limit=3)
        if Env.etcd:
            print("etcd log tail:\n" + Env.etcd.log_tail())
            Env.etcd.stop()
        shutil.rmtree(Env.work, ignore_errors=True)
        print(f"0 passed, {len(CASES)} failed")
        return 1
    try:
        for case in CASES:
            if run_one(case, Env.server):
                passed += 1
            else:
                failed += 1
            if Env.server.proc.poll() is not None:
                print(f"server exited ({Env.server.proc.returncode}) after {case.__name__}:\n"
                      f"{Env.server.read_log()}")
                failed += 1
                Env.server.start()
    finally:
        Env.server.stop()
        if failed or args.keep:
            print("server log tail:\n" + Env.server.read_log())
            print("etcd log tail:\n" + Env.etcd.log_tail())
        Env.server.cleanup()
        Env.etcd.stop()
        shutil.rmtree(Env.work, ignore_errors=True)
    print(f"total {time.time() - t_start:.1f}s")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
