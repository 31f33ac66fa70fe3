"""Delegated authentication and authorization, and the front proxy, against a real
kube-apiserver (tests/e2e/kube_cluster.py), with poolcoord deployed from its chart
(its ServiceAccount's token is the identity of its TokenReview and
SubjectAccessReview calls, so the chart's system:auth-delegator binding and
extension-apiserver-authentication-reader Role are what is tested):

- a ServiceAccount token authenticates through TokenReview, and the answer is
  cached 10 s: kube-apiserver's own request counter shows one review for two
  requests; a token kube-apiserver rejects comes back with status.error, which
  k8s.io/apiserver's token cache does not keep, so it is asked again;
- what the built-in rules leave open goes to SubjectAccessReview: a user the
  cluster's RBAC allows lists poolleases, another gets a 403 naming them; nodes and
  system:masters never cause a review;
- kube-system/extension-apiserver-authentication, as kube-apiserver itself keeps
  it: its front-proxy CA and allowed names (another CN of that CA gets 401), its
  client CA, and changes to it followed live (a CA added is trusted, removed is not);
- the front proxy as kube-apiserver's aggregator is one: X-Remote-Group one line per
  group, a line with a comma is one group, headers without the front-proxy
  certificate are ignored.

Skipped (exit 77) without kube-apiserver/kube-controller-manager binaries."""
import base64
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_fixture import issue_cert, make_ca  # noqa: E402
from harness import BASE, GV, expect, expect_status, microtime, uniq, wait_for  # noqa: E402
from kube_cluster import ChartInstall, KubeCluster, run_cluster_cases  # noqa: E402

CM = "extension-apiserver-authentication"
MASTERS = {"X-Remote-User": "kube-admin", "X-Remote-Group": "system:masters"}


class Env:
    def __init__(self, binary):
        # kube-controller-manager aggregates the chart's aggregate-to-view role into "view".
        self.cluster = KubeCluster()
        try:
            self.dir = tempfile.mkdtemp(prefix="auth-", dir=self.cluster.workdir)
            self.token_file = os.path.join(self.dir, "tokens.csv")
            with open(self.token_file, "w") as f:
                f.write('file-token,file-user,uid-file,"system:masters"\n')
            # The chart's own way to add a flag; the file's path in the pod is mapped here.
            self.pc = ChartInstall(self.cluster, binary,
                                   values=["server.extraArgs={--token-auth-file=/etc/poolcoord/tokens.csv}"],
                                   files={"/etc/poolcoord/tokens.csv": self.token_file})
        except BaseException:
            self.cluster.stop()
            raise

    def direct(self, cert=None, token=None):
        c = self.pc.direct(cert=cert)
        c.token = token
        return c

    def tokenreviews(self):
        return self.cluster.apiserver_requests("tokenreviews")

    def sars(self):
        return self.cluster.apiserver_requests("subjectaccessreviews")

    def logs(self):
        return self.cluster.logs()

    def stop(self):
        self.cluster.stop()


def view_aggregated(env):
    def has_ours():
        rules = env.cluster.kubectl_json("get", "clusterrole", "view").get("rules") or []
        return any("coordination.pool" in r.get("apiGroups", []) for r in rules)
    wait_for("the chart's rules aggregated into the view ClusterRole", has_ours, timeout=60, every=1)


def sa_token(env, name, role=None):
    env.cluster.kubectl("create", "serviceaccount", name, "-n", "default", check=True)
    if role:
        env.cluster.kubectl("create", "clusterrolebinding", f"{name}-{role}", f"--clusterrole={role}",
                            f"--serviceaccount=default:{name}", check=True)
    return env.cluster.kubectl("create", "token", name, "-n", "default", check=True).stdout.strip()


def service_account_token_through_tokenreview(env):
    # "view" aggregates the chart's poolcoord-aggregate-to-view ClusterRole.
    view_aggregated(env)
    token = sa_token(env, "reader", role="view")
    before = env.tokenreviews()
    c = env.direct(token=token)
    expect_status(c.request("GET", BASE + "/poolleases"), 200)
    expect_status(c.request("GET", BASE + "/delegatedleases"), 200)
    expect(env.tokenreviews() == before + 1, f"TokenReviews: {before} -> {env.tokenreviews()} for two requests")
    # The view role reads, it does not write: SubjectAccessReview says so.
    r = expect_status(c.request("POST", BASE + "/poolleases",
                                {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": "x"},
                                 "spec": {"leaseDurationSeconds": 10}}), 403, "Forbidden")
    expect('User "system:serviceaccount:default:reader" cannot create resource "poolleases"'
           in r.json()["message"], r.body)


def unknown_token_is_401_and_asked_again(env):
    token = "not-a-token-" + uniq("t")
    review = env.cluster.admin().request(
        "POST", "/apis/authentication.k8s.io/v1/tokenreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}).json()
    expect(not review["status"].get("authenticated") and review["status"].get("error"), review["status"])
    before = env.tokenreviews()
    c = env.direct(token=token)
    expect_status(c.request("GET", BASE + "/poolleases"), 401, "Unauthorized")
    expect_status(c.request("GET", BASE + "/poolleases"), 401, "Unauthorized")
    expect(env.tokenreviews() == before + 2, f"TokenReviews: {before} -> {env.tokenreviews()}")


def token_file_wins_without_tokenreview(env):
    before = env.tokenreviews()
    expect_status(env.direct(token="file-token").request("GET", BASE + "/poolleases"), 200)
    expect(env.tokenreviews() == before, "a token of --token-auth-file went to TokenReview")


def subjectaccessreview_decides_the_rest(env):
    view_aggregated(env)
    env.cluster.kubectl("create", "clusterrolebinding", "erin-view", "--clusterrole=view", "--user=erin",
                        check=True)
    erin = env.direct(cert=env.cluster.pki.client("erin", "erin"))
    before = env.sars()
    expect_status(erin.request("GET", BASE + "/poolleases"), 200)
    expect_status(erin.request("GET", BASE + "/poolleases"), 200)
    expect(env.sars() == before + 1, f"SubjectAccessReviews for erin's two lists: {env.sars() - before}")
    frank = env.direct(cert=env.cluster.pki.client("frank", "frank", ["team-f"]))
    before = env.sars()
    for _ in range(2):
        r = expect_status(frank.request("GET", BASE + "/delegatedleases"), 403, "Forbidden")
        expect(r.json()["message"] == 'delegatedleases.coordination.pool is forbidden: User "frank" cannot '
               'list resource "delegatedleases" in API group "coordination.pool" at the cluster scope', r.body)
    expect(env.sars() == before + 1, f"the denial was not cached: {env.sars() - before} reviews")
    # A path the built-in rules leave closed: nonResourceAttributes, which RBAC denies.
    r = expect_status(frank.request("GET", "/debug/pprof"), 403, "Forbidden")
    expect('User "frank" cannot get path "/debug/pprof"' in r.json()["message"], r.body)


def nodes_and_masters_never_ask_the_cloud(env):
    before = env.sars()
    node = env.direct(cert=env.cluster.pki.node("hz-1"))
    expect(node.request("GET", BASE + "/poolleases").status == 200, "a node lists poolleases")
    expect_status(env.direct(cert=env.cluster.pki.admin).request("GET", BASE + "/delegatedleases"), 200)
    expect(env.sars() == before, f"SubjectAccessReviews: {before} -> {env.sars()}")


def requestheader_from_the_configmap(env):
    """kube-apiserver's own front-proxy CA and allowed names, read from the ConfigMap."""
    proxy = env.direct(cert=env.cluster.pki.front_proxy_client)
    r = expect_status(proxy.request("GET", BASE + "/poolleases",
                                    headers={"X-Remote-User": "carol", "X-Remote-Group": "team-c"}),
                      403, "Forbidden")
    expect('User "carol"' in r.json()["message"], r.body)
    expect_status(proxy.request("GET", BASE + "/poolleases", headers=MASTERS), 200)
    other = env.direct(cert=env.cluster.pki.client("proxy-other", "someone-else",
                                                   ca=env.cluster.pki.front_proxy_ca))
    expect_status(other.request("GET", BASE + "/poolleases", headers=MASTERS), 401, "Unauthorized")


def group_lines_as_the_aggregator_sends_them(env):
    """kube-apiserver sends one X-Remote-Group line per group: a user with groups
    team-x and system:masters is a master to poolcoord (an administrator may write a
    PoolLease for any holder); one line "team-x,system:masters" is one group."""
    dual = env.cluster.user_client("dual", "dual", ["team-x", "system:masters"])
    pool = uniq("anypool")
    now = microtime()
    body = {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": pool},
            "spec": {"holderIdentity": "nobody-in-particular", "leaseDurationSeconds": 10, "acquireTime": now,
                     "renewTime": now, "leaseTransitions": 0}}
    expect_status(dual.request("POST", BASE + "/poolleases", body), 201)
    proxy = env.direct(cert=env.cluster.pki.front_proxy_client)
    r = proxy.request("POST", BASE + "/poolleases", dict(body, metadata={"name": uniq("anypool")}),
                      headers={"X-Remote-User": "jane", "X-Remote-Group": "team-x,system:masters"})
    expect(r.status == 403 and 'User "jane"' in r.json()["message"], f"{r.status} {r.body[:300]}")


def headers_without_the_front_proxy_certificate_are_ignored(env):
    expect_status(env.direct().request("GET", BASE + "/poolleases", headers=MASTERS), 401, "Unauthorized")
    # A node's certificate with the headers: still the node.
    node = env.direct(cert=env.cluster.pki.node("hz-9"))
    r = node.request("POST", BASE + "/poolleases",
                     {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": uniq("p")},
                      "spec": {"holderIdentity": "hz-9", "leaseDurationSeconds": 10}}, headers=MASTERS)
    expect(r.status == 403 and 'node "hz-9"' in r.json()["message"], f"{r.status} {r.body[:300]}")


def configmap_changes_are_followed(env):
    """A CA added to the ConfigMap's requestheader-client-ca-file is trusted within
    seconds and no longer once removed (kube-apiserver's trust controller keeps
    CAs others add, and puts its own back)."""
    ca = make_ca(env.dir, "proxy2-ca")
    proxy2 = env.direct(cert=issue_cert(env.dir, "proxy2-client", ca, ["clientAuth"], cn="front-proxy-client"))
    expect_status(proxy2.request("GET", BASE + "/poolleases", headers=MASTERS), 401, "Unauthorized")
    admin = env.cluster.admin()
    path = f"/api/v1/namespaces/kube-system/configmaps/{CM}"
    with open(ca[0]) as f:
        added = f.read()

    def set_bundle(fn):
        for _ in range(5):
            cm = expect_status(admin.request("GET", path), 200).json()
            cm["data"]["requestheader-client-ca-file"] = fn(cm["data"]["requestheader-client-ca-file"])
            if admin.request("PUT", path, cm).status == 200:
                return
        raise AssertionError("could not update the ConfigMap")
    set_bundle(lambda b: b.rstrip("\n") + "\n" + added)
    try:
        wait_for("the added front-proxy CA trusted", lambda: proxy2.request(
            "GET", BASE + "/poolleases", headers=MASTERS).status == 200, timeout=20)
    finally:
        set_bundle(lambda b: b.replace(added, "").rstrip("\n") + "\n")
    wait_for("the removed front-proxy CA no longer trusted", lambda: proxy2.request(
        "GET", BASE + "/poolleases", headers=MASTERS).status == 401, timeout=20)
    expect_status(env.direct(cert=env.cluster.pki.front_proxy_client).request(
        "GET", BASE + "/poolleases", headers=MASTERS), 200)


CASES = [service_account_token_through_tokenreview, unknown_token_is_401_and_asked_again,
         token_file_wins_without_tokenreview, subjectaccessreview_decides_the_rest,
         nodes_and_masters_never_ask_the_cloud, requestheader_from_the_configmap,
         group_lines_as_the_aggregator_sends_them, headers_without_the_front_proxy_certificate_are_ignored,
         configmap_changes_are_followed]

if __name__ == "__main__":
    sys.exit(run_cluster_cases(CASES, Env, __doc__))
