"""Raw HTTPS against the real server: Status errors for bad input, optimistic
concurrency, list and watch semantics, authentication and authorization, and a
clean exit on SIGTERM. Runs with a small watch history so 410 Expired is
reachable."""
import base64
import json
import os
import signal
import socket
import ssl
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (BASE, GV, Server, expect, expect_status, pool_lease, run_cases,  # noqa: E402
                     uniq)

HISTORY = 50


def malformed_json_400(s):
    c = s.admin()
    r = expect_status(c.request("POST", BASE + "/poolleases", "{not json"), 400, "BadRequest")
    expect("JSON" in r.json()["message"], r.body)
    expect_status(c.request("POST", BASE + "/poolleases", "[1,2]"), 400, "BadRequest")
    expect_status(c.request("POST", BASE + "/poolleases", '"a string"'), 400, "BadRequest")
    # wrong JSON types are 422 as the schema reports them (test_strict_input), not a crash
    body = pool_lease(uniq("t"))
    body["spec"]["leaseDurationSeconds"] = "ten"
    expect_status(c.request("POST", BASE + "/poolleases", body), 422, "Invalid")
    body["spec"]["leaseDurationSeconds"] = 2 ** 40
    expect_status(c.request("POST", BASE + "/poolleases", body), 422, "Invalid")
    body = pool_lease(uniq("t"))
    body["kind"] = "DelegatedLease"
    expect_status(c.request("POST", BASE + "/poolleases", body), 422, "Invalid")
    # the input that crashed the server (recursive parser, stack overflow): deep nesting
    expect_status(c.request("POST", BASE + "/poolleases", "[" * 200000), 400, "BadRequest")
    r = s.anonymous().request("POST", "/validate-delegated-heartbeat", '{"request":' * 100000)
    expect_status(r, 400, "BadRequest")
    expect_status(s.anonymous().request("GET", "/readyz", accept=None), 200)


def invalid_fields_422_with_causes(s):
    c = s.admin()
    body = pool_lease("UPPER_case")
    body["metadata"]["labels"] = {"bad key!": "x"}
    r = expect_status(c.request("POST", BASE + "/poolleases", body), 422, "Invalid")
    fields = {x.get("field") for x in r.json()["details"]["causes"]}
    expect({"metadata.name", "metadata.labels"} <= fields, f"one cause per field: {fields}")
    body = pool_lease(uniq("t"), "hz-1")
    body["spec"]["renewTime"] = "2024-01-01T00:00:00Z"  # MicroTime needs 6 digits
    r = expect_status(c.request("POST", BASE + "/poolleases", body), 422, "Invalid")
    expect(r.json()["details"]["causes"][0]["field"] == "spec.renewTime", r.body)
    body = pool_lease(uniq("t"), duration=301)
    expect_status(c.request("POST", BASE + "/poolleases", body), 422, "Invalid")
    body = pool_lease(uniq("t"))
    body["metadata"]["annotations"] = {"a": "x" * (256 * 1024)}
    expect_status(c.request("POST", BASE + "/poolleases", body), 422, "Invalid")


def body_limits(s):
    c = s.admin()
    body = pool_lease(uniq("big"))
    body["metadata"]["annotations"] = {"note": "y" * (250 * 1024)}
    expect_status(c.request("POST", BASE + "/poolleases", body), 201)
    huge = "x" * (3 * 1024 * 1024 + 10)
    r = c.request("POST", BASE + "/poolleases", huge)
    expect_status(r, 413, "RequestEntityTooLarge")
    expect_status(s.anonymous().request("GET", "/readyz", accept=None), 200)


def raw_exchange(s, data, tls=True, timeout=10):
    """Sends bytes on a fresh connection and returns everything read until the server closes."""
    sock = socket.create_connection(("127.0.0.1", s.port), timeout=timeout)
    try:
        if tls:
            sock = ssl.create_default_context(cafile=s.ca).wrap_socket(sock, server_hostname="127.0.0.1")
        sock.sendall(data)
        out = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return out
            out += chunk
    finally:
        sock.close()


def transport_bad_input(s):
    # one 70 KiB header line once made Beast throw and the connection close unanswered
    big = b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (70 * 1024) + b"\r\n\r\n"
    many = (b"GET /readyz HTTP/1.1\r\nHost: x\r\n" +
            b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 1000) for i in range(1100)) + b"\r\n")
    for data in (big, many):
        out = raw_exchange(s, data)
        expect(out.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), out[:200])
        expect(out.endswith(b"\r\n\r\n431 Request Header Fields Too Large"), out[-200:])
    # plain HTTP on the TLS port: Go's net/http answer, then close
    out = raw_exchange(s, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n", tls=False)
    expect(out == b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n", out[:200])
    # a bad escape in the path is 400, before authentication, not 404
    out = raw_exchange(s, b"GET /apis/%zz HTTP/1.1\r\nHost: x\r\n\r\n")
    head, _, body = out.partition(b"\r\n\r\n")
    expect(head.startswith(b"HTTP/1.1 400 "), out[:300])
    st = json.loads(body)
    expect(st["reason"] == "BadRequest" and 'invalid URL escape "%zz"' in st["message"], body)
    expect_status(s.admin().request("GET", "/apis/%zz"), 400, "BadRequest")
    expect_status(s.anonymous().request("GET", "/readyz", accept=None), 200)


def delete_options_and_field_manager_bad_input(s):
    c = s.admin()
    name = uniq("del")
    expect_status(c.request("POST", BASE + "/poolleases", pool_lease(name)), 201)
    url = f"{BASE}/poolleases/{name}"
    for body, q, ctype, code, reason in [
            ({"gracePeriodSeconds": "x"}, "", "application/json", 400, "BadRequest"),
            ({"kind": "Pod", "apiVersion": "v1"}, "", "application/json", 400, "BadRequest"),
            ({"propagationPolicy": "Sideways"}, "", "application/json", 422, "Invalid"),
            (None, "?gracePeriodSeconds=abc", "application/json", 400, "BadRequest"),
            (None, "?propagationPolicy=Sideways", "application/json", 422, "Invalid"),
            ("junk", "", "text/plain", 415, "UnsupportedMediaType")]:
        expect_status(c.request("DELETE", url + q, body, ctype=ctype), code, reason)
        expect_status(c.request("GET", url), 200)
    for method, path, body, ctype in [
            ("POST", BASE + "/poolleases", pool_lease(uniq("fm")), "application/json"),
            ("PATCH", url, {"metadata": {"labels": {"a": "b"}}}, "application/merge-patch+json")]:
        r = expect_status(c.request(method, path + "?fieldManager=" + "m" * 129, body, ctype=ctype), 422, "Invalid")
        expect("fieldManager: Too long: may not be more than 128 bytes" in r.json()["message"], r.body)
    expect_status(c.request("DELETE", url, {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1",
                                            "propagationPolicy": "Background", "unknownField": 1}), 200)
    expect_status(c.request("GET", url), 404, "NotFound")


def media_types(s):
    c = s.admin()
    name = uniq("mt")
    expect_status(c.request("POST", BASE + "/poolleases", pool_lease(name)), 201)
    expect_status(c.request("POST", BASE + "/poolleases", "a: b", ctype="text/plain"), 415,
                  "UnsupportedMediaType")
    # YAML is read (test_strict_input yaml_in_and_out): this one names no kind.
    r = expect_status(c.request("POST", BASE + "/poolleases", "a: b", ctype="application/yaml"), 400, "BadRequest")
    expect("Object 'Kind' is missing in 'a: b' (613a2062)" in r.json()["message"], r.body)
    expect_status(c.request("PATCH", f"{BASE}/poolleases/{name}", {"spec": {}},
                            ctype="application/strategic-merge-patch+json"), 415, "UnsupportedMediaType")
    expect_status(c.request("GET", f"{BASE}/poolleases/{name}",
                            accept="application/vnd.kubernetes.protobuf"), 406, "NotAcceptable")
    r = expect_status(c.request("GET", f"{BASE}/poolleases/{name}",
                                accept="application/vnd.kubernetes.protobuf,application/json"), 200)
    expect(r.json()["metadata"]["name"] == name, "json fallback")
    r = expect_status(c.request("GET", f"{BASE}/poolleases?limit=1",
                                accept="application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"), 200)
    expect(r.json()["kind"] == "PartialObjectMetadataList", r.body[:200])


def paths_and_methods(s):
    c = s.admin()
    expect_status(c.request("GET", BASE + "/nothings"), 404, "NotFound")
    expect_status(c.request("GET", BASE + "/namespaces/default/poolleases"), 404, "NotFound")
    expect_status(c.request("GET", "/no/such/path"), 404, "NotFound")
    expect_status(c.request("PUT", BASE + "/poolleases", pool_lease("x")), 405, "MethodNotAllowed")
    expect_status(c.request("POST", BASE + "/poolleases/x", pool_lease("x")), 405, "MethodNotAllowed")
    # An unknown subresource, of an object that exists or not, for every verb: as
    # kube-apiserver 1.32 answers for leases/<name>/bogus (it said "x" not found).
    expect_status(c.request("POST", BASE + "/poolleases", pool_lease("sub")), 201)
    for method in ("GET", "PUT", "PATCH", "POST", "DELETE"):
        for name in ("sub", "x"):
            r = expect_status(c.request(method, f"{BASE}/poolleases/{name}/bogus", {}), 404, "NotFound")
            expect(r.json()["message"] == "the server could not find the requested resource"
                   and not r.json().get("details"), f"{method} {name}: {r.body}")


def optimistic_concurrency_and_preconditions(s):
    c = s.admin()
    name = uniq("oc")
    o = expect_status(c.request("POST", BASE + "/poolleases", pool_lease(name)), 201).json()
    o2 = json.loads(json.dumps(o))
    o2["spec"]["leaseDurationSeconds"] = 16
    o2 = expect_status(c.request("PUT", f"{BASE}/poolleases/{name}", o2), 200).json()
    expect(int(o2["metadata"]["resourceVersion"]) > int(o["metadata"]["resourceVersion"]), "RV not bumped")
    expect(o2["metadata"]["uid"] == o["metadata"]["uid"], "uid changed on update")
    expect(o2["metadata"]["creationTimestamp"] == o["metadata"]["creationTimestamp"], "creationTimestamp changed")
    o["spec"]["leaseDurationSeconds"] = 17
    r = expect_status(c.request("PUT", f"{BASE}/poolleases/{name}", o), 409, "Conflict")
    expect("the object has been modified" in r.json()["message"], r.body)
    # a label-only change keeps generation
    o2["metadata"]["labels"] = {"x": "y"}
    o3 = expect_status(c.request("PUT", f"{BASE}/poolleases/{name}", o2), 200).json()
    expect(o3["metadata"]["generation"] == o2["metadata"]["generation"], "generation must not grow without spec change")
    expect_status(c.request("DELETE", f"{BASE}/poolleases/{name}",
                            {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "wrong"}}),
                  409, "Conflict")
    expect_status(c.request("DELETE", f"{BASE}/poolleases/{name}",
                            {"preconditions": {"resourceVersion": o3["metadata"]["resourceVersion"]}}), 200)
    expect_status(c.request("PUT", f"{BASE}/poolleases/{name}", o3), 404, "NotFound")


def status_subresource(s):
    c = s.admin()
    name = uniq("st")
    o = expect_status(c.request("POST", BASE + "/poolleases", pool_lease(name)), 201).json()
    o["status"] = {"observedTime": "2026-01-01T00:00:00.000000Z"}
    o["spec"]["leaseDurationSeconds"] = 99
    r = expect_status(c.request("PUT", f"{BASE}/poolleases/{name}/status", o), 200).json()
    expect(r["spec"]["leaseDurationSeconds"] == 15, "a /status write must not change spec")
    g = expect_status(c.request("GET", f"{BASE}/poolleases/{name}/status"), 200).json()
    expect(g["metadata"]["name"] == name, "GET /status")


def only_renewals_stamp_observed_time_and_no_ops_write_nothing(s):
    # The inputs a newcomer found: `kubectl label pl hangzhou team=ops` on an
    # expired PoolLease made it live again (observedTime restamped on every
    # write); `kubectl patch pl y1 --type merge -p '{}'` bumped resourceVersion
    # and sent a watch event each time; PATCH .../status with observedTime
    # 2099-01-01 as admin was stored ("in 72y" in kubectl pool).
    c = s.admin()
    name = uniq("obs")
    url = f"{BASE}/poolleases/{name}"
    merge = "application/merge-patch+json"
    o = expect_status(c.request("POST", BASE + "/poolleases", pool_lease(name, "hz-1")), 201).json()
    observed = o["status"]["observedTime"]
    r, events, conn = c.watch(f"{url.rsplit('/', 1)[0]}?watch=true&fieldSelector=metadata.name%3D{name}"
                              f"&resourceVersion={o['metadata']['resourceVersion']}&timeoutSeconds=10")
    try:
        expect(r.status == 200, f"watch {r.status}")
        labelled = expect_status(c.request("PATCH", url, {"metadata": {"labels": {"team": "ops"}}},
                                           ctype=merge), 200).json()
        expect(labelled["status"]["observedTime"] == observed, ("a label renews nothing", labelled, observed))
        expect(labelled["metadata"]["resourceVersion"] != o["metadata"]["resourceVersion"], labelled)
        annotated = expect_status(c.request("PATCH", url, {"metadata": {"annotations": {"note": "x"}},
                                                           "spec": {"leaseDurationSeconds": 20}},
                                            ctype=merge), 200).json()
        expect(annotated["status"]["observedTime"] == observed, ("nor an annotation", annotated))
        rv = annotated["metadata"]["resourceVersion"]
        for _ in range(2):
            same = expect_status(c.request("PATCH", url, {}, ctype=merge), 200).json()
            expect(same == annotated, ("patched (no change)", same, annotated))
        put = expect_status(c.request("PUT", url, annotated), 200).json()
        expect(put["metadata"]["resourceVersion"] == rv, ("a PUT of the object read writes nothing", put))
        forged = expect_status(c.request("PATCH", url + "/status",
                                         {"status": {"observedTime": "2099-01-01T00:00:00.000000Z"}},
                                         ctype=merge), 200).json()
        expect(forged["status"]["observedTime"] == observed and forged["metadata"]["resourceVersion"] == rv,
               ("observedTime is the server's", forged))
        expect(expect_status(c.request("GET", url), 200).json()["status"]["observedTime"] == observed, "stored")
        renewed = expect_status(c.request("PATCH", url, {"spec": {"renewTime": "2030-01-01T00:00:00.000000Z"}},
                                          ctype=merge), 200).json()
        expect(renewed["status"]["observedTime"] > observed, ("a renewal stamps it", renewed, observed))
        got = [(ev["type"], ev["object"]["metadata"]["resourceVersion"]) for ev, _ in zip(events, range(3))]
        expect(got == [("MODIFIED", labelled["metadata"]["resourceVersion"]), ("MODIFIED", rv),
                       ("MODIFIED", renewed["metadata"]["resourceVersion"])], ("no event for a no-op", got))
    finally:
        conn.close()


def finalizers_hold_deletion(s):
    c = s.admin()
    name = uniq("fin")
    body = pool_lease(name)
    body["metadata"]["finalizers"] = ["example.com/hold"]
    expect_status(c.request("POST", BASE + "/poolleases", body), 201)
    r = expect_status(c.request("DELETE", f"{BASE}/poolleases/{name}"), 200).json()
    expect(r["metadata"].get("deletionTimestamp"), "deletionTimestamp not set")
    expect_status(c.request("GET", f"{BASE}/poolleases/{name}"), 200)
    expect_status(c.request("PATCH", f"{BASE}/poolleases/{name}", {"metadata": {"finalizers": None}},
                            ctype="application/merge-patch+json"), 200)
    expect_status(c.request("GET", f"{BASE}/poolleases/{name}"), 404)


def generate_name_and_dry_run(s):
    c = s.admin()
    body = pool_lease("")
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "gen-"
    o = expect_status(c.request("POST", BASE + "/poolleases", body), 201).json()
    expect(o["metadata"]["name"].startswith("gen-") and len(o["metadata"]["name"]) == 9, o["metadata"]["name"])
    name = uniq("dry")
    expect_status(c.request("POST", BASE + "/poolleases?dryRun=All", pool_lease(name)), 201)
    expect_status(c.request("GET", f"{BASE}/poolleases/{name}"), 404)
    expect_status(c.request("POST", BASE + "/poolleases?dryRun=Yes", pool_lease(name)), 422, "Invalid")


def list_resource_version_semantics(s):
    c = s.admin()
    d = expect_status(c.request("GET", BASE + "/poolleases"), 200).json()
    rv = int(d["metadata"]["resourceVersion"])
    r = expect_status(c.request("GET", f"{BASE}/poolleases?resourceVersion={rv + 1000}"), 504, "Timeout")
    expect(any(x.get("reason") == "ResourceVersionTooLarge" for x in r.json()["details"].get("causes", [])),
           r.body)
    expect_status(c.request("GET", f"{BASE}/poolleases?resourceVersionMatch=Exact"), 422, "Invalid")
    expect_status(c.request("GET", f"{BASE}/poolleases?resourceVersion=0&resourceVersionMatch=Exact"), 422, "Invalid")
    expect_status(c.request("GET", f"{BASE}/poolleases?resourceVersion=0"), 200)
    expect_status(c.request("GET", f"{BASE}/poolleases?continue=garbage"), 400, "BadRequest")
    expect_status(c.request("GET", f"{BASE}/poolleases?limit=abc"), 400, "BadRequest")
    expect_status(c.request("GET", f"{BASE}/poolleases?labelSelector=a%20in%20(b"), 400, "BadRequest")
    expect_status(c.request("GET", f"{BASE}/poolleases?fieldSelector=spec.poolName%3Dx"), 400, "BadRequest")
    expect_status(c.request("GET", f"{BASE}/delegatedleases?fieldSelector=spec.poolName%3Dx"), 200)
    # the aggregator re-encodes queries with '+' for spaces
    tag = uniq("q")
    for tier in ("a", "b", "c"):
        expect_status(c.request("POST", BASE + "/poolleases",
                                pool_lease(f"{tag}-{tier}", labels={"s": tag, "tier": tier})), 201)
    d = expect_status(c.request("GET", f"{BASE}/poolleases?labelSelector=s%3D{tag}%2Ctier+in+%28a%2Cc%29"), 200).json()
    expect(sorted(x["metadata"]["name"] for x in d["items"]) == [f"{tag}-a", f"{tag}-c"], d["items"])


def watch_with_huge_timeout_stays_open(s):
    # timeoutSeconds near INT64_MAX / 10^9 once overflowed the deadline and ended the stream at once
    c = s.admin()
    r, events, conn = c.watch(f"{BASE}/poolleases?watch=true&timeoutSeconds=9223372036&resourceVersion=0", timeout=3)
    try:
        expect(r.status == 200, f"watch {r.status}")
        t0 = time.time()
        try:
            for _ in events:
                pass
        except (TimeoutError, OSError):
            pass  # still open after the client's 3 s read timeout: the stream did not end
        expect(time.time() - t0 >= 2.5, "the watch ended at once")
    finally:
        conn.close()


def watch_selector_transitions(s):
    c = s.admin()
    tag = uniq("wt")
    d = expect_status(c.request("GET", BASE + "/poolleases"), 200).json()
    r, events, conn = c.watch(f"{BASE}/poolleases?watch=true&resourceVersion={d['metadata']['resourceVersion']}"
                              f"&labelSelector=s%3D{tag}&timeoutSeconds=10")
    try:
        expect(r.status == 200, f"watch {r.status}")
        name = f"{tag}-x"
        o = expect_status(c.request("POST", BASE + "/poolleases", pool_lease(name)), 201).json()
        o = expect_status(c.request("PATCH", f"{BASE}/poolleases/{name}", {"metadata": {"labels": {"s": tag}}},
                                    ctype="application/merge-patch+json"), 200).json()
        expect_status(c.request("PATCH", f"{BASE}/poolleases/{name}", {"metadata": {"labels": {"s": "other"}}},
                                ctype="application/merge-patch+json"), 200)
        got = []
        for ev in events:
            got.append(ev["type"])
            if len(got) == 2:
                break
        expect(got == ["ADDED", "DELETED"], f"selector transitions: {got}")
    finally:
        conn.close()


def watch_initial_events_and_expired(s):
    c = s.admin()
    tag = uniq("wi")
    expect_status(c.request("POST", BASE + "/poolleases", pool_lease(f"{tag}-1", labels={"s": tag})), 201)
    r, events, conn = c.watch(f"{BASE}/poolleases?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
                              f"&resourceVersionMatch=NotOlderThan&resourceVersion=0&labelSelector=s%3D{tag}"
                              f"&timeoutSeconds=5")
    try:
        expect(r.status == 200, f"watch {r.status}")
        first = next(events)
        expect(first["type"] == "ADDED" and first["object"]["metadata"]["name"] == f"{tag}-1", first)
        bm = next(events)
        expect(bm["type"] == "BOOKMARK" and
               bm["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true", bm)
    finally:
        conn.close()
    expect_status(c.request("GET", f"{BASE}/poolleases?watch=true&sendInitialEvents=true"), 422, "Invalid")
    d = expect_status(c.request("GET", BASE + "/poolleases"), 200).json()
    old_rv = int(d["metadata"]["resourceVersion"])
    for i in range(HISTORY + 5):
        expect_status(c.request("POST", BASE + "/poolleases", pool_lease(f"{tag}-f{i}")), 201)
    r, events, conn = c.watch(f"{BASE}/poolleases?watch=true&resourceVersion={old_rv}")
    try:
        expect(r.status == 200, f"watch {r.status}")
        ev = next(events)
        expect(ev["type"] == "ERROR" and ev["object"]["code"] == 410 and ev["object"]["reason"] == "Expired", ev)
    finally:
        conn.close()
    # limit/continue over the same objects, and an expired continue
    seen, cont = [], ""
    for _ in range(40):
        q = f"{BASE}/poolleases?limit=7" + (f"&continue={cont}" if cont else "")
        d = expect_status(c.request("GET", q), 200).json()
        seen += [x["metadata"]["name"] for x in d["items"]]
        cont = d["metadata"].get("continue", "")
        if not cont:
            break
    expect(len(seen) == len(set(seen)) and all(f"{tag}-f{i}" in seen for i in range(HISTORY + 5)), "pages")


def continued_list_is_a_snapshot(s):
    # The input that showed it (a newcomer): a page of limit=1 at rv R, then one
    # object of the next page patched and another deleted: the continued pages
    # carried the later states, and a continue token with a forged revision was
    # served as if the server had been there. kube-apiserver reads every page
    # at the first page's revision (etcd), a future one is refused.
    c = s.admin()
    tag = uniq("snap")
    names = [f"{tag}-{i}" for i in range(4)]
    for n in names:
        expect_status(c.request("POST", BASE + "/poolleases", pool_lease(n)), 201)
    first = expect_status(c.request("GET", f"{BASE}/poolleases?limit=1"), 200).json()
    rv = first["metadata"]["resourceVersion"]
    snapshot = {x["metadata"]["name"]: x["metadata"]["resourceVersion"]
                for x in expect_status(c.request("GET", f"{BASE}/poolleases"), 200).json()["items"]}
    expect_status(c.request("PATCH", f"{BASE}/poolleases/{names[1]}",
                            {"metadata": {"labels": {"later": "yes"}}}, "application/merge-patch+json"), 200)
    expect_status(c.request("DELETE", f"{BASE}/poolleases/{names[2]}"), 200)
    seen, cont, page = {}, first["metadata"]["continue"], first
    seen.update({x["metadata"]["name"]: x for x in first["items"]})
    while cont:
        page = expect_status(c.request("GET", f"{BASE}/poolleases?limit=1&continue={cont}"), 200).json()
        expect(page["metadata"]["resourceVersion"] == rv, page["metadata"])
        seen.update({x["metadata"]["name"]: x for x in page["items"]})
        cont = page["metadata"].get("continue", "")
    expect(sorted(seen) == sorted(snapshot), (sorted(seen), sorted(snapshot)))
    for n in names:
        expect(seen[n]["metadata"]["resourceVersion"] == snapshot[n], (n, seen[n]["metadata"]))
    expect("labels" not in seen[names[1]]["metadata"] or "later" not in seen[names[1]]["metadata"]["labels"],
           seen[names[1]]["metadata"])
    # A token naming a revision the server has not reached: 504, retry later.
    forged = base64.urlsafe_b64encode(json.dumps(
        {"v": "poolcoord/v1", "rv": int(rv) + 10**9, "start": names[0]}).encode()).decode()
    expect_status(c.request("GET", f"{BASE}/poolleases?limit=1&continue={forged}"), 504, "Timeout")


def authn_authz(s):
    expect_status(s.anonymous().request("GET", BASE + "/poolleases"), 401, "Unauthorized")
    expect_status(s.token("wrong").request("GET", BASE + "/poolleases"), 401, "Unauthorized")
    viewer = s.token("viewer-token")
    expect_status(viewer.request("GET", "/apis"), 200)
    expect_status(viewer.request("GET", "/openapi/v2"), 200)
    r = expect_status(viewer.request("GET", BASE + "/poolleases"), 403, "Forbidden")
    expect('User "viewer" cannot list resource "poolleases" in API group "coordination.pool"' in r.json()["message"],
           r.body)
    for p in ("/healthz", "/livez", "/readyz", "/version", "/metrics"):
        expect_status(s.anonymous().request("GET", p, accept=None), 200)
    # X-Remote-* from a client without a front-proxy certificate change nothing
    r = viewer.request("GET", BASE + "/poolleases", headers={"X-Remote-User": "admin", "X-Remote-Group": "system:masters"})
    expect_status(r, 403, "Forbidden")


def stalled_handshake_does_not_block(s):
    raw = socket.create_connection(("127.0.0.1", s.port))  # never sends a ClientHello
    try:
        t0 = time.time()
        expect_status(s.admin().request("GET", BASE + "/poolleases"), 200)
        expect(time.time() - t0 < 5, "a stalled client delayed another")
    finally:
        raw.close()


def metrics_count_requests(s):
    s.admin().request("GET", BASE + "/poolleases")
    m = s.anonymous().request("GET", "/metrics", accept=None).body
    expect("apiserver_request_total{" in m and 'resource="poolleases"' in m, m[:600])
    expect("apiserver_request_duration_seconds_bucket" in m, "histogram missing")
    expect("apiserver_registered_watchers" in m, "watchers gauge missing")


def sigterm_ends_watch_and_exits_zero(s):
    c = s.admin()
    r, events, conn = c.watch(f"{BASE}/poolleases?watch=true&timeoutSeconds=60", timeout=30)
    expect(r.status == 200, "watch")
    done = {}

    def drain():
        try:
            for _ in events:
                pass
            done["clean"] = True
        except Exception as e:  # a reset instead of a clean end
            done["error"] = repr(e)
    t = threading.Thread(target=drain)
    t.start()  # the watch is open (its headers came): the stream is ended by the signal alone
    t0 = time.time()
    rc = s.stop(signal.SIGTERM, timeout=20)
    t.join(10)
    conn.close()
    expect(rc == 0, f"exit code after SIGTERM: {rc}")
    expect(time.time() - t0 < 10, "shutdown took too long")
    expect(done.get("clean"), f"watch did not end cleanly: {done}")
    s.start()


def impersonation_refused_not_ignored(s):
    # The input that showed it: kubectl --as=system:node:zz-9 --as-group=system:nodes
    # delete pl k1 --dry-run=server "deleted" the lease as the admin, the
    # Impersonate-* headers ignored. kube-apiserver impersonates before it proxies
    # to us, so here they are refused, and nothing runs.
    c = s.admin()
    name = uniq("imp")
    expect_status(c.request("POST", f"{BASE}/poolleases",
                            {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": name},
                             "spec": {"leaseDurationSeconds": 10}}), 201)
    for header in ({"Impersonate-User": "system:node:zz-9"},
                   {"Impersonate-Group": "system:nodes"},
                   {"Impersonate-Extra-Scopes": "x"}):
        r = expect_status(c.request("DELETE", f"{BASE}/poolleases/{name}", headers=header), 403, "Forbidden")
        expect("impersonation is not supported" in r.json()["message"], r.body)
    expect_status(c.request("GET", f"{BASE}/poolleases/{name}"), 200)


def dry_run_bad_value_names_the_options_kind(s):
    # The input that showed it: ?dryRun=Bogus answered `DryRun.coordination.pool ""
    # is invalid`; kube-apiserver names the verb's options kind in meta.k8s.io.
    c = s.admin()
    name = uniq("dry")
    body = {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": name},
            "spec": {"leaseDurationSeconds": 10}}
    for method, path, kind, payload, ctype in [
            ("POST", f"{BASE}/poolleases", "CreateOptions", body, "application/json"),
            ("PATCH", f"{BASE}/poolleases/{name}", "PatchOptions", {"metadata": {}},
             "application/merge-patch+json"),
            ("DELETE", f"{BASE}/poolleases/{name}", "DeleteOptions", None, "application/json")]:
        r = expect_status(c.request(method, path + "?dryRun=Bogus", payload, ctype), 422, "Invalid")
        msg = r.json()["message"]
        expect(msg.startswith(f'{kind}.meta.k8s.io "" is invalid: dryRun: Unsupported value: "Bogus"'), msg)
        expect(r.json()["details"]["group"] == "meta.k8s.io", r.body)


def field_validation_bad_value_is_invalid_options(s):
    # The input that showed it (a newcomer): ?fieldValidation=Bogus (and the
    # lower-case "strict") answered 400 BadRequest; kube-apiserver judges it with
    # the options (apimachinery's ValidateFieldValidation): 422 of the verb's
    # options kind, the supported values quoted and sorted.
    c = s.admin()
    name = uniq("fv")
    body = {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": name},
            "spec": {"leaseDurationSeconds": 10}}
    expect_status(c.request("POST", f"{BASE}/poolleases", body), 201)
    for method, path, kind, payload, ctype in [
            ("POST", f"{BASE}/poolleases", "CreateOptions", body, "application/json"),
            ("PUT", f"{BASE}/poolleases/{name}", "UpdateOptions", body, "application/json"),
            ("PATCH", f"{BASE}/poolleases/{name}", "PatchOptions", {"metadata": {}},
             "application/merge-patch+json")]:
        for value in ("Bogus", "strict"):
            r = expect_status(c.request(method, f"{path}?fieldValidation={value}", payload, ctype),
                              422, "Invalid")
            msg = r.json()["message"]
            expect(msg == f'{kind}.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: '
                          f'"{value}": supported values: "", "Ignore", "Strict", "Warn"', msg)


def delegated_lease_values_quoted_and_required_in_schema(s):
    # The inputs that showed them: a DelegatedLease whose holderIdentity was not its
    # name answered `Invalid value: hz-3` (kube-apiserver quotes string values), and
    # the OpenAPI schema (kubectl explain) marked only leaseDurationSeconds and
    # poolName required while a missing holderIdentity or renewTime is 422 Required.
    c = s.admin()
    name = uniq("dl")
    body = {"apiVersion": GV, "kind": "DelegatedLease",
            "metadata": {"name": name, "annotations": {"openyurt.io/delegate-heartbeat": "true"}},
            "spec": {"holderIdentity": "hz-3", "leaseDurationSeconds": 10, "poolName": "p",
                     "renewTime": "2026-01-01T00:00:00.000000Z"}}
    r = expect_status(c.request("POST", f"{BASE}/delegatedleases?dryRun=All", body), 422, "Invalid")
    expect('spec.holderIdentity: Invalid value: "hz-3": must equal' in r.json()["message"], r.body)
    r = expect_status(c.request("GET", "/openapi/v3/apis/coordination.pool/v1alpha1"), 200)
    schemas = r.json()["components"]["schemas"]
    spec = [v for k, v in schemas.items() if k.endswith("DelegatedLeaseSpec")]
    expect(len(spec) == 1, list(schemas))
    expect(sorted(spec[0]["required"]) == ["holderIdentity", "leaseDurationSeconds", "poolName", "renewTime"],
           spec[0].get("required"))


CASES = [impersonation_refused_not_ignored, delegated_lease_values_quoted_and_required_in_schema, dry_run_bad_value_names_the_options_kind, field_validation_bad_value_is_invalid_options, continued_list_is_a_snapshot, malformed_json_400, invalid_fields_422_with_causes, body_limits, transport_bad_input,
         delete_options_and_field_manager_bad_input, media_types, paths_and_methods,
         optimistic_concurrency_and_preconditions, status_subresource,
         only_renewals_stamp_observed_time_and_no_ops_write_nothing, finalizers_hold_deletion,
         generate_name_and_dry_run, list_resource_version_semantics, watch_with_huge_timeout_stays_open,
         watch_selector_transitions,
         watch_initial_events_and_expired, authn_authz, stalled_handshake_does_not_block,
         metrics_count_requests, sigterm_ends_watch_and_exits_zero]

if __name__ == "__main__":
    sys.exit(run_cases(CASES, lambda b: Server(b, extra_args=[f"--watch-history-size={HISTORY}"])))
