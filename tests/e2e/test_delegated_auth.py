"""Delegated authentication and authorization when the cloud misbehaves: what a real
kube-apiserver cannot be made to do, against the cloud fixture
(tests/e2e/cloud_fixture.py) with --authentication-kubeconfig and
--authorization-kubeconfig pointing at it. Everything the real one does is in
test_cluster_auth.py.

- TokenReview answering 500, dropping the connection or never answering: the
  request gets 401, and the next one asks again (k8s.io/apiserver caches no error);
- SubjectAccessReview answering 500 or dropping the connection: 500, as
  kube-apiserver's authorization filter answers an authorizer error; asked again;
- a TokenReview denial without status.error (kube-apiserver always sets one) is
  cached like an allowed answer;
- the ConfigMap kube-system/extension-apiserver-authentication deleted (kube-apiserver
  re-creates it at once): the CAs it brought are trusted no more."""
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cloud_fixture import CloudFixture, make_ca, make_client_cert  # noqa: E402
from harness import BASE, Client, Server, expect, expect_status, run_cases, uniq, wait_for  # noqa: E402

CLOUD = None
WORK = None
CA = {}  # name -> (cert, key)
CM = "extension-apiserver-authentication"
TOKENREVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SARS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def pem(path):
    with open(path) as f:
        return f.read()


def configmap_data(proxy_ca, client_ca):
    return {"client-ca-file": pem(client_ca[0]),
            "requestheader-client-ca-file": pem(proxy_ca[0]),
            "requestheader-allowed-names": json.dumps(["front-proxy-client"]),
            "requestheader-username-headers": json.dumps(["X-Remote-User"]),
            "requestheader-group-headers": json.dumps(["X-Remote-Group"]),
            "requestheader-extra-headers-prefix": json.dumps(["X-Remote-Extra-"])}


def cloud_token(user):
    tok = uniq("cloud-token")
    CLOUD.state.tokens[tok] = {"username": user, "uid": "uid-" + user, "groups": []}
    return tok


def tokenreview_failures_are_401_and_asked_again(s):
    for fault in (500, 503, "drop"):
        c = s.token(cloud_token("alice"))  # a new token each time: the success is cached
        before = CLOUD.state.count("POST", TOKENREVIEWS)
        CLOUD.state.inject("POST", TOKENREVIEWS, fault, times=3)
        r = c.request("GET", BASE)
        tried = CLOUD.state.count("POST", TOKENREVIEWS) - before
        expect(r.status == 401, f"{fault}: HTTP {r.status} after {tried} TokenReviews")
        CLOUD.state.faults.clear()
        expect_status(c.request("GET", BASE), 200)  # discovery: any authenticated user
        expect(CLOUD.state.count("POST", TOKENREVIEWS) == before + tried + 1, f"{fault}: the failure was cached")


def tokenreview_timeout_is_401(s):
    tok = cloud_token("alice-t")
    CLOUD.state.inject("POST", TOKENREVIEWS, "timeout")
    t0 = time.time()
    expect_status(s.token(tok).request("GET", BASE), 401, "Unauthorized")
    took = time.time() - t0
    expect(9 <= took <= 15, f"answered after {took:.1f} s (the delegation clients wait 10 s)")
    expect_status(s.token(tok).request("GET", BASE), 200)


def subjectaccessreview_failures_are_500(s):
    for fault in (500, "drop"):
        c = s.token(cloud_token(uniq("alice")))  # allowed answers are cached per user
        # A dropped connection may be one reused after the peer closed it: the
        # client tries once more, so the fault outlasts a retry.
        CLOUD.state.inject("POST", SARS, fault, times=3)
        r = expect_status(c.request("GET", BASE + "/poolleases"), 500, "InternalError")
        expect("Internal Server Error" in r.json()["message"], r.body)
        CLOUD.state.faults.clear()
        expect_status(c.request("GET", BASE + "/poolleases"), 200)


def denial_without_error_is_cached(s):
    c = s.token(uniq("nobody-knows"))
    before = CLOUD.state.count("POST", TOKENREVIEWS)
    expect_status(c.request("GET", BASE), 401, "Unauthorized")
    expect_status(c.request("GET", BASE), 401, "Unauthorized")
    expect(CLOUD.state.count("POST", TOKENREVIEWS) == before + 1, "the denial is cached")


def deleted_configmap_drops_its_cas(s):
    proxy = Client(s.port, s.ca, cert=make_client_cert(WORK, CA["proxy"], uniq("p"), "front-proxy-client"))
    hdrs = {"X-Remote-User": "kube-admin", "X-Remote-Group": "system:masters"}
    expect_status(proxy.request("GET", BASE + "/poolleases", headers=hdrs), 200)
    CLOUD.state.delete_configmap(CM)
    try:
        wait_for("the deletion followed", lambda: proxy.request(
            "GET", BASE + "/poolleases", headers=hdrs).status == 401, timeout=15)
    finally:
        CLOUD.state.set_configmap(CM, configmap_data(CA["proxy"], CA["client"]))
    wait_for("the ConfigMap back", lambda: proxy.request(
        "GET", BASE + "/poolleases", headers=hdrs).status == 200, timeout=15)


def sar_policy(spec):
    """The cloud's RBAC stand-in: alice may list poolleases."""
    ra = spec.get("resourceAttributes") or {}
    return spec.get("user", "").startswith("alice") and ra.get("resource") == "poolleases"


def make_server(binary):
    global CLOUD, WORK
    WORK = tempfile.mkdtemp(prefix="poolcoord-delegated-")
    CLOUD = CloudFixture(WORK)
    for name in ("proxy", "client"):
        CA[name] = make_ca(WORK, f"{name}-ca")
    CLOUD.state.set_configmap(CM, configmap_data(CA["proxy"], CA["client"]))
    CLOUD.state.sar_allow = sar_policy
    return Server(binary, extra_args=[f"--authentication-kubeconfig={CLOUD.kubeconfig}",
                                      f"--authorization-kubeconfig={CLOUD.kubeconfig}"])


CASES = [tokenreview_failures_are_401_and_asked_again, tokenreview_timeout_is_401,
         subjectaccessreview_failures_are_500, denial_without_error_is_cached, deleted_configmap_drops_its_cas]

if __name__ == "__main__":
    rc = run_cases(CASES, make_server)
    if CLOUD:
        CLOUD.stop()
        shutil.rmtree(CLOUD.workdir, ignore_errors=True)  # its CA, keys and kubeconfig
    sys.exit(rc)
