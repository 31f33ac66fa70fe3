"""poolcoord behind a real kube-apiserver (aggregation, Node,RBAC, NodeRestriction)
and kube-controller-manager, deployed as its Helm chart deploys it
(tests/e2e/kube_cluster.py): the APIService, kubectl through the aggregator,
aggregated discovery and the merged OpenAPI, node identities through the front
proxy with every rule's answer, the webhook in the real admission chain and the
ValidatingAdmissionPolicy, the chart's RBAC (poolcoord runs as the chart's
ServiceAccount), server-side dry runs of the chart's values variants, Helm's
lookup and NOTES against the cluster, and kube-controller-manager's metadata
informers on our resources (watch-list, bookmarks).

Skipped (exit 77) without kube-apiserver/kube-controller-manager binaries
($POOLCOORD_K8S_BIN, else ../shared/k8s/v1.32.6/bin)."""
import base64
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_kubectl  # noqa: E402
from harness import BASE, GV, expect, expect_status, microtime, uniq, wait_for  # noqa: E402
from kube_cluster import (CHART, DELEGATE, POOL_LABEL, ChartInstall, KubeCluster, Kubelet,  # noqa: E402
                          helm_binary, helm_template, run_cluster_cases, yaml_objects)

NODE_LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
NODES = {"hz-1": "hangzhou", "hz-2": "hangzhou", "hz-3": "hangzhou", "hz-4": "hangzhou",
         "bj-1": "beijing", "bj-2": "beijing"}
AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


class Env:
    def __init__(self, binary):
        self.cluster = KubeCluster()
        try:
            # Before the chart's objects exist: Helm refuses to install over objects
            # that another release (here kubectl) owns, dry run or not.
            self.notes = subprocess.run(
                [helm_binary(), "install", "notes", CHART, "-n", "notes-check", "--create-namespace",
                 "--dry-run=server", "--kubeconfig", self.cluster.admin_kubeconfig],
                capture_output=True, text=True, timeout=120)
            self.pc = ChartInstall(self.cluster, binary)
            self.kubelets = {n: Kubelet(self.cluster, n, {POOL_LABEL: p}).register().start()
                             for n, p in NODES.items()}
            # hz-4 has lost the cloud: its kubelet renews nothing (delegation cases).
            self.kubelets["hz-4"].online = False
            self.kcm_started = time.time()
        except BaseException:
            self.cluster.stop()
            raise
        # test_kubectl's cases run unchanged through the aggregator as kube-admin
        # (system:masters, forwarded as X-Remote-Group).
        self.kubeconfig = self.cluster.admin_kubeconfig
        self.workdir = self.cluster.workdir

    def kubectl(self, *args, **kw):
        return self.cluster.kubectl(*args, **kw)

    def node(self, name):
        return self.cluster.node_client(name)

    def logs(self):
        return self.cluster.logs()

    def stop(self):
        for k in self.kubelets.values():
            k.stop()
        self.cluster.stop()


def webhook_calls(env):
    # The webhook path is the only POST poolcoord serves outside resources.
    return env.pc.metric("apiserver_request_total", verb="POST", resource="")


def pool_lease_body(pool, holder, transitions=0, duration=30):
    now = microtime()
    return {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": pool},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "acquireTime": now,
                     "renewTime": now, "leaseTransitions": transitions}}


def delegated_body(node, pool, delegate, annotated=True):
    md = {"name": node}
    if annotated:
        md["annotations"] = {DELEGATE: "true"}
    return {"apiVersion": GV, "kind": "DelegatedLease", "metadata": md,
            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": microtime(),
                     "poolName": pool, "delegate": delegate}}


# ---------------------------------------------------------------------------

def apiservice_available(env):
    st = env.cluster.kubectl_json("get", "apiservice", "v1alpha1.coordination.pool")
    cond = {c["type"]: c for c in st["status"]["conditions"]}
    expect(cond["Available"]["status"] == "True", cond)
    expect(st["spec"]["service"]["name"] == env.pc.service, st["spec"])
    svc = env.cluster.kubectl_json("get", "service", env.pc.service, "-n", env.pc.namespace)
    expect(svc["spec"]["type"] == "ExternalName" and svc["spec"]["externalName"] == "localhost", svc["spec"])


def aggregated_discovery_and_openapi(env):
    admin = env.cluster.admin()
    r = expect_status(admin.request("GET", "/apis", accept=AGGREGATED_V2), 200)
    expect("as=APIGroupDiscoveryList" in r.header("Content-Type"), r.header("Content-Type"))
    groups = {g["metadata"]["name"]: g for g in r.json()["items"]}
    expect("coordination.pool" in groups, sorted(groups))
    version = groups["coordination.pool"]["versions"][0]
    expect(version["version"] == "v1alpha1", version)
    # Issue 12: freshness, which the aggregator keeps from our own document.
    expect(version.get("freshness") == "Current", f"freshness: {version.get('freshness')}")
    resources = {x["resource"]: x for x in version["resources"]}
    expect({"poolleases", "delegatedleases"} <= set(resources), sorted(resources))
    expect(resources["poolleases"]["shortNames"] == ["pl"], resources["poolleases"])
    expect(resources["delegatedleases"]["scope"] == "Cluster", resources["delegatedleases"])
    # Legacy discovery through the proxy.
    legacy = expect_status(admin.request("GET", BASE), 200).json()
    expect({x["name"] for x in legacy["resources"]} >= {"poolleases", "delegatedleases"}, legacy)

    def v2_has_ours():
        d = admin.request("GET", "/openapi/v2").json()
        return [k for k in d.get("definitions", {}) if k.startswith("pool.coordination.v1alpha1.")]
    names = wait_for("our definitions in kube-apiserver's merged /openapi/v2", v2_has_ours, timeout=90, every=2)
    expect({"pool.coordination.v1alpha1.PoolLease", "pool.coordination.v1alpha1.DelegatedLease"} <= set(names),
           names)
    paths = expect_status(admin.request("GET", "/openapi/v3"), 200).json()["paths"]
    expect("apis/coordination.pool/v1alpha1" in paths, sorted(paths)[:20])
    doc = expect_status(admin.request("GET", paths["apis/coordination.pool/v1alpha1"]["serverRelativeURL"]),
                        200).json()
    expect("pool.coordination.v1alpha1.PoolLease" in doc["components"]["schemas"], "v3 schemas")
    out = env.kubectl("explain", "delegatedleases.spec.poolName")
    expect(out.returncode == 0 and "poolName" in out.stdout, out.stderr + out.stdout)


def kubectl_through_the_aggregator(env):
    """test_kubectl.py's cases, through kube-apiserver instead of directly."""
    failed = []
    for case in test_kubectl.CASES:
        try:
            case(env)
        except Exception as e:  # collect, so one message names every failing case
            failed.append(f"{case.__name__}: {e}")
    expect(not failed, "; ".join(failed))


def plain_renewals_never_reach_the_webhook(env):
    """matchConditions keep unannotated writes and the node's own writes inside
    kube-apiserver: a round of kubelet renewals leaves the webhook counter as it was."""
    before = webhook_calls(env)
    for name, k in env.kubelets.items():
        if k.online:
            k.renew()
            k.renew()
    expect(webhook_calls(env) == before, f"webhook called by plain renewals: {before} -> {webhook_calls(env)}")
    # Someone else annotating a node Lease does reach it, through the real admission chain.
    env.kubectl("create", "role", "lease-writer", "-n", "kube-node-lease", "--verb=get,update,patch",
                "--resource=leases.coordination.k8s.io", check=True)
    env.kubectl("create", "rolebinding", "mallory-leases", "-n", "kube-node-lease", "--role=lease-writer",
                "--user=mallory", check=True)
    mallory = env.cluster.user_client("mallory", "mallory")
    lease = expect_status(mallory.request("GET", f"{NODE_LEASES}/hz-2"), 200).json()
    lease["metadata"].setdefault("annotations", {})[DELEGATE] = "true"
    r = mallory.request("PUT", f"{NODE_LEASES}/hz-2", lease)
    expect(r.status == 403, f"mallory annotating hz-2's Lease: {r.status} {r.body[:300]}")
    msg = r.json()["message"]
    expect('admission webhook "delegated-heartbeat.coordination.pool" denied the request' in msg, msg)
    expect("mallory" in msg, f"the denial names the writer: {msg}")
    expect(webhook_calls(env) == before + 1, f"webhook calls: {before} -> {webhook_calls(env)}")


def admission_policy_refuses_a_node_annotating_itself(env):
    node = env.node("hz-2")
    lease = expect_status(node.request("GET", f"{NODE_LEASES}/hz-2"), 200).json()
    lease["metadata"].setdefault("annotations", {})[DELEGATE] = "true"
    lease["spec"]["renewTime"] = microtime()
    before = webhook_calls(env)
    r = node.request("PUT", f"{NODE_LEASES}/hz-2", lease)
    expect(r.status == 403, f"{r.status} {r.body[:300]}")
    msg = r.json()["message"]
    expect("ValidatingAdmissionPolicy" in msg and "may not add or change the annotation" in msg, msg)
    expect(webhook_calls(env) == before, "the node's own write went to the webhook")
    # NodeRestriction: a node may not write another node's Lease at all.
    other = expect_status(env.cluster.admin().request("GET", f"{NODE_LEASES}/hz-3"), 200).json()
    r = node.request("PUT", f"{NODE_LEASES}/hz-3", other)
    expect(r.status == 403, f"hz-2 writing hz-3's Lease: {r.status} {r.body[:200]}")


def render_against_cluster(env, *args):
    """`helm template` of the installed release as an upgrade rendered against the
    cluster (`--dry-run=server`: Helm's lookup sees the installed objects): its
    objects, parsed."""
    p = subprocess.run([helm_binary(), "template", env.pc.release, CHART, "-n", env.pc.namespace,
                        "--is-upgrade", "--dry-run=server", "--kubeconfig", env.cluster.admin_kubeconfig, *args],
                       capture_output=True, text=True, timeout=120)
    expect(p.returncode == 0, p.stderr)
    return yaml_objects(p.stdout)


def without_the_policy_the_webhook_judges_the_node(env):
    """admissionPolicy.enabled=false: no ValidatingAdmissionPolicy, and the chart's
    webhook is sent the node's own annotated writes, which it refuses by the same
    rule. (The chart used to keep the not-written-by-the-node-itself condition
    then, so a node could annotate its own Lease with nothing to judge it.) The
    webhook configuration is rendered against the cluster (Helm's lookup keeps the
    installed CA), applied in place of the installed one with the policy deleted,
    and both restored afterwards."""
    sets = [a for s in env.pc.sets for a in ("--set", s)]

    def rendered(*more):
        return render_against_cluster(env, "--no-hooks", *sets, *more)

    def apply(docs):
        p = env.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        expect(p.returncode == 0, p.stderr[-500:])

    admission = ("ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    installed = [d for d in rendered() if d["kind"] in admission]
    without = [d for d in rendered("--set", "admissionPolicy.enabled=false") if d["kind"] in admission]
    expect([d["kind"] for d in without] == ["ValidatingWebhookConfiguration"], [d["kind"] for d in without])
    node = env.node("hz-2")
    try:
        for d in installed:
            if d["kind"] != "ValidatingWebhookConfiguration":
                env.kubectl("delete", d["kind"].lower(), d["metadata"]["name"], check=True)
        apply(without)
        before = webhook_calls(env)

        def refused():
            lease = expect_status(node.request("GET", f"{NODE_LEASES}/hz-2"), 200).json()
            lease["metadata"].setdefault("annotations", {})[DELEGATE] = "true"
            lease["spec"]["renewTime"] = microtime()
            r = node.request("PUT", f"{NODE_LEASES}/hz-2", lease)
            expect(r.status in (200, 403), f"{r.status} {r.body[:300]}")
            if r.status == 200:  # kube-apiserver's admission caches had not caught up yet: undo it
                lease = r.json()
                del lease["metadata"]["annotations"][DELEGATE]
                expect_status(env.cluster.admin().request("PUT", f"{NODE_LEASES}/hz-2", lease), 200)
                return None
            msg = r.json()["message"]
            # The deleted policy may still answer until kube-apiserver's cache drops it.
            return msg if "admission webhook" in msg else None
        msg = wait_for("the webhook's refusal of hz-2 annotating its own Lease", refused, timeout=30)
        expect('admission webhook "delegated-heartbeat.coordination.pool" denied the request' in msg, msg)
        expect("may not add the" in msg and "hz-2" in msg, msg)
        expect(webhook_calls(env) > before, f"webhook calls: {before} -> {webhook_calls(env)}")
    finally:
        apply(installed)


def node_identities_get_every_rule(env):
    """Node client certificates, through kube-apiserver's front proxy: poolcoord
    knows each node by the X-Remote-User the aggregator sends, and its answers
    (status, reason, message) arrive unchanged."""
    hz1, hz2, bj1 = env.node("hz-1"), env.node("hz-2"), env.node("bj-1")
    pl = BASE + "/poolleases"
    r = expect_status(hz1.request("POST", pl, pool_lease_body("hangzhou", "hz-1")), 201)
    expect(r.json()["spec"]["holderIdentity"] == "hz-1", r.body)
    r = expect_status(hz2.request("PUT", pl + "/hangzhou",
                                  {**pool_lease_body("hangzhou", "hz-2", transitions=1),
                                   "metadata": {"name": "hangzhou",
                                                "resourceVersion": r.json()["metadata"]["resourceVersion"]}}),
                      409, "Conflict")
    expect('is held by "hz-1" until' in r.json()["message"], r.body)
    r = expect_status(hz1.request("POST", pl, pool_lease_body("beijing", "hz-1")), 403, "Forbidden")
    expect('node "hz-1" is not a member of pool "beijing"' in r.json()["message"], r.body)
    r = expect_status(bj1.request("POST", pl, pool_lease_body("beijing", "bj-2")), 403, "Forbidden")
    expect("for another node" in r.json()["message"], r.body)
    stranger = env.node("elsewhere-1")
    r = expect_status(stranger.request("POST", pl, pool_lease_body("nowhere", "elsewhere-1")), 403, "Forbidden")
    expect("it belongs to no pool" in r.json()["message"], r.body)
    # A user that is no node: kube-apiserver's RBAC lets nobody else in at all.
    carol = env.cluster.user_client("carol", "carol")
    r = carol.request("GET", pl)
    expect(r.status == 403 and "cannot list resource" in r.json()["message"], f"{r.status} {r.body[:200]}")

    dl = BASE + "/delegatedleases"
    r = expect_status(hz1.request("POST", dl, delegated_body("hz-3", "hangzhou", "hz-1", annotated=False)),
                      422, "Invalid")
    causes = r.json()["details"]["causes"]
    expect(any(DELEGATE in c.get("field", "") + c.get("message", "") for c in causes), causes)
    r = expect_status(hz2.request("POST", dl, delegated_body("hz-3", "hangzhou", "hz-2")), 403, "Forbidden")
    expect('node "hz-2" is not the leader of pool "hangzhou"' in r.json()["message"], r.body)
    r = expect_status(bj1.request("POST", dl, delegated_body("hz-3", "hangzhou", "bj-1")), 403, "Forbidden")
    expect("only the leader of pool" in r.json()["message"], r.body)
    created = expect_status(hz1.request("POST", dl, delegated_body("hz-3", "hangzhou", "hz-1")), 201).json()
    expect(created["metadata"]["labels"].get("coordination.pool/pool") == "hangzhou", created["metadata"])
    stale = dict(created)
    stale["spec"] = dict(created["spec"], renewTime=microtime())
    expect_status(hz1.request("PUT", dl + "/hz-3", stale), 200)
    r = expect_status(hz1.request("PUT", dl + "/hz-3", stale), 409, "Conflict")
    expect("the object has been modified" in r.json()["message"], r.body)
    expect_status(hz1.request("DELETE", dl + "/hz-3"), 200)


def the_forwarders_writes_skip_the_webhook(env):
    """On the memory store the chart's matchConditions leave out the forwarder's
    own writes (as the chart's ServiceAccount): its annotated write of a delegated
    node's Lease is admitted by kube-apiserver without a call to poolcoord, which
    would only have repeated the forwarder's own check."""
    hz1 = env.node("hz-1")
    before = webhook_calls(env)
    expect_status(hz1.request("POST", BASE + "/delegatedleases", delegated_body("hz-4", "hangzhou", "hz-1")), 201)

    def forwarded():
        lease = env.cluster.admin().request("GET", f"{NODE_LEASES}/hz-4").json()
        return (lease["metadata"].get("annotations") or {}).get(DELEGATE) == "true" and lease
    wait_for("the forwarder's write of hz-4's Lease", forwarded, timeout=30)
    expect(webhook_calls(env) == before, f"the forwarder's write went to the webhook: {before} -> "
                                         f"{webhook_calls(env)}")
    expect_status(hz1.request("DELETE", BASE + "/delegatedleases/hz-4"), 200)


def direct_client_certificates_authenticate(env):
    """Defect 6: with no --client-ca-file (the chart gives none), the client CA of
    kube-system/extension-apiserver-authentication authenticates client
    certificates, so the warning that they "authenticate nobody" was wrong."""
    log = env.pc.proc.log(0)
    expect("authenticate nobody" not in log, "the start-up warning is back")
    expect("client CA: yes" in log, log[-1500:])
    direct = env.pc.direct(cert=env.cluster.pki.node("hz-1"))
    r = direct.request("GET", BASE + "/poolleases")
    expect(r.status != 401, f"a node certificate straight to poolcoord: {r.status} {r.body[:200]}")


def chart_dry_run_for_each_values_variant(env):
    variants = {
        "memory (defaults)": [],
        "etcd3 with replicas": ["--set", "storage.backend=etcd3,replicas=3",
                                "--set", "storage.etcd.servers={https://etcd-0.etcd:2379,https://etcd-1.etcd:2379}"],
        "webhook failurePolicy Fail": ["--set", "webhook.failurePolicy=Fail"],
    }
    for what, args in variants.items():
        text = helm_template(*args)
        p = env.kubectl("apply", "--dry-run=server", "-f", "-", stdin=text)
        expect(p.returncode == 0, f"{what}: kubectl apply --dry-run=server: {p.stderr[-800:]}")
        n = len(yaml_objects(text))
        expect(p.stdout.count("(server dry run)") == n, f"{what}: {n} objects, dry run said:\n{p.stdout}")
    # The API server's own validation refuses a broken chart (not just Helm's schema).
    broken = helm_template().replace("failurePolicy: Ignore", "failurePolicy: Sometimes")
    p = env.kubectl("apply", "--dry-run=server", "-f", "-", stdin=broken)
    expect(p.returncode != 0 and "failurePolicy" in p.stderr, p.stderr[-500:])


def helm_lookup_keeps_the_serving_secret(env):
    """An upgrade rendered against the cluster (`--dry-run=server`, Helm's lookup)
    reuses the installed Secret, so the APIService and webhook keep their CA."""
    installed = env.pc.one("Secret")["data"]
    docs = render_against_cluster(env, *[a for s in env.pc.sets for a in ("--set", s)])
    secret = [d for d in docs if d["kind"] == "Secret"][0]
    expect(secret["data"] == installed, "the upgrade generated a new CA")
    api = [d for d in docs if d["kind"] == "APIService"][0]
    expect(api["spec"]["caBundle"] == installed["ca.crt"], "APIService caBundle changed")
    # Given certificates win over the installed Secret.
    ca_pem = "-----BEGIN CERTIFICATE-----\nUSER-CA\n-----END CERTIFICATE-----\n"
    docs = render_against_cluster(env, "--set-string", f"tls.caCert={ca_pem},tls.cert=CERT,tls.key=KEY")
    given = [d for d in docs if d["kind"] == "Secret"][0]["data"]["ca.crt"]
    expect(base64.b64decode(given).decode() == ca_pem, "tls values did not win over the installed Secret")
    offline = yaml_objects(helm_template(*[a for s in env.pc.sets for a in ("--set", s)]))
    expect([d for d in offline if d["kind"] == "Secret"][0]["data"]["ca.crt"] != installed["ca.crt"],
           "without the cluster, lookup finds nothing and a CA is generated")


def helm_install_prints_notes(env):
    p = env.notes  # `helm install --dry-run=server`, run before the chart was applied
    expect(p.returncode == 0, p.stderr[-800:])
    notes = p.stdout[p.stdout.find("NOTES:"):]
    expect("kubectl get apiservice v1alpha1.coordination.pool" in notes, notes)
    expect("0.0.0.0/0" in notes, "NOTES must warn about the open default CIDR")
    expect("PrometheusRule was not installed" in notes, notes)


def controller_manager_informers_do_not_relist(env):
    """Defects 4 and 5, as kube-controller-manager meets them: its garbage
    collector and quota controller watch our resources with metadata informers
    (watch-list first, PartialObjectMetadata). With the watch-list refused (422)
    they fell back to LIST+WATCH, and with a BOOKMARK they could not decode
    (kind DelegatedLease in a PartialObjectMetadata stream) they relisted every
    minute. Now: no 422, no LIST, and no new watch across our bookmark interval
    (60 s)."""
    pc = env.pc

    def informers_watching():
        # One shared metadata informer per resource (garbage collector and quota).
        return all(pc.metric("apiserver_request_total", verb="WATCH", resource=r, code="200") >= 1
                   for r in ("poolleases", "delegatedleases"))
    wait_for("kube-controller-manager's informers on our resources", informers_watching, timeout=120, every=1)
    resources = ("poolleases", "delegatedleases")
    counts = lambda verb, **kw: {r: pc.metric("apiserver_request_total", verb=verb, resource=r, **kw)
                                 for r in resources}
    watches, lists = counts("WATCH"), counts("LIST")
    # Past one bookmark of every watch open now (each sends one 60 s after it began).
    time.sleep(75)
    refused, watches_after, lists_after = counts("WATCH", code="422"), counts("WATCH"), counts("LIST")
    for r in resources:
        expect(refused[r] == 0, f"watch-list of {r} refused {refused[r]} times")
        expect(lists_after[r] == lists[r], f"{r}: {lists_after[r] - lists[r]} LISTs in 75 s (a fallback)")
        expect(watches_after[r] == watches[r],
               f"{r}: {watches_after[r] - watches[r]} new watches in 75 s: informers relisted")
    kcm_log = env.cluster.kcm.log(0)
    bad = [l for l in kcm_log.splitlines()
           if ("coordination.pool" in l or "DelegatedLease" in l or "PoolLease" in l)
           and ("unable to decode" in l or "falling back" in l)]
    expect(not bad, "kube-controller-manager:\n" + "\n".join(bad[:5]))


CASES = [apiservice_available, aggregated_discovery_and_openapi, plain_renewals_never_reach_the_webhook,
         admission_policy_refuses_a_node_annotating_itself, node_identities_get_every_rule,
         the_forwarders_writes_skip_the_webhook, without_the_policy_the_webhook_judges_the_node,
         direct_client_certificates_authenticate,
         kubectl_through_the_aggregator, chart_dry_run_for_each_values_variant,
         helm_lookup_keeps_the_serving_secret, helm_install_prints_notes,
         controller_manager_informers_do_not_relist]

if __name__ == "__main__":
    sys.exit(run_cluster_cases(CASES, Env, __doc__))
