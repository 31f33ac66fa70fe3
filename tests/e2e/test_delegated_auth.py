"""Delegated authentication and authorization against the cloud fixture
(tests/e2e/cloud_fixture.py, kube-apiserver semantics), with
--authentication-kubeconfig and --authorization-kubeconfig pointing at it:

- a bearer token only the cloud knows authenticates through TokenReview, and the
  answer (allow and deny alike) is cached: a second request within 10 s does not
  reach the cloud;
- what the built-in rules leave open goes to SubjectAccessReview (resource
  attributes for resource requests): an allowed user lists poolleases, a denied
  one gets kube-apiserver's 403 naming them;
- the ConfigMap kube-system/extension-apiserver-authentication is honoured (its
  front-proxy CA with its allowed names, its client CA) and followed when it
  changes."""
import json
import os
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
SAR_SPECS = []  # every spec the fixture was asked about, in order



def pem(path):
    with open(path) as f:
        return f.read()


def configmap_data(proxy_ca, client_ca, allowed=("front-proxy-client",)):
    return {"client-ca-file": pem(client_ca[0]),
            "requestheader-client-ca-file": pem(proxy_ca[0]),
            "requestheader-allowed-names": json.dumps(list(allowed)),
            "requestheader-username-headers": json.dumps(["X-Remote-User"]),
            "requestheader-group-headers": json.dumps(["X-Remote-Group"]),
            "requestheader-extra-headers-prefix": json.dumps(["X-Remote-Extra-"])}


def sar_policy(spec):
    """The cloud's RBAC stand-in: alice may get/list poolleases; nobody else anything."""
    SAR_SPECS.append(spec)
    ra = spec.get("resourceAttributes") or {}
    return (spec.get("user") == "alice" and ra.get("group") == "coordination.pool"
            and ra.get("resource") == "poolleases" and ra.get("verb") in ("get", "list"))


def cloud_token(user, groups=()):
    tok = uniq("cloud-token")
    CLOUD.state.tokens[tok] = {"username": user, "uid": "uid-" + user, "groups": list(groups)}
    return tok


def token_known_only_to_the_cloud_authenticates(s):
    tok = cloud_token("alice", ["team-a"])
    expect(tok not in s.tokens, "the token must not be in --token-auth-file")
    c = s.token(tok)
    before = CLOUD.state.count("POST", TOKENREVIEWS)
    expect_status(c.request("GET", BASE), 200)  # discovery: any authenticated user
    expect(CLOUD.state.count("POST", TOKENREVIEWS) == before + 1, "first request asks TokenReview once")
    expect_status(c.request("GET", BASE), 200)
    expect_status(s.token(tok).request("GET", "/apis"), 200)  # a new connection, same token
    expect(CLOUD.state.count("POST", TOKENREVIEWS) == before + 1,
           "requests within 10 s must be answered from the cache, not the cloud")


def unknown_token_is_401_and_the_denial_is_cached(s):
    c = s.token(uniq("nobody-knows"))
    before = CLOUD.state.count("POST", TOKENREVIEWS)
    expect_status(c.request("GET", BASE), 401, "Unauthorized")
    expect_status(c.request("GET", BASE), 401, "Unauthorized")
    expect(CLOUD.state.count("POST", TOKENREVIEWS) == before + 1, "the denial is cached too")


def token_file_wins_without_tokenreview(s):
    before = CLOUD.state.count("POST", TOKENREVIEWS)
    expect_status(s.token("admin-token").request("GET", BASE + "/poolleases"), 200)
    expect(CLOUD.state.count("POST", TOKENREVIEWS) == before, "a token-file token never reaches TokenReview")


def sar_allowed_user_lists_poolleases(s):
    c = s.token(cloud_token("alice", ["team-a"]))
    n = len(SAR_SPECS)
    expect_status(c.request("GET", BASE + "/poolleases"), 200)
    expect(len(SAR_SPECS) == n + 1, f"one SubjectAccessReview expected, got {len(SAR_SPECS) - n}")
    spec = SAR_SPECS[-1]
    expect(spec["resourceAttributes"] == {"verb": "list", "group": "coordination.pool",
                                          "version": "v1alpha1", "resource": "poolleases"},
           f"resourceAttributes: {spec}")
    expect(spec["user"] == "alice" and spec["uid"] == "uid-alice", f"user: {spec}")
    expect(spec["groups"] == ["team-a", "system:authenticated"], f"groups: {spec}")
    expect("nonResourceAttributes" not in spec, f"{spec}")
    # allowed answers are cached: the same question again does not reach the cloud
    expect_status(c.request("GET", BASE + "/poolleases"), 200)
    expect(len(SAR_SPECS) == n + 1, "the allowed answer must be cached")


def sar_denied_user_gets_403(s):
    c = s.token(cloud_token("bob", ["team-b"]))
    n = CLOUD.state.count("POST", SARS)
    r = expect_status(c.request("GET", BASE + "/poolleases"), 403, "Forbidden")
    expect(r.json()["message"] == 'poolleases.coordination.pool is forbidden: User "bob" cannot list '
           'resource "poolleases" in API group "coordination.pool" at the cluster scope',
           r.json()["message"])
    expect_status(c.request("GET", BASE + "/poolleases"), 403, "Forbidden")
    expect(CLOUD.state.count("POST", SARS) == n + 1, "the denial must be cached")
    # a non-resource path the built-in rules do not open: nonResourceAttributes
    expect_status(c.request("GET", "/debug/pprof"), 403, "Forbidden")
    spec = SAR_SPECS[-1]
    expect(spec.get("nonResourceAttributes") == {"path": "/debug/pprof", "verb": "get"}, f"{spec}")


def nodes_and_masters_never_ask_the_cloud(s):
    n = CLOUD.state.count("POST", SARS)
    expect_status(s.token("hz-1-token").request("GET", BASE + "/poolleases"), 200)
    expect_status(s.admin().request("GET", BASE + "/delegatedleases"), 200)
    expect(CLOUD.state.count("POST", SARS) == n, "built-in rules decide without SubjectAccessReview")


def requestheader_ca_from_the_configmap_is_honoured(s):
    proxy = make_client_cert(WORK, CA["proxy1"], uniq("proxy"), "front-proxy-client")
    c = Client(s.port, s.ca, cert=proxy)
    r = expect_status(c.request("GET", BASE + "/poolleases",
                                headers={"X-Remote-User": "carol", "X-Remote-Group": "team-c"}), 403)
    expect('User "carol"' in r.json()["message"], r.json()["message"])
    spec = SAR_SPECS[-1]
    expect(spec["user"] == "carol" and spec["groups"] == ["team-c", "system:authenticated"], f"{spec}")
    # a master through the front proxy
    expect_status(c.request("GET", BASE + "/poolleases",
                            headers={"X-Remote-User": "kube-admin", "X-Remote-Group": "system:masters"}), 200)
    # the ConfigMap's allowed names apply: another CN of the same CA gets 401
    other = Client(s.port, s.ca, cert=make_client_cert(WORK, CA["proxy1"], uniq("other"), "someone-else"))
    expect_status(other.request("GET", BASE + "/poolleases",
                                headers={"X-Remote-User": "kube-admin", "X-Remote-Group": "system:masters"}),
                  401, "Unauthorized")


def client_ca_from_the_configmap_is_added(s):
    cert = make_client_cert(WORK, CA["client"], uniq("dana"), "dana", orgs=["system:masters"])
    expect_status(Client(s.port, s.ca, cert=cert).request("GET", BASE + "/poolleases"), 200)
    expect_status(s.admin().request("GET", BASE + "/poolleases"), 200)  # the generated CA still works


def configmap_changes_are_followed(s):
    old_proxy = Client(s.port, s.ca, cert=make_client_cert(WORK, CA["proxy1"], uniq("p1"), "front-proxy-client"))
    new_proxy = Client(s.port, s.ca, cert=make_client_cert(WORK, CA["proxy2"], uniq("p2"), "front-proxy-client"))
    hdrs = {"X-Remote-User": "kube-admin", "X-Remote-Group": "system:masters"}
    expect_status(new_proxy.request("GET", BASE + "/poolleases", headers=hdrs), 401)
    CLOUD.state.set_configmap(CM, configmap_data(CA["proxy2"], CA["client"]))
    try:
        wait_for("the rotated front-proxy CA", lambda: new_proxy.request(
            "GET", BASE + "/poolleases", headers=hdrs).status == 200, timeout=15)
        expect_status(old_proxy.request("GET", BASE + "/poolleases", headers=hdrs), 401, "Unauthorized")
        # deleted: no front-proxy CA from the cluster any more
        CLOUD.state.delete_configmap(CM)
        wait_for("the deletion", lambda: new_proxy.request(
            "GET", BASE + "/poolleases", headers=hdrs).status == 401, timeout=15)
    finally:
        CLOUD.state.set_configmap(CM, configmap_data(CA["proxy1"], CA["client"]))
    wait_for("the original ConfigMap back", lambda: old_proxy.request(
        "GET", BASE + "/poolleases", headers=hdrs).status == 200, timeout=15)


def make_server(binary):
    global CLOUD, WORK
    WORK = tempfile.mkdtemp(prefix="poolcoord-delegated-")
    CLOUD = CloudFixture(WORK)
    for name in ("proxy1", "proxy2", "client"):
        CA[name] = make_ca(WORK, f"{name}-ca")
    CLOUD.state.set_configmap(CM, configmap_data(CA["proxy1"], CA["client"]))
    CLOUD.state.sar_allow = sar_policy
    return Server(binary, extra_args=[f"--authentication-kubeconfig={CLOUD.kubeconfig}",
                                      f"--authorization-kubeconfig={CLOUD.kubeconfig}"])


CASES = [token_known_only_to_the_cloud_authenticates, unknown_token_is_401_and_the_denial_is_cached,
         token_file_wins_without_tokenreview, sar_allowed_user_lists_poolleases, sar_denied_user_gets_403,
         nodes_and_masters_never_ask_the_cloud, requestheader_ca_from_the_configmap_is_honoured,
         client_ca_from_the_configmap_is_added, configmap_changes_are_followed]

if __name__ == "__main__":
    rc = run_cases(CASES, make_server)
    if CLOUD:
        CLOUD.stop()
    sys.exit(rc)
